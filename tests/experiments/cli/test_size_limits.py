"""Every size bounded up front (issue 39, item 3): counts, n, k, threads, workers and config
nesting have a declared range or a memory estimate, checked before any work: one line, exit code
2, nothing written. Each probe of the issue is a test here (in-process ``main([...])``); a capped
request says it was capped and records the size it ran.
"""
from __future__ import annotations

import argparse
import itertools
import os
import time

import numpy as np
import pandas as pd
import pytest

import divopt_rag.experiments.studies.bench_exact as bench
from divopt_rag.experiments.cli import arguments, main as cli
from divopt_rag.experiments.cli.flag_checks import check_dataset
from divopt_rag.experiments.cli.flag_types import CPUS, parse_value
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.parameters import InvalidParameterError
from divopt_rag.solvers import select

TINY = ["--dataset", "synthetic", "--dataset-opt", "n=100", "--dataset-opt", "n_queries=1", "--no-progress"]


def _refused(argv: list[str], capsys, folder, *expected: str) -> str:
    """``divopt-rag ARGV`` exits 2 with one line on stderr holding ``expected``, writes nothing
    under ``folder`` (where --out points) and takes well under the seconds a run would."""
    before = sorted(os.listdir(folder))
    t0 = time.perf_counter()
    rc = cli.main(argv)
    took = time.perf_counter() - t0
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert rc == 2 and len(err) == 1, (argv, rc, err)
    assert "internal error" not in err[0] and "Traceback" not in err[0]
    for text in expected:
        assert text in err[0], (text, err[0])
    assert sorted(os.listdir(folder)) == before, "a refused command wrote files"
    assert took < 60, took  # a bound, not a timing: the refused probes ran for minutes or hung
    return err[0]


# ---- sweep: sizes of the grid and of the dataset ---------------------------------------------
@pytest.mark.parametrize("flags,expected", [
    (["--k", "1e30"], "--k: expected an integer >= 1, got '1e30' (at most 2147483647)"),  # was OverflowError after config.json
    (["--k", "5", "--method-param", "fw.max_iter=1e30"],
     "The 'max_iter' parameter of fw must be an int in the range [1, 1000000]. Got 1000000000000000000000000000000 instead."),
    (["--k", "5", "--method-param", "fw.max_iter=-1"], "The 'max_iter' parameter of fw must be an int in the range"),
    (["--k", "101"], "k = 101 is larger than the 100 candidates of query 'q0' (dataset 'synthetic': 100 rows)"),
    (["--pool", "2", "--k", "3"], "--k/--pool: k = 3 is larger than pool = 2 (method 'fw')"),
])
def test_sweep_grid_sizes_are_refused_before_any_work(tmp_path, capsys, flags, expected):
    _refused(["sweep", "--out", str(tmp_path / "T"), *TINY, "--methods", "fw", *flags], capsys, tmp_path, expected)


@pytest.mark.parametrize("knob", ["n_random", "perturb_rounds", "tabu_iters"])
def test_huge_default_counts_are_refused_before_any_work(tmp_path, capsys, knob):
    """1e12 random starts, perturbed sets or thetas ran into a MemoryError; 1e12 tabu steps hung."""
    _refused(["sweep", "--out", str(tmp_path / "T"), *TINY, "--methods", "fw_ws_ms", "--k", "5",
              "--method-param", f"fw_ws_ms.{knob}=1e12"], capsys, tmp_path,
             f"The '{knob}' parameter of fw_ws_ms must be an int in the range [0, ", "Got 1000000000000 instead.")
    inst = Instance(np.eye(6, 3) + 0.1, np.ones(3), k=2, theta=0.5, normalize=True)
    with pytest.raises(InvalidParameterError, match=rf"^The '{knob}' parameter of fw_ws_ms must be an int"):
        select(inst, "fw_ws_ms", **{knob: 10**12})


def test_the_dataset_is_sized_before_it_is_generated(tmp_path, capsys, monkeypatch):
    """``--dataset-opt n=99999999`` ran for minutes into a MemoryError; ``n=1e12`` said
    "got 1000000000000.0"."""
    argv = ["sweep", "--out", str(tmp_path / "T"), "--dataset", "synthetic", "--methods", "topk", "--k", "3"]
    line = _refused([*argv, "--dataset-opt", "n=99999999"], capsys, tmp_path,
                    "--dataset/--dataset-opt: expected a size whose dataset 'synthetic' fits in the",
                    "of memory available, got an estimated")
    line = _refused([*argv, "--dataset-opt", "n=1e12"], capsys, tmp_path, "got an estimated")
    assert "1000000000000.0" not in line
    _refused([*argv, "--dataset-opt", "n=2.5"], capsys, tmp_path, "option n: expected an integer, got 2.5")
    # the estimate, not the machine, decides: 200,000 rows x 2 queries need about 0.8 GB
    monkeypatch.setenv("DIVOPT_MEMORY_LIMIT", "512M")
    _refused([*argv, "--dataset-opt", "n=200000", "--dataset-opt", "n_queries=2"], capsys, tmp_path,
             "fits in the 512 MiB of memory available")
    monkeypatch.setenv("DIVOPT_MEMORY_LIMIT", "1G")  # a small one passes
    check_dataset({"name": "synthetic", "n": 200, "n_queries": 2}, "--dataset")


def test_a_sweep_in_the_library_checks_the_same_sizes(tmp_path):
    from divopt_rag.experiments.studies.grid import SweepConfig
    from divopt_rag.experiments.studies.sweep import run_sweep

    base = {"dataset": {"name": "synthetic", "n": 30, "n_queries": 1}, "methods": ["topk"]}
    for grid, match in (({"k": [10**30], "theta": [0.5]}, r"The 'k' parameter of sweep must be an int in the range \[1, 2147483647\]"),
                        ({"k": [3], "theta": [0.5], "pool": [2]}, r"k = 3 is larger than pool = 2"),
                        ({"k": [31], "theta": [0.5]}, r"k = 31 is larger than the 30 candidates")):
        with pytest.raises(ValueError, match=match):
            run_sweep(SweepConfig.from_dict({**base, "grid": grid}), tmp_path / "s", n_workers=0, progress=False)
        assert not (tmp_path / "s").exists()


# ---- config files: bytes, nesting, aliases -----------------------------------------------------
def _alias_bomb(key: str) -> str:
    """The "billion laughs": ten levels of ten aliases, 10^10 strings once expanded."""
    text = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
    names = "abcdefghij"
    for prev, name in zip(names, names[1:]):
        text += f"{name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]\n"
    return text + f"{key}: *j\n"


@pytest.mark.parametrize("key", ["queries", "seed"])
def test_a_yaml_alias_bomb_is_refused_where_it_starts(tmp_path, capsys, key):
    pytest.importorskip("yaml")
    (tmp_path / "cfg").mkdir()
    path = tmp_path / "cfg" / "bomb.yaml"
    path.write_text(_alias_bomb(key))
    _refused(["sweep", "--config", str(path), "--out", str(tmp_path / "T")], capsys, tmp_path,
             f"{path}:2: invalid YAML: alias *a found: aliases are not allowed in a config")


def test_deeply_nested_and_huge_configs_are_refused(tmp_path, capsys):
    (tmp_path / "cfg").mkdir()
    deep = tmp_path / "cfg" / "deep.json"
    deep.write_text('{"queries": ' + "[" * 100_000 + "]" * 100_000 + "}")  # was a RecursionError
    _refused(["sweep", "--config", str(deep), "--out", str(tmp_path / "T")], capsys, tmp_path,
             f"{deep}: is nested too deep to parse")
    nested = tmp_path / "cfg" / "nested.json"
    nested.write_text('{"seed": ' + "[" * 40 + "1" + "]" * 40 + "}")
    _refused(["sweep", "--config", str(nested), "--out", str(tmp_path / "T")], capsys, tmp_path,
             f"{nested}: is nested deeper than 32 levels")
    wide = tmp_path / "cfg" / "wide.json"
    wide.write_text('{"queries": [' + ",".join(['"q"'] * 200_000) + "]}")
    _refused(["sweep", "--config", str(wide), "--out", str(tmp_path / "T")], capsys, tmp_path,
             f"{wide}: holds more than 100000 values")
    huge = tmp_path / "cfg" / "huge.json"
    huge.write_text('{"seed": 0, "pad": "' + "x" * (5 * 2**20) + '"}')
    _refused(["sweep", "--config", str(huge), "--out", str(tmp_path / "T")], capsys, tmp_path,
             f"{huge}: is larger than 4 MiB")


# ---- threads, workers, output paths ----------------------------------------------------------------
def test_threads_and_workers_are_bounded_by_this_machine(tmp_path, capsys):
    _refused(["bench", "latency", "--threads", "100000", "--out", str(tmp_path / "T")], capsys, tmp_path,
             f"--threads: expected an integer in [0, {CPUS}], got '100000'")  # was a segfault
    _refused(["bench", "exact", "--threads", str(CPUS + 1), "--out", str(tmp_path / "T")], capsys, tmp_path,
             f"--threads: expected an integer in [1, {CPUS}]")
    _refused(["certify", "--n-workers", "1e9", "--out", str(tmp_path / "T")], capsys, tmp_path,
             "--n-workers: expected an integer in [0, 1024], got '1e9'")  # started 20 processes on 2 cores
    _refused(["certify", "--n-workers", str(CPUS + 1), "--out", str(tmp_path / "T")], capsys, tmp_path,
             f"--n-workers: expected at most this machine's {CPUS} CPUs")
    _refused(["sweep", "--n-workers", str(CPUS + 1), "--out", str(tmp_path / "T")], capsys, tmp_path,
             f"--n-workers: expected at most this machine's {CPUS} CPUs")


@pytest.mark.parametrize("out,why", [("", "(empty)"), ("  ", "(empty)"), ("a\nb", "(a control character)")])
def test_an_empty_or_control_character_output_path_is_refused(tmp_path, capsys, monkeypatch, out, why):
    """``--out ''`` wrote into the current folder."""
    monkeypatch.chdir(tmp_path)
    _refused(["sweep", "--out", out, *TINY, "--methods", "topk", "--k", "3"], capsys, tmp_path,
             "--out: expected a folder to write (not empty, no control characters)", why)
    _refused(["bench", "exact", "--log-dir", out], capsys, tmp_path, "--log-dir: expected a folder")


# ---- reproduce --set --------------------------------------------------------------------------------
def test_reproduce_set_sizes_are_declared_and_estimated(tmp_path, capsys, monkeypatch):
    argv = ["reproduce", "ccbqp-latency", "--out", str(tmp_path / "R"), "--no-progress", "--set"]
    _refused([*argv, "n=1e12"], capsys, tmp_path,  # was an internal MemoryError
             "--set n: The 'n' parameter of ccbqp-latency must be an int in the range [2, 2147483647]. "
             "Got 1000000000000 instead.")
    _refused([*argv, "n=1e9"], capsys, tmp_path, "--set: expected a size whose recipe 'ccbqp-latency' fits in the")
    _refused([*argv, "repeats=0"], capsys, tmp_path, "The 'repeats' parameter of ccbqp-latency must be an int")
    monkeypatch.setenv("DIVOPT_MEMORY_LIMIT", "1G")  # 100,000 x 1024 (the default) needs about 2.2 GB
    _refused(argv[:-1], capsys, tmp_path, "fits in the 1 GiB of memory available")


def test_parse_value_reads_an_exponent_integer_as_an_int():
    assert parse_value("1e12") == 10**12 and isinstance(parse_value("1e12"), int)
    assert parse_value("1e30") == 10**30  # exact, not the float's 1000000000000000019884624838656
    assert parse_value("2.5") == 2.5 and parse_value("1.0") == 1.0 and isinstance(parse_value("1.0"), float)
    assert parse_value("1e-3") == 0.001 and parse_value("abc") == "abc" and parse_value("none") is None


# ---- bench exact: a capped request says so and records the size it ran -----------------------------
def _fake_corpus(n_queries, extra, seed, cache_dir):
    rng = np.random.default_rng(seed)
    P = rng.standard_normal((12, 5))
    P /= np.linalg.norm(P, axis=1, keepdims=True)
    Q = rng.standard_normal((n_queries, 5))
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    return P, Q, [f"w{i}" for i in range(n_queries)], 12


def test_bench_exact_caps_n_to_the_pool_and_says_so(tmp_path, monkeypatch, capsys):
    """``bench exact --n 5000`` (within EXACT_N_MAX) on a smaller pool runs on the whole pool and records both sizes."""
    monkeypatch.setattr(bench, "load_corpus", _fake_corpus)
    p = argparse.ArgumentParser()
    arguments.bench_exact(p)
    args = p.parse_args(["--n", "8", "5000", "--k", "3", "--theta", "0.5", "--queries", "1", "--solvers", "bnb",
                         "--out", str(tmp_path / "b"), "--no-progress"])
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "note: --n 5000: larger than the 12 passages of the pool, capped: runs at n = 12" in out
    df = pd.read_parquet(tmp_path / "b" / "results.parquet")
    assert sorted(zip(df["n"], df["n_requested"])) == [(8, 8), (12, 5000)]
    P, Q, _, _ = _fake_corpus(1, 0, 0, None)
    full = Instance(P, Q[0], k=3, theta=0.5)
    best = max(ccbqp_objective(full, list(s)) for s in itertools.combinations(range(12), 3))
    assert df[df["n"] == 12]["objective"].iloc[0] == pytest.approx(best, abs=1e-6)  # it ran on all 12
