import numpy as np
import pytest
import torch

from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.solvers import select

from helpers.pools import random_unit, unit_query


def test_accepts_numpy_and_torch_without_copy():
    E = random_unit(20, 5, 0, np.float32)
    inst = Instance(E, unit_query(5, 0).astype(np.float32), k=3, theta=0.5)
    assert inst.E.data_ptr() == torch.from_numpy(E).data_ptr()
    assert inst.n == 20 and inst.d == 5
    np.testing.assert_allclose(inst.relevance.numpy(), E @ unit_query(5, 0).astype(np.float32), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(k=0), ValueError, r"1 <= k <= n = 20, got k = 0"),
        (dict(k=21), ValueError, r"k = 21"),
        (dict(k=2.5), TypeError, r"k must be an integer"),
        (dict(theta=1.5), ValueError, r"theta must lie in \[0, 1\]"),
        (dict(theta=-0.1), ValueError, r"theta must lie in \[0, 1\]"),
        (dict(theta=float("nan")), ValueError, r"theta"),
    ],
)
def test_parameter_errors(kwargs, err, match):
    args = dict(k=3, theta=0.5) | kwargs
    with pytest.raises(err, match=match):
        Instance(random_unit(20, 5, 0), unit_query(5, 0), **args)


def test_nonfinite_embeddings_named_with_position():
    E = random_unit(10, 4, 1)
    E[7, 2] = np.nan
    with pytest.raises(ValueError, match=r"non-finite.*row 7, column 2"):
        Instance(E, unit_query(4, 1), k=2, theta=0.5)
    E[7, 2] = np.inf
    with pytest.raises(ValueError, match=r"non-finite"):
        Instance(E, unit_query(4, 1), k=2, theta=0.5)


def test_shape_errors():
    with pytest.raises(ValueError, match=r"E must be 2-D"):
        Instance(np.ones(5), np.ones(5), k=1, theta=0.5)
    with pytest.raises(ValueError, match=r"empty pool"):
        Instance(np.zeros((0, 4)), unit_query(4, 0), k=1, theta=0.5)
    with pytest.raises(ValueError, match=r"q must have length 4 \(the embedding dimension d\), got length 3"):
        Instance(random_unit(6, 4, 0), unit_query(3, 0), k=1, theta=0.5)
    with pytest.raises(ValueError, match=r"relevance must have length 6"):
        Instance(random_unit(6, 4, 0), relevance=np.ones(5), k=1, theta=0.5)
    with pytest.raises(ValueError, match=r"needs a query q or user-supplied relevance"):
        Instance(random_unit(6, 4, 0), k=1, theta=0.5)


def test_unit_norm_required_unless_normalize():
    rng = np.random.default_rng(0)
    E = rng.standard_normal((8, 3))
    with pytest.raises(ValueError, match=r"unit norm.*normalize=True"):
        Instance(E, unit_query(3, 0), k=2, theta=0.5)
    inst = Instance(E, 3 * unit_query(3, 0), k=2, theta=0.5, normalize=True)
    np.testing.assert_allclose(torch.linalg.vector_norm(inst.E, dim=1).numpy(), 1.0, atol=1e-12)
    with pytest.raises(ValueError, match=r"all zeros"):
        Instance(np.vstack([E, np.zeros(3)]), unit_query(3, 0), k=2, theta=0.5, normalize=True)


def test_unknown_method_and_param():
    inst = Instance(random_unit(10, 4, 0), unit_query(4, 0), k=3, theta=0.5)
    with pytest.raises(ValueError, match=r"unknown method 'nope'; expected one of"):
        select(inst, "nope")
    with pytest.raises(TypeError, match=r"bogus"):
        select(inst, "fw", bogus=1)


def test_objective_index_errors():
    inst = Instance(random_unit(10, 4, 0), unit_query(4, 0), k=3, theta=0.5)
    with pytest.raises(ValueError, match=r"unique"):
        ccbqp_objective(inst, [1, 1, 2])
    with pytest.raises(ValueError, match=r"\[0, 10\)"):
        ccbqp_objective(inst, [1, 2, 10])


def test_low_precision_storage_accumulates_in_float32():
    from divopt_rag.models.kernels import matvec, rmatvec

    E = random_unit(70_000, 16, 3, np.float32)  # > one row block, exercises the blocked path
    v = torch.randn(16, dtype=torch.float32)
    for dt in (torch.float16, torch.bfloat16):
        Eh = torch.from_numpy(E).to(dt)
        ref = Eh.double() @ v.double()
        out = matvec(Eh, v)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
        x = torch.rand(70_000)
        torch.testing.assert_close(rmatvec(Eh, x).double(), Eh.double().T @ x.double(), rtol=1e-4, atol=1e-3)
        inst = Instance(Eh, unit_query(16, 3).astype(np.float32), k=5, theta=0.5)
        assert inst.relevance.dtype == torch.float32
