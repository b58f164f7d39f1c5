"""The one executor: part files carry their key inside and are checked before reuse (a part
copied over another, a foreign file, a truncated one: rejected with a warning naming the file
and recomputed, or an error naming it when nothing may run); one run key per task, which follows
the content of the data (a changed corpus file runs again exactly the rows that read it); the
folder holds one configuration; the exact gap is a post-step; summaries and plots never average
over a setting that varies."""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from divopt_rag.data import load as load_dataset
from divopt_rag.experiments.engine import executor
from divopt_rag.experiments.engine.parts import KEY_METADATA, PartError, PartWarning
from divopt_rag.experiments.engine.plan import Plan, RunSpec, make_task
from divopt_rag.experiments.measures import tables
from divopt_rag.experiments.plots import figures
from divopt_rag.experiments.studies import runs, sweep as sw
from divopt_rag.experiments.studies.grid import SweepConfig
from divopt_rag.experiments.studies.sweep_command import summarize
from divopt_rag.models import Instance
from divopt_rag.solvers import select

TINY = {"name": "synthetic", "n": 60, "d": 16, "n_queries": 3, "seed": 5}


@dataclass
class Squares(RunSpec):
    """A spec with a known answer: task i (k = i + 1) has value k * k."""

    n: int = 6
    command: ClassVar[str] = "squares"
    calls: ClassVar[list[str]] = []

    def config(self):
        return {"n": self.n}

    def plan(self, out: Path) -> Plan:
        return Plan([make_task(i, config_hash=self.config_hash, data_key="ints", query_id=f"q{i}", method="square",
                               params={"k": i + 1}) for i in range(self.n)], data_keys={"ints": "ints"})

    def execute(self, state, task):
        Squares.calls.append(task.key)
        return {"value": task.params["k"] ** 2}


def _run(out, **kw):
    Squares.calls.clear()
    return executor.run(Squares(**kw), out, progress=False)


def _check_squares(table: pd.DataFrame, n: int = 6) -> None:
    assert len(table) == n and table["run_key"].is_unique  # one row per task, one key per row
    assert table["value"].tolist() == [k * k for k in table["k"]] and sorted(table["k"]) == list(range(1, n + 1))


# ---- parts: the key inside, and what happens to a part that does not match ------------------------
def test_every_part_carries_its_key_in_its_metadata_and_rows(tmp_path):
    res = _run(tmp_path)
    _check_squares(res.table)
    for t in res.tasks:
        path = tmp_path / "parts" / f"{t.key}.parquet"
        table = pq.read_table(path)
        assert table.schema.metadata[KEY_METADATA] == t.key.encode()
        assert table.column("run_key").to_pylist() == [t.key]
    again = _run(tmp_path)
    assert again.n_executed == 0 and not Squares.calls  # resumed: nothing runs twice


@pytest.mark.parametrize("damage", ["copied over another", "foreign parquet", "truncated", "empty file"])
def test_a_damaged_part_is_never_used(tmp_path, damage):
    res = _run(tmp_path)
    keys = [t.key for t in res.tasks]
    victim = tmp_path / "parts" / f"{keys[3]}.parquet"
    if damage == "copied over another":
        shutil.copy(tmp_path / "parts" / f"{keys[1]}.parquet", victim)  # 6 files, 5 distinct keys inside
    elif damage == "foreign parquet":
        pd.DataFrame({"run_key": [keys[3]], "value": [-1]}).to_parquet(victim)  # right key column, no key inside
    elif damage == "truncated":
        victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    else:
        victim.write_bytes(b"")
    # consolidating without running: an error naming the file
    with pytest.raises(PartError, match=str(victim)):
        executor.consolidate_only(Squares(), tmp_path)
    # running: the part is set aside with a warning naming it, and only its task runs again
    with pytest.warns(PartWarning, match=victim.name):
        again = _run(tmp_path)
    assert Squares.calls == [keys[3]] and again.n_executed == 1
    _check_squares(again.table)
    assert (tmp_path / "parts" / "rejected" / victim.name).exists()
    assert pq.read_table(victim).schema.metadata[KEY_METADATA] == keys[3].encode()


def test_a_sweep_part_copied_over_another_gives_twelve_rows_of_twelve_keys(tmp_path):
    """The issue's case: a part copied over another was consolidated silently (12 rows, 11 keys)."""
    cfg = SweepConfig.from_dict({"dataset": TINY, "methods": ["fw", "mmr"], "grid": {"k": [4], "theta": [0.3, 0.8]},
                                 "seed": 3})
    first = sw.run_sweep(cfg, tmp_path / "a", n_workers=0, progress=False).table
    assert len(first) == 12
    parts = tmp_path / "a" / "parts"
    a, b = first["run_key"].iloc[0], first["run_key"].iloc[5]
    shutil.copy(parts / f"{a}.parquet", parts / f"{b}.parquet")
    with pytest.raises(PartError, match=f"{b}.parquet: holds the rows of run {a}"):
        sw.consolidate(tmp_path / "a", cfg)
    with pytest.warns(PartWarning, match=f"{b}.parquet"):
        res = sw.run_sweep(cfg, tmp_path / "a", n_workers=0, progress=False)
    assert res.n_executed == 1 and len(res.table) == 12 and res.table["run_key"].nunique() == 12
    cols = ["run_key", "method", "theta", "query_id", "objective", "selected"]
    pd.testing.assert_frame_equal(res.table[cols], first[cols])


def test_the_folder_holds_one_configuration(tmp_path):
    _run(tmp_path)
    with pytest.raises(ValueError, match=r"holds squares .* another configuration \(n: 6 -> 4\)"):
        _run(tmp_path, n=4)
    res = executor.run(Squares(n=4), tmp_path, progress=False, new_grid=True)
    assert res.n_skipped == 4  # the tasks both grids share are reused
    old_id = Squares().run_id
    assert (tmp_path / f"results.{old_id}.parquet").exists() and (tmp_path / f"config.{old_id}.json").exists()
    _check_squares(pd.read_parquet(tmp_path / f"results.{old_id}.parquet"))


# ---- run keys follow the data's content ---------------------------------------------------------
def _write_npz(path: Path, E: np.ndarray, Q: np.ndarray) -> None:
    np.savez(path, E=E, Q=Q, doc_ids=np.array([f"d{i}" for i in range(len(E))]))


def test_a_changed_corpus_file_runs_its_rows_again(tmp_path):
    """Change a real corpus file between two sweeps in one folder: the rows that read it run
    again and equal the selectors called on the new embeddings; nothing stale is kept."""
    rng = np.random.default_rng(1)
    E, Q = rng.standard_normal((40, 8)), rng.standard_normal((2, 8))
    corpus = tmp_path / "corpus.npz"
    _write_npz(corpus, E, Q)
    cfg = SweepConfig.from_dict({"dataset": f"npz:{corpus}", "methods": ["topk", "mmr"],
                                 "grid": {"k": [3], "theta": [0.5]}})
    first = sw.run_sweep(cfg, tmp_path / "out", n_workers=0, progress=False)
    assert first.n_executed == 4
    E2 = E.copy()
    E2[:10] = rng.standard_normal((10, 8))  # a changed corpus file, same path
    _write_npz(corpus, E2, Q)
    res = sw.run_sweep(cfg, tmp_path / "out", n_workers=0, progress=False)
    assert res.n_skipped == 0 and res.n_executed == 4
    assert any("content differs" in n and "corpus" in n for n in res.notes)
    assert not set(res.table["run_key"]) & set(first.table["run_key"])
    En = E2 / np.linalg.norm(E2, axis=1, keepdims=True)
    for _, row in res.table.iterrows():
        q = Q[int(row["query_index"])]
        sel = select(Instance(En, q / np.linalg.norm(q), k=3, theta=0.5), row["method"])
        assert list(row["selected"]) == [f"d{i}" for i in sel.indices]


@pytest.mark.parametrize("pool", ["collection", "own"])
def test_a_changed_question_file_runs_again_exactly_the_rows_that_read_it(tmp_path, pool):
    """Change one passage of one RGB question: with the paper's collection every question of that
    file reads it and runs again, with ``pool=own`` only that question does; the other file's rows
    are reused either way (reproduce keys hash what each query reads)."""
    from helpers.reproduce_fakes import HashEmbedder, make_data_dir

    from divopt_rag.experiments.reproduce import RECIPES, Options, run_recipe

    data_dir = make_data_dir(tmp_path / "datasets")
    opts = lambda: Options(out=tmp_path / "out", data_dir=data_dir, model=HashEmbedder(), cache_dir=tmp_path / "cache",
                           progress=False, retrieval_only=True, overrides={"sigma": [0.1], "pool": [pool]})
    recipe = RECIPES["dartboard-sigma"]
    first = run_recipe(recipe, opts())
    path = data_dir / "rgb" / "en.json"
    lines = path.read_text().splitlines()
    q = json.loads(lines[0])
    q["negative"][0] = "Snapchat and Facebook both launched photo features in 2012."
    path.write_text("\n".join([json.dumps(q), *lines[1:]]) + "\n")
    res = run_recipe(recipe, opts())
    simple = first.rows[first.rows["dataset"] == "simple"]
    touched = res.rows["dataset"] == "simple"
    if pool == "own":
        touched &= res.rows["query_id"] == simple["query_id"].iloc[0]
    assert (~touched).any()
    assert res.n_executed == int(touched.sum()) >= 1 and res.n_skipped == res.n_runs - res.n_executed
    # the rows of the changed question have new keys, every other row kept its key (and was reused)
    assert not set(res.rows.loc[touched, "run_key"]) & set(first.rows["run_key"])
    assert set(res.rows.loc[~touched, "run_key"]) <= set(first.rows["run_key"])
    assert any("content differs" in n and "simple" in n for n in res.notes)
    fresh = run_recipe(recipe, Options(**{**opts().__dict__, "out": tmp_path / "fresh"}))
    cols = ["dataset", "query_id", "method", "sigma", "selected", "ndcg"]
    pd.testing.assert_frame_equal(res.rows[cols], fresh.rows[cols])


# ---- the exact gap is a post-step over the table ---------------------------------------------------
def test_exact_is_a_method_row_and_the_gap_a_post_step(tmp_path):
    import itertools

    from divopt_rag.models import ccbqp_objective

    cfg = SweepConfig.from_dict({"dataset": {**TINY, "n_queries": 2}, "methods": {"mmr": {}, "topk": {},
                                 "exact": {"solver": ["brute"]}}, "grid": {"k": [3], "theta": [0.4], "pool": [9]}})
    t = sw.run_sweep(cfg, tmp_path, n_workers=0, progress=False).table
    data = load_dataset(TINY | {"n_queries": 2})
    for qid, g in t.groupby("query_id"):
        inst = runs.query_instance(data, data.query_ids.index(qid), pool=9)[0].replace(k=3, theta=0.4)
        opt = max(ccbqp_objective(inst, list(s)) for s in itertools.combinations(range(9), 3))
        assert g["optimum"].to_numpy() == pytest.approx(opt) and g["proven_optimal"].all()
        for r in g.itertuples():
            assert r.gap == pytest.approx(max(0.0, (opt - r.objective) / 6), abs=1e-12)
            assert bool(r.exact_hit) == (r.gap <= 1e-9)
    assert (t[t.method == "exact"]["gap"] == 0).all()


# ---- summaries and plots never average over a setting that varies ----------------------------------
def test_sweep_summary_and_pareto_plot_keep_k_apart(tmp_path):
    """The issue's example: dpp at theta = 0.3 over --k 5 10 printed the mean of the two k."""
    cfg = SweepConfig.from_dict({"dataset": {**TINY, "n_queries": 2}, "methods": ["dpp", "mmr"],
                                 "grid": {"k": [5, 10], "theta": [0.3, 0.7]}})
    table = sw.run_sweep(cfg, tmp_path, n_workers=0, progress=False).table
    s = summarize(table)
    assert {"method", "k", "theta"} <= set(s.columns) and len(s) == 2 * 2 * 2
    for (m, k, theta), g in table.groupby(["method", "k", "theta"]):
        row = s[(s.method == m) & (s.k == k) & (s.theta == theta)]
        assert len(row) == 1 and row["objective"].iloc[0] == pytest.approx(g["objective"].mean())
        assert row["alpha_ndcg@k"].iloc[0] == pytest.approx(g[f"alpha_ndcg@{k}"].mean())  # at each row's cutoff
    dpp = s[(s.method == "dpp") & (s.theta == 0.3)]
    assert dpp["objective"].nunique() == 2  # two numbers, one per k, never their mean
    fig, drawn = figures.plot_pareto(table, x="ilad", y="alpha_ndcg")
    assert len(fig.axes) == 2 and sorted(ax.get_title() for ax in fig.axes) == ["k=10", "k=5"]
    assert "one panel per k" in fig._suptitle.get_text()
    for (m, k, theta), g in table.groupby(["method", "k", "theta"]):
        cell = drawn[(drawn.method == m) & (drawn.k == k) & (drawn.theta == theta)]
        assert cell["alpha_ndcg@k"].iloc[0] == pytest.approx(g[f"alpha_ndcg@{k}"].mean())  # at each row's cutoff
    fig, data = figures.plot_param_effect(table, "theta", ("objective",))
    assert len(fig.axes) == 2 and set(data["k"]) == {5, 10}


def test_varying_settings_reads_the_grid_from_the_params_column():
    t = pd.DataFrame({"method": ["a"] * 4, "k": [5, 5, 5, 5], "theta": [0.3, 0.3, 0.7, 0.7],
                      "params": [json.dumps({"k": 5, "theta": t, "sigma": s}) for t, s in
                                 ((0.3, 0.1), (0.3, 0.2), (0.7, 0.1), (0.7, 0.2))],
                      "sigma": [0.1, 0.2, 0.1, 0.2], "dataset": "x"})
    assert tables.varying_settings(t) == ["theta", "sigma"]
    assert tables.varying_settings(t, exclude=("theta",)) == ["sigma"]
