"""Adding a selector: register it once and every command runs it by name, with nothing else to
edit (docs/design.md, "Adding a selector"): ``select``, ``certify``, ``sweep``, ``bench latency``
and ``bench quality`` (small pools and large pools) take their method lists from the registry."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from divopt_rag.data import load
from divopt_rag.experiments.cli.main import main
from divopt_rag.experiments.studies import runs
from divopt_rag.experiments.studies.certify import CertifyConfig, dataset_spec, run_certify
from divopt_rag.experiments.studies.grid import SweepConfig
from divopt_rag.experiments.studies.sweep import run_sweep
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.solvers import instance_methods, register, select, selection

NAME = "_least_relevant_test"


def _least_relevant(inst: Instance):
    """A throwaway selector: the k least relevant rows (ties by position)."""
    c = inst.relevance.double().cpu().numpy()
    return np.argsort(c, kind="stable")[: inst.k], 0, {}


@pytest.fixture
def throwaway():
    register(NAME)(_least_relevant)  # the one line a new selector adds
    try:
        yield NAME
    finally:
        selection._REGISTRY.pop(NAME, None)


def _truth(inst: Instance) -> list[int]:
    c = inst.relevance.double().cpu().numpy()
    return sorted(range(inst.n), key=lambda i: (c[i], i))[: inst.k]


def test_select_certify_and_sweep_run_a_new_selector_by_name(throwaway, tmp_path):
    rng = np.random.default_rng(0)
    inst = Instance(rng.standard_normal((30, 5)), rng.standard_normal(5), k=3, theta=0.5, normalize=True)
    assert select(inst, throwaway).indices.tolist() == _truth(inst)
    assert throwaway in instance_methods()

    cfg = CertifyConfig(dataset="synthetic", n=8, k=3, thetas=(0.5,), queries=1, corpus_size=60, dim=6, solver="brute")
    df = run_certify(cfg, tmp_path / "certify", progress=False).table  # default methods: the registry
    row = df[df.method == throwaway].iloc[0]
    pool = runs.query_instance(load(dataset_spec(cfg)), 0, pool=8)[0].replace(k=3, theta=0.5)
    opt = max(ccbqp_objective(pool, list(s)) for s in itertools.combinations(range(8), 3))
    f = ccbqp_objective(pool, _truth(pool))
    assert row.objective == pytest.approx(f) and row.gap == pytest.approx((opt - f) / 6, abs=1e-12)

    sweep = SweepConfig.from_dict({"dataset": {"name": "synthetic", "n": 40, "d": 6, "n_queries": 2},
                                   "methods": [throwaway], "grid": {"k": [3], "theta": [0.5]}})
    t = run_sweep(sweep, tmp_path / "sweep", n_workers=0, progress=False).table
    assert (t.status == "ok").all() and len(t) == 2


def test_bench_latency_and_quality_run_a_new_selector_by_default(throwaway, tmp_path, monkeypatch):
    assert main(["bench", "latency", "--n", "400", "--d", "8", "--k", "3", "--theta", "0.5", "--repeats", "1",
                 "--langchain", "", "--out", str(tmp_path / "latency"), "--no-progress"]) == 0
    lat = pd.read_csv(tmp_path / "latency" / "latency.csv")
    assert set(lat["method"]) == set(instance_methods()) and (lat[lat.method == throwaway]["seconds"] > 0).all()

    import divopt_rag.experiments.studies.sweep as sweep_module

    data = load("synthetic", n=30, d=6, n_queries=1, seed=1)
    real = sweep_module.load_dataset
    monkeypatch.setattr(sweep_module, "load_dataset", lambda spec, **kw: data if spec["name"] == "wordnet_glosses"
                        else real(spec, **kw))  # a stand-in for the WordNet glosses
    assert main(["bench", "quality", "--parts", "small,large", "--queries", "1", "--pool", "8", "--k", "3",
                 "--theta", "0.5", "--solver", "auto", "--large-n", "500", "--large-d", "8", "--large-k", "3",
                 "--large-queries", "1", "--large-theta", "0.5", "--repeats", "1", "--cache-dir", str(tmp_path / "c"),
                 "--out", str(tmp_path / "quality"), "--no-progress"]) == 0
    small = pd.read_parquet(tmp_path / "quality" / "small" / "results.parquet")
    large = pd.read_parquet(tmp_path / "quality" / "large" / "results.parquet")
    for table in (small, large):
        assert throwaway in set(table["method"])
    assert small[small.method == throwaway]["gap"].notna().all()
