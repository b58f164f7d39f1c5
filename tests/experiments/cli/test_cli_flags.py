"""Every flag of every command refuses bad input before any work (issue 33, item 3) and the
command line is quick and uniform (issue 34, item 5).

* A table of bad values, built from each parser's own actions (every flag that takes a value
  has a checked type, :mod:`divopt_rag.experiments.cli.arguments`, that knows words it refuses):
  each one exits 2 with ONE line on stderr that names the flag, writes nothing, starts no work
  and takes seconds, not minutes. Checks across flags and checks that need the registries
  (a method, a dataset, a device, the memory a run needs) have their own table.
* ``--help`` of every command builds its parser without importing torch, pandas, Pyomo, Ray,
  sentence-transformers or matplotlib, and answers in well under a second (a generous bound
  here: CI machines are loaded).
* One list syntax: ``--k 5 10``, ``--k 5,10`` and ``--k 5 --k 10`` are the same list for every
  list flag.
* Printed tables: a gap within the hit tolerance prints as 0.
"""
from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from divopt_rag.experiments.cli import arguments, main as cli, flag_types

#: Flags checked elsewhere: output folders (test_reliability_cli: every command's outputs are
#: refused when unwritable) and the reproduce recipes' data folder (MissingData names it).
NOT_TABLED = {"--out", "--cache-dir", "--log-dir", "--data-dir"}

#: Flags whose values are cheap to run with, so that a bad value that slipped through would
#: still fail fast (the guard below fails the test before any task runs).
LIBRARY_SAMPLE = Path(__file__).resolve().parents[2] / "helpers" / "fixtures" / "library_sample"
BASE = {
    ("demo",): ["--n", "60", "--d", "4", "--k", "2", "--no-plot"],
    ("bench", "latency"): ["--n", "300", "--d", "4", "--k", "2", "--theta", "0.5", "--methods", "topk", "--repeats", "1",
                           "--langchain", ""],
    ("bench", "exact"): ["--n", "10", "--k", "3", "--theta", "0.5", "--queries", "1", "--solvers", "bnb",
                         "--time-limit", "5", "--extra-glosses", "0"],
    ("bench", "quality"): ["--parts", "large", "--large-n", "300", "--large-d", "4", "--large-k", "2",
                           "--large-queries", "1", "--large-theta", "0.5", "--large-methods", "topk,fw", "--repeats", "1"],
    ("certify",): ["--queries", "1", "--corpus-size", "60", "--dim", "4", "--n", "6", "--k", "2", "--theta", "0.5",
                   "--methods", "topk", "--n-workers", "0"],
    ("sweep",): ["--dataset", "synthetic", "--dataset-opt", "n=30", "--dataset-opt", "d=4", "--dataset-opt",
                 "n_queries=1", "--methods", "topk", "--n-workers", "0"],
    ("plot",): ["gaps"],  # and --input: a small table (fixture)
    ("reproduce",): ["ccbqp-latency"],
    ("lib", "build"): [],
    ("lib", "list"): ["--library", str(LIBRARY_SAMPLE)],
    ("lib", "fetch"): [__file__],
    ("lib", "verify"): ["--library", str(LIBRARY_SAMPLE)],
    ("lib", "score"): ["--library", str(LIBRARY_SAMPLE), "--submission", __file__],
    ("lib", "leaderboard"): ["--library", str(LIBRARY_SAMPLE)],
    ("lib", "release"): ["--library", str(LIBRARY_SAMPLE)],
}
NO_PROGRESS = {("bench", "latency"), ("bench", "exact"), ("bench", "quality"), ("certify",), ("sweep",), ("reproduce",)}


def _long(action: argparse.Action) -> str:
    return next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])


def _table() -> list[tuple[tuple[str, ...], str, str]]:
    cases = []
    for path in sorted(cli.COMMANDS):
        for action in arguments.iter_value_actions(cli.build_parser(path)):
            flag = _long(action)
            if flag in NOT_TABLED:
                continue
            for bad in getattr(action.type, "bad", ()):
                cases.append((path, flag, bad))
    return cases


TABLE = _table()


def test_every_flag_that_takes_a_value_has_a_checked_type_with_bad_examples():
    unchecked = [(path, _long(a)) for path in cli.COMMANDS for a in arguments.iter_value_actions(cli.build_parser(path))
                 if _long(a) not in NOT_TABLED and not (isinstance(a.type, flag_types.ValueType) and a.type.bad)]
    assert not unchecked, unchecked
    assert len(TABLE) > 300  # every command, every flag, several bad words each


@pytest.fixture(scope="module")
def results_file(tmp_path_factory):
    """A small certify-like table for the plot command's --input."""
    path = tmp_path_factory.mktemp("plot") / "results.parquet"
    pd.DataFrame({"method": ["a", "b"], "k": [2, 2], "theta": [0.5, 0.5], "gap": [0.0, 0.1], "gap_kind": ["exact"] * 2,
                  "ilad": [0.2, 0.3], "recall@2": [0.5, 1.0], "status": ["ok", "ok"], "seconds": [0.1, 0.2]}
                 ).to_parquet(path)
    return path


@pytest.fixture(scope="module")
def warm():
    """Import every command once, so the time bound below measures the checks, not imports."""
    for module_name, _, _ in cli.COMMANDS.values():
        importlib.import_module(module_name)


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if any task, demo or figure is started: bad input must stop before."""
    from divopt_rag.experiments.engine import backends
    from divopt_rag.experiments.studies import demo
    from divopt_rag.experiments.plots import figures

    def started(*a, **kw):
        raise AssertionError("work started on bad input")

    monkeypatch.setattr(backends, "run_task", started)
    monkeypatch.setattr(demo, "run_demo", started)
    monkeypatch.setattr(figures, "save_figure", started)


def _refused(argv: list[str], capsys, tmp_path: Path, *expected: str) -> str:
    """Refused with one line and exit 2, before any work (the ``no_work`` fixture fails a test that
    starts a task, a demo or a figure) and without leaving files."""
    before = sorted(p.name for p in tmp_path.iterdir())
    rc = cli.main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and len(lines) == 1, (argv, rc, err)
    assert "Traceback" not in err and "internal error" not in err, err
    for text in expected:
        assert text in lines[0], (text, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "a refused run left files behind"
    return lines[0]


def _argv(path, tmp_path, results_file, extra):
    base = [*BASE[path]]
    if path == ("plot",):
        base += ["--input", str(results_file)]
    if path in NO_PROGRESS:
        base.append("--no-progress")
    if path in {("bench", "exact"), ("bench", "quality"), ("certify",), ("reproduce",)}:
        base += ["--cache-dir", str(tmp_path / "cache")]
    has_out = any("--out" in a.option_strings for a in cli.build_parser(path)._actions)
    return [*path, *base, *extra, *(["--out", str(tmp_path / "out")] if has_out else [])]


@pytest.mark.parametrize("path, flag, bad", TABLE, ids=[f"{'-'.join(p)}{f}={b!r}" for p, f, b in TABLE])
def test_a_bad_value_is_one_line_naming_the_flag(path, flag, bad, tmp_path, capsys, results_file, warm, no_work):
    line = _refused(_argv(path, tmp_path, results_file, [flag, bad]), capsys, tmp_path, flag)
    assert line.startswith(f"divopt-rag {' '.join(path)}: ")


def test_a_bad_recipe_name_is_one_line(tmp_path, capsys, warm, no_work):
    _refused(["reproduce", "../escape", "--out", str(tmp_path / "out")], capsys, tmp_path,
             "recipe: expected a recipe name (see --list), got '../escape'")
    _refused(["reproduce", "nosuch", "--out", str(tmp_path / "out")], capsys, tmp_path, "unknown recipe 'nosuch'")


# checks across flags and checks that need the registries: (command, extra flags, what the line says)
CROSS = [
    (("demo",), ["--k", "61"], "--k: expected an integer <= --n (60), got 61"),
    (("bench", "latency"), ["--k", "301"], "--k: expected sizes <= the smallest --n (300), got 301"),
    (("bench", "latency"), ["--langchain", "50,100"], "--langchain: expected K <= N (50), got 100"),
    (("bench", "latency"), ["--langchain", "1,2,3"], "--langchain: expected two integers N,K"),
    (("bench", "exact"), ["--k", "30"], "--k: expected sizes < the largest --n (10), got 30"),  # was KeyError after 19 s
    (("bench", "exact"), ["--full"], "--full: expected no --n (--full sets n, k and theta), got --n given too"),
    (("bench", "exact"), ["--queries", "21"], "--queries + --query-offset: expected 1 to 20"),
    (("bench", "exact"), ["--solvers", "cplex"], "--solvers ['cplex'] not installed"),
    (("bench", "exact"), ["--formulation", "nosuch"], "--formulation / --solvers SOLVER/FORMULATION"),
    (("bench", "quality"), ["--parts", "small", "--k", "101"], "--k: expected an integer <= --pool (100), got 101"),
    (("bench", "quality"), ["--parts", "small", "--pool", "4000"], "--pool: expected an integer <= --corpus-size"),
    (("bench", "quality"), ["--large-k", "301"], "--large-k: expected sizes <= --large-n (300), got 301"),
    (("bench", "quality"), ["--large-methods", "nosuch"], "--large-methods: unknown methods ['nosuch']"),
    (("bench", "quality"), ["--default-method", "nosuch"], "--default-method: unknown methods ['nosuch']"),
    (("certify",), ["--k", "7"], "--k: expected an integer <= --n (6, the pool size), got 7"),
    (("certify",), ["--n", "61"], "--n: expected an integer <= --corpus-size (60), got 61"),
    (("certify",), ["--model", "/nonexistent"], "--model: expected no model with --dataset synthetic"),  # was ignored
    (("certify",), ["--dataset", "toy", "--model", "/nonexistent"], "--model: expected a local sentence-transformers"),
    (("certify",), ["--dataset", "nosuch"], "--dataset: unknown dataset 'nosuch'"),
    (("certify",), ["--dataset", "beir:/nonexistent/x"], "--dataset: dataset 'beir': expected an existing file"),
    (("certify",), ["--methods", "nosuch"], "--methods: unknown method 'nosuch'"),
    (("certify",), ["--address", "ray://h:1"], "--address: expected --backend ray"),
    (("sweep",), ["--param", "sigma=abc", "--methods", "dartboard"],  # ran every task into an error row
     "--param/--method-param: The 'sigma' parameter of dartboard must be a float in the range (0, inf). Got 'abc' instead."),
    (("sweep",), ["--param", "theta=2"], "--param/--method-param: theta must lie in [0, 1], got 2.0"),
    (("sweep",), ["--param", "sigmaa=0.1"], "--param/--method-param: grid parameter 'sigmaa' is taken by none"),
    (("sweep",), ["--method-param", "topk.nosuch=1"], "method 'topk' does not take parameter 'nosuch'"),
    (("sweep",), ["--dataset-opt", "nn=5"], "--dataset/--dataset-opt: dataset 'synthetic' has no option 'nn'"),
    (("sweep",), ["--dataset-opt", "n=abc"], "--dataset/--dataset-opt: dataset 'synthetic' option n: expected a number"),
    (("sweep",), ["--dataset-opt", "n_queries=0"], "n_queries must be an integer >= 1, got 0"),  # was "need at least one array"
    (("sweep",), ["--dataset", "beir:/nonexistent/x"], "--dataset/--dataset-opt: dataset 'beir' has no option 'd'"),
    (("sweep",), ["--adaptive-metric", "recall@x"], "--adaptive-metric: expected one of"),
    (("sweep",), ["--address", "ray://h:1"], "--address: expected --backend ray"),
    (("reproduce",), ["--set", "bogus=1"], "--set bogus: not an axis or parameter"),
    (("plot",), ["--x", "nosuch"], "--x: expected a column or metric of"),
]


@pytest.mark.parametrize("path, extra, expected", CROSS, ids=[" ".join([*p, *e]) for p, e, _ in CROSS])
def test_checks_across_flags_and_registries_are_one_line_before_work(path, extra, expected, tmp_path, capsys,
                                                                      results_file, warm, no_work):
    argv = _argv(path, tmp_path, results_file, extra)
    if path == ("plot",):
        argv[1] = "pareto"
    _refused(argv, capsys, tmp_path, expected)


def test_a_run_too_large_for_memory_is_refused_with_the_estimate(tmp_path, capsys, monkeypatch, warm, no_work):
    # `demo --n 2000000 --d 1024` ended in "internal error: MemoryError 7.63 GiB"
    monkeypatch.setenv("DIVOPT_MEMORY_LIMIT", "4G")
    line = _refused(["demo", "--n", "2000000", "--d", "1024", "--out", str(tmp_path / "out")], capsys, tmp_path,
                    "--n/--d: expected a size whose pool (n x d) fits in the 4 GiB of memory available, got an "
                    "estimated 30.9 GiB (use a smaller --n or --d)")
    assert line.count("GiB") == 2
    _refused(["bench", "latency", "--n", "10000000", "--d", "1024", "--out", str(tmp_path / "out")], capsys,
             tmp_path, "--n/--d: expected a size whose largest pool (n x d) fits in the 4 GiB")
    _refused(["bench", "quality", "--parts", "large", "--large-n", "10000000", "--out", str(tmp_path / "out")],
             capsys, tmp_path, "--large-n/--large-d: expected a size whose large pool")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_is_refused(tmp_path, capsys, results_file, warm, no_work):
    _refused(_argv(("bench", "latency"), tmp_path, results_file, ["--device", "cuda"]), capsys, tmp_path,
             "--device: expected cpu on this machine (CUDA is not available), got 'cuda'")


def test_a_refused_run_leaves_the_folder_as_it_was(tmp_path, capsys, warm):
    """Refused while the executor prepares it (after the folder's lock was taken and the dataset
    cached): nothing of the run is left, the user's own files stay (a refused sweep left its
    lock file, parts/ and data/)."""
    tiny = {"name": "synthetic", "n": 30, "d": 4, "n_queries": 1}
    bad = tmp_path / "bad.json"  # a query id the dataset does not have: found once the data is loaded
    bad.write_text(json.dumps({"dataset": tiny, "methods": ["topk"], "queries": ["nosuch"],
                               "grid": {"k": [2], "theta": [0.5]}}))
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("user file")

    def tree():
        return {str(p.relative_to(out)): p.read_bytes() if p.is_file() else None for p in out.rglob("*")}

    def sweep(*argv):
        rc = cli.main(["sweep", "--n-workers", "0", "--no-progress", *argv])
        return rc, capsys.readouterr().err

    assert sweep("--config", str(bad), "--out", str(out)) == (2, "divopt-rag sweep: unknown query ids ['nosuch'] in "
                                                                  "dataset 'synthetic'\n")
    assert tree() == {"mine.txt": b"user file"}
    good = ["--dataset", "synthetic", *[f for kv in ("n=30", "d=4", "n_queries=1") for f in ("--dataset-opt", kv)],
            "--methods", "topk", "--out", str(out)]
    assert sweep(*good)[0] == 0
    snapshot = tree()
    assert {"config.json", "results.parquet", "parts", "data"} <= set(snapshot)
    rc, err = sweep(*good, "--k", "3")  # another grid in the same folder
    assert rc == 2 and "with another configuration" in err
    assert tree() == snapshot
    fresh = tmp_path / "a" / "b"
    assert sweep("--config", str(bad), "--out", str(fresh))[0] == 2
    assert not (tmp_path / "a").exists()  # the folders it made are gone, its lock file with them


def test_the_lock_says_what_it_created(tmp_path):
    """What a refused run may remove: only the folders and the lock file its lock made."""
    from divopt_rag.experiments.engine.store import LOCK_NAME, output_lock

    with output_lock(tmp_path / "a" / "b") as holder:
        assert holder["created"] == [(tmp_path / "a").absolute(), (tmp_path / "a" / "b").absolute()]
        assert holder["created_lock_file"] and (tmp_path / "a" / "b" / LOCK_NAME).exists()
    with output_lock(tmp_path / "a" / "b") as holder:
        assert holder["created"] == [] and not holder["created_lock_file"]
    # a holder that removes its lock file (a refused run): the next run locks a new one
    with output_lock(tmp_path / "c") as holder:
        (tmp_path / "c" / LOCK_NAME).unlink()
    with output_lock(tmp_path / "c") as holder:
        assert holder["created_lock_file"] and (tmp_path / "c" / LOCK_NAME).exists()


# ---- one list syntax --------------------------------------------------------------------------
def _list_flags():
    for path in sorted(cli.COMMANDS):
        for action in arguments.iter_value_actions(cli.build_parser(path)):
            if isinstance(action, flag_types.ListAction):
                yield path, action


LIST_FLAGS = list(_list_flags())


def _good(action) -> list[str]:
    item = action.type.item
    if isinstance(item, flag_types.Integer):
        return [str(max(item.min or 1, 1)), str(max(item.min or 1, 1) + 1)]
    if isinstance(item, flag_types.Real):
        return ["0.25", "0.75"]
    if isinstance(item, flag_types.Choice):
        return list(item.choices[:2])
    if isinstance(item, flag_types.ExistingPath):
        return [str(Path(__file__).parents[2] / "conftest.py"), str(Path(__file__))]
    return ["fw", "mmr"] if "method" in item.expected else ["ilad", "objective"]


@pytest.mark.parametrize("path, action", LIST_FLAGS, ids=[f"{'-'.join(p)}{_long(a)}" for p, a in LIST_FLAGS])
def test_every_list_flag_takes_words_commas_and_repeats(path, action):
    flag, (a, b) = _long(action), _good(action)
    if isinstance(action.type.item, flag_types.ExistingPath) and action.dest == "encoder":
        a = b = str(Path(__file__).parent)  # local model folders
    positional = {("plot",): ["gaps"], ("reproduce",): []}.get(path, [])
    required = ["--input", __file__] if path == ("plot",) and flag != "--input" else []

    def parsed(*words):
        return getattr(cli.build_parser(path).parse_args([*positional, *required, *words]), action.dest)

    expected = parsed(flag, a) + parsed(flag, b)
    assert parsed(flag, a, b) == parsed(flag, f"{a},{b}") == parsed(flag, a, flag, b) == expected
    assert len(expected) == 2


# ---- --help is fast: no heavy import ------------------------------------------------------------
HEAVY = ("torch", "pandas", "pyarrow", "numpy", "pyomo", "ray", "sentence_transformers", "matplotlib", "scipy")


def test_building_every_parser_imports_nothing_heavy():
    code = ("import sys; from divopt_rag.experiments.cli import main as cli\n"
            "for p in cli.COMMANDS: cli.build_parser(p).format_help()\n"
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("path", sorted(cli.COMMANDS), ids=lambda p: "-".join(p))
def test_help_answers_fast(path):
    """``divopt-rag ... --help`` answers without a heavy import: what made it slow (torch alone
    takes 2-15 s to import on a loaded machine; the help itself 0.25-0.4 s) is checked directly,
    in the process that printed the help, instead of timing it."""
    code = ("import runpy, sys\n"
            f"sys.argv = ['divopt-rag', *{list(path)!r}, '--help']\n"
            "try:\n    runpy.run_module('divopt_rag.experiments.cli', run_name='__main__')\n"
            "except SystemExit as exc:\n    rc = exc.code\n"
            f"print('heavy:', [m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)\n"
            "sys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "usage: divopt-rag" in proc.stdout, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "heavy: []", proc.stderr


# ---- printed tables -----------------------------------------------------------------------------
def test_gaps_within_the_hit_tolerance_print_as_zero():
    from divopt_rag.experiments.measures.quality import format_table
    from divopt_rag.models.ccbqp import EXACT_HIT_TOL

    table = pd.DataFrame({"method": ["a", "b"], "mean_gap": [7.105e-17, 0.0123456], "bound_gap": [EXACT_HIT_TOL / 2, 2e-9],
                          "objective": [7.105e-17, 12.3456789], "seconds": [0.00012345, 1.5]})
    lines = format_table(table).splitlines()
    row_a, row_b = lines[1].split(), lines[2].split()
    assert row_a[1:3] == ["0", "0"] and row_b[1:3] == ["0.01235", "2e-09"]
    assert row_a[3] == "7.105e-17"  # not a gap: printed as it is
    assert row_a[4] == "0.0001234" and row_b[4] == "1.5"


def test_reproduce_set_values_are_typed_by_the_method_declaration():
    """``reproduce --set sigma=abc`` ran every row into an error; now refused before any run,
    by the declaration ``select`` checks (the recipe's own rows are not selectors)."""
    from divopt_rag.experiments.reproduce.spec import ReproduceError, expand_settings

    methods = {"dartboard": {"sigma": [0.1]}, "random": {}}
    with pytest.raises(ReproduceError, match=r"The 'sigma' parameter of dartboard must be a float in the range "
                                             r"\(0, inf\)\. Got 'abc' instead\.$"):
        expand_settings(methods, {"k": [5]}, {"sigma": ["abc"]})
    assert [m for m, _ in expand_settings(methods, {"k": [5]}, {"sigma": [0.3]})] == ["dartboard", "random"]


def test_reproduce_checks_set_values_before_the_data(tmp_path, capsys):
    """A bad ``--set`` value is named even where the recipe's data is missing (it used to be
    reported only after the user had fetched the data)."""
    argv = ["reproduce", "dartboard-sigma", "--data-dir", str(tmp_path / "none"), "--set", "sigma=abc",
            "--out", str(tmp_path / "out")]
    _refused(argv, capsys, tmp_path, "The 'sigma' parameter of dartboard must be a float in the range (0, inf). "
                                     "Got 'abc' instead.")
