"""The checks every registered selector passes, in the manner of scikit-learn's
``check_estimator`` / ``parametrize_with_checks``: ``check_selector(name)`` runs them all on one
selector of :data:`~divopt_rag.solvers.METHODS`, and a new method (a plugin's too) gets them for
free, since the test suite parametrizes them over the registry::

    from divopt_rag.solvers.checks import check_selector, parametrize_with_checks

    check_selector("my_method")            # AssertionError naming the check that fails

    @parametrize_with_checks()             # pytest: one test per (selector, check)
    def test_selector(name, check):
        check(name)

Each check builds its small pools here (unit rows, n <= 24) and compares with a truth computed
here in float64 numpy (DESIGN.md's objective), so the whole suite costs about a second a
selector. What every selector must do:

* return exactly k distinct indices of the pool, scored by the CCBQP objective of the selection;
* keep the input's device and storage dtype: run on float64, float32, float16 and bfloat16 rows,
  return its indices on the input's device (cuda too, when there is one), and leave the caller's
  tensors as they were (values, dtype, device, autograd flag);
* be deterministic: the same instance (or an equal copy) gives the same indices;
* follow the rules every method shares: k = 1 gives the most relevant item (its own relevance
  for the cross-encoder methods), degenerate pools (identical rows, k = n, n = 1) give the optimum;
* refuse bad input before it runs: a non-Instance, an unknown parameter, and every value its
  declaration refuses, with the validator's one-line message.

The inputs a method needs beyond the Instance (``METHOD_NEEDS``: the cross-encoder's scores) are
given as precomputed scores (:func:`selector_inputs`).
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Iterable

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.parameters import InvalidParameterError, shown

from .selection import METHOD_NEEDS, METHOD_PARAMS, METHODS, get_selector, select
from divopt_rag.models.names import did_you_mean

__all__ = ["CHECKS", "check_selector", "parametrize_with_checks", "selector_inputs", "devices"]

_N, _D, _K = 24, 6, 4
_STORAGE = (torch.float64, torch.float32, torch.float16, torch.bfloat16)


def devices() -> list[str]:
    """The devices the checks run on: the CPU, and CUDA when torch sees one."""
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _pool(n: int = _N, d: int = _D, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, d))
    q = rng.standard_normal(d)
    return E / np.linalg.norm(E, axis=1, keepdims=True), q / np.linalg.norm(q)


def _objective(E: np.ndarray, q: np.ndarray, S: Iterable[int], k: int, theta: float) -> float:
    """DESIGN.md, float64: f = theta (k-1) c^T x + (1-theta)(k - ||E^T x||^2), c = E q."""
    S = list(S)
    v = E[S].sum(0)
    return theta * (k - 1) * float((E[S] @ q).sum()) + (1 - theta) * (len(S) - float(v @ v))


def selector_inputs(method: str, inst: Instance, seed: int = 1, requires_grad: bool = False) -> dict[str, Any]:
    """What ``method`` needs beyond the Instance (:data:`~divopt_rag.solvers.METHOD_NEEDS`), on
    the instance's device: a cross-encoder method gets precomputed query scores (and pair scores
    where its declaration takes them), random and seeded; {} for a self-contained selector."""
    if "cross_encoder" not in METHOD_NEEDS.get(method, ()):
        return {}
    rng = np.random.default_rng(seed)
    n = inst.n
    extra = {"query_scores": torch.tensor(rng.normal(size=n) * 5, device=inst.device, requires_grad=requires_grad)}
    if "pair_scores" in METHOD_PARAMS[method].params:
        extra["pair_scores"] = torch.tensor(rng.normal(size=(n, n)) * 5, device=inst.device,
                                            requires_grad=requires_grad)
    return extra


def _valid(name: str, sel: Any, k: int, n: int, where: str) -> None:
    idx = sel.indices
    assert isinstance(idx, np.ndarray) and idx.dtype == np.int64 and idx.shape == (k,), \
        f"{name} ({where}): expected {k} int64 indices, got {idx!r}"
    assert len(set(idx.tolist())) == k and idx.min() >= 0 and idx.max() < n, \
        f"{name} ({where}): indices not {k} distinct rows of [0, {n}): {idx.tolist()}"
    assert math.isfinite(sel.objective) and sel.seconds >= 0 and sel.method == name, f"{name} ({where}): {sel!r}"


# ---- the checks ------------------------------------------------------------------------------
def check_k_distinct_indices(name: str) -> None:
    """k distinct rows, scored by the CCBQP objective (float64 formula written here), at several
    k and theta, k = n included."""
    E, q = _pool()
    for k, theta in ((2, 0.0), (_K, 0.5), (7, 1.0), (_N, 0.3)):
        inst = Instance(E, q, k=k, theta=theta)
        sel = select(inst, name, **selector_inputs(name, inst))
        _valid(name, sel, k, _N, f"k={k}, theta={theta}")
        f = _objective(E, q, sel.indices, k, theta)
        assert abs(sel.objective - f) <= 1e-9 * max(1.0, abs(f)), f"{name}: objective {sel.objective} != formula {f}"


def check_storage_dtypes(name: str) -> None:
    """float64, float32, float16 and bfloat16 rows: a valid selection each time, the instance's
    rows left in their dtype, on their device, with their values."""
    E, q = _pool(seed=1)
    for device in devices():
        for dtype in _STORAGE:
            inst = Instance(torch.from_numpy(E).to(dtype), q, k=_K, theta=0.6, normalize=True).to(device)
            before = inst.E.clone()
            sel = select(inst, name, **selector_inputs(name, inst))
            _valid(name, sel, _K, _N, f"{dtype} on {device}")
            assert inst.E.dtype == dtype and inst.E.device.type == device and torch.equal(inst.E, before), \
                f"{name}: changed the instance's rows ({dtype} on {device})"


def check_device_follows_input(name: str) -> None:
    """The selector's own result (before ``select`` turns it into numpy) lies on the input's
    device when it is a tensor, and its objective matches the CPU run's up to rounding."""
    E, q = _pool(seed=2)
    ref = None
    for device in devices():
        inst = Instance(E.astype(np.float32), q.astype(np.float32), k=_K, theta=0.5).to(device)
        extra = selector_inputs(name, inst)
        idx, _, info = get_selector(name)(inst, **extra)
        if isinstance(idx, torch.Tensor):
            assert idx.device.type == inst.device.type, f"{name}: indices on {idx.device}, input on {inst.device}"
        assert isinstance(info, dict), f"{name}: info must be a dict, got {type(info).__name__}"
        sel = select(inst, name, **extra)
        ref = sel.objective if ref is None else ref
        assert abs(sel.objective - ref) <= 1e-4 * _K * (_K - 1), f"{name}: {device} gives {sel.objective}, cpu {ref}"


def check_deterministic(name: str) -> None:
    """The same instance, twice, and an equal copy of it: the same indices."""
    E, q = _pool(seed=3)
    inst = Instance(E, q, k=_K, theta=0.4)
    extra = selector_inputs(name, inst)
    first = select(inst, name, **extra).indices.tolist()
    assert select(inst, name, **extra).indices.tolist() == first, f"{name}: two calls differ"
    copy = Instance(E.copy(), q.copy(), k=_K, theta=0.4)
    assert select(copy, name, **selector_inputs(name, copy)).indices.tolist() == first, f"{name}: an equal copy differs"


def check_inputs_that_require_grad(name: str) -> None:
    """Tensors that require grad (E, q, relevance, scores) give the same selection as their
    detached values, and keep their autograd flag and values."""
    E0, q0 = _pool(seed=4)
    E = torch.tensor(E0, requires_grad=True)
    q = torch.tensor(q0, requires_grad=True)
    before = E.detach().clone()
    plain_inst = Instance(E.detach().clone(), q.detach().clone(), k=_K, theta=0.5)
    plain = select(plain_inst, name, **selector_inputs(name, plain_inst))
    inst = Instance(E, q, k=_K, theta=0.5)
    got = select(inst, name, **selector_inputs(name, inst, requires_grad=True))
    assert got.indices.tolist() == plain.indices.tolist(), f"{name}: grad inputs change the selection"
    assert abs(got.objective - plain.objective) <= 1e-9
    assert E.requires_grad and q.requires_grad and E.grad is None and torch.equal(E.detach(), before)
    rel = (E.detach() @ q.detach()) * 2.0
    rel.requires_grad_(True)
    inst = Instance(E, relevance=rel, k=_K, theta=0.5)
    _valid(name, select(inst, name, **selector_inputs(name, inst, requires_grad=True)), _K, _N, "relevance with grad")


def check_k1_rule(name: str) -> None:
    """k = 1: the most relevant item (ties to the lowest index, a duplicated top row included);
    a cross-encoder method: its own best-scored item."""
    E, q = _pool(n=12, d=5)
    for theta in (0.0, 0.5, 1.0):
        inst = Instance(E, q, k=1, theta=theta)
        extra = selector_inputs(name, inst)
        score = extra["query_scores"].detach().cpu().numpy() if extra else E @ q
        sel = select(inst, name, **extra)
        assert sel.indices.tolist() == [int(np.argmax(score))], f"{name}: k = 1 gave {sel.indices.tolist()}"
        assert abs(sel.objective) <= 1e-12
    if not METHOD_NEEDS.get(name):
        top = int(np.argmax(E @ q))
        E2 = np.vstack([E[:top], E[top:top + 1], E[top:]])  # the top row twice: at top and top + 1
        assert select(Instance(E2, q, k=1, theta=0.3), name).indices.tolist() == [top], f"{name}: k = 1 tie"


def check_degenerate_pools(name: str) -> None:
    """All rows identical, k = n, n = 1: every k-set is optimal, or there is one; the selector
    reaches the optimum of an enumeration written here."""
    E, q = _pool(n=7, d=4, seed=2)
    for theta in (0.0, 0.5, 1.0):
        for rows, k in ((np.repeat(E[:1], 6, axis=0), 3), (E, len(E)), (E[:1], 1)):
            inst = Instance(rows, q, k=k, theta=theta)
            sel = select(inst, name, **selector_inputs(name, inst))
            _valid(name, sel, k, len(rows), f"degenerate n={len(rows)}, k={k}")
            opt = max(_objective(rows, q, S, k, theta) for S in itertools.combinations(range(len(rows)), k))
            assert abs(sel.objective - opt) <= 1e-9, f"{name}: {sel.objective} below the optimum {opt}"
            assert abs(sel.objective - _objective(rows, q, sel.indices, k, theta)) <= 1e-9


#: Values tried against each declared parameter; every one its declaration refuses must be
#: refused by ``select`` with the validator's message.
_PROBES: tuple[Any, ...] = (object(), "\x00nosuch", math.nan, -1, 2**70, 2.5, True, (1, 2, 3), None, np.ones((2, 2, 2)))


def check_bad_inputs_refused(name: str) -> None:
    """A non-Instance, an unknown parameter, and each value a declared parameter refuses: one
    line naming it, before the selector runs (the declaration's message)."""
    E, q = _pool(n=10, d=4, seed=5)
    inst = Instance(E, q, k=3, theta=0.5)
    extra = selector_inputs(name, inst)
    try:
        select((E, q), name, **extra)
    except TypeError as exc:
        assert "instance must be a divopt_rag.models.Instance" in str(exc), f"{name}: {exc}"
    else:
        raise AssertionError(f"{name}: accepted a tuple for the instance")
    try:
        select(inst, name, **extra, no_such_parameter_=1)
    except InvalidParameterError as exc:
        assert str(exc).startswith(f"{name} has no parameter 'no_such_parameter_'"), f"{name}: {exc}"
    else:
        raise AssertionError(f"{name}: accepted an unknown parameter")
    decl = METHOD_PARAMS[name]
    for param, p in decl.params.items():
        refused = [v for v in _PROBES if not p.accepts(v)]
        assert refused, f"{name}: parameter {param!r} refuses none of the probes (declare its type and range)"
        for value in refused:
            want = f"The {param!r} parameter of {name} must be {p.expected()}. Got {shown(value)} instead."
            try:
                select(inst, name, **{**extra, param: value})
            except InvalidParameterError as exc:
                assert str(exc) == want, f"{name}: {exc!s} != {want}"
            else:
                raise AssertionError(f"{name}: accepted {param}={value!r}, which its declaration refuses")


#: Every check, in the order :func:`check_selector` runs them.
CHECKS: tuple[Callable[[str], None], ...] = (
    check_k_distinct_indices,
    check_storage_dtypes,
    check_device_follows_input,
    check_deterministic,
    check_inputs_that_require_grad,
    check_k1_rule,
    check_degenerate_pools,
    check_bad_inputs_refused,
)


def check_selector(name: str) -> None:
    """Run every check of :data:`CHECKS` on the registered selector ``name``; AssertionError
    naming the selector and what failed."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; {did_you_mean(name, METHODS)}expected one of {sorted(METHODS)}")
    for check in CHECKS:
        check(name)


def parametrize_with_checks(names: Iterable[str] | None = None):
    """A pytest ``parametrize`` over (selector, check) pairs, every registered selector by
    default (read when the test module is collected), ids ``<selector>-<check>``."""
    import pytest

    names = sorted(METHODS) if names is None else list(names)
    pairs = [(n, c) for n in names for c in CHECKS]
    return pytest.mark.parametrize("name, check", pairs,
                                   ids=[f"{n}-{c.__name__.removeprefix('check_')}" for n, c in pairs])
