"""Every command turns bad input into ONE line on stderr and exit code 2, never a traceback
(issue 16, items 2, 4 and 5); failed runs exit 1 with their reasons; --debug shows the traceback.
Each case is a probe a hostile but fair user would try (the list is in the issue's closing note).
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from divopt_rag.experiments.cli import main as cli
from divopt_rag.experiments.methods import register_method
from divopt_rag.experiments.studies.grid import SweepConfig

FAST_DEMO = ["--n", "60", "--d", "4", "--no-plot"]
TINY_SWEEP = ["--dataset", "synthetic", "--dataset-opt", "n=40", "--dataset-opt", "d=6", "--dataset-opt",
              "n_queries=2", "--n-workers", "0", "--no-progress"]


def _bad(argv, capsys, *expected: str) -> str:
    """Run the CLI in process: exit code 2 and one line on stderr holding every ``expected``."""
    rc = cli.main(argv)
    err = capsys.readouterr().err
    # progress bars (tqdm, on stderr by design) may precede the error: they end before it
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip() and "%|" not in line]
    assert rc == 2, (rc, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    for text in expected:
        assert text in lines[0], (text, lines[0])
    return lines[0]


@pytest.fixture
def afile(tmp_path):
    p = tmp_path / "afile"
    p.write_text("x")
    return p


# ---- items 2 and 5: bad input of every command ------------------------------------------------
def test_demo_bad_values(tmp_path, capsys, afile):
    _bad(["demo", "--k", "0", *FAST_DEMO, "--out", str(tmp_path / "d")], capsys,
         "divopt-rag demo: --k: expected an integer >= 1, got '0'")
    _bad(["demo", "--theta", "1.5", *FAST_DEMO, "--out", str(tmp_path / "d")], capsys,
         "--theta: expected a number in [0, 1], got '1.5'")
    _bad(["demo", "--k", "61", *FAST_DEMO, "--out", str(tmp_path / "d")], capsys,
         "--k: expected an integer <= --n (60), got 61")
    _bad(["demo", *FAST_DEMO, "--out", str(afile)], capsys, f"--out {afile}: is a file, expected a folder")
    _bad(["demo", *FAST_DEMO, "--out", str(afile / "sub")], capsys, "is a file, so nothing can be created under it")


def test_bench_bad_values(tmp_path, capsys):
    _bad(["bench", "exact", "--solvers", "cplex", "--out", str(tmp_path / "b")], capsys,
         "divopt-rag bench exact: ", "--solvers ['cplex'] not installed")
    (tmp_path / "afile").write_text("x")
    _bad(["bench", "exact", "--out", str(tmp_path / "afile")], capsys, "is a file, expected a folder")
    _bad(["bench", "quality", "--methods", "nope", "--out", str(tmp_path / "q")], capsys, "unknown methods ['nope']")
    _bad(["bench", "latency", "--n", "0", "--out", str(tmp_path / "l")], capsys, "divopt-rag bench latency: ")


def test_certify_bad_values_and_empty_inputs(tmp_path, capsys, afile):
    _bad(["certify", "--methods", "nope", "--out", str(tmp_path / "c"), "--no-progress"], capsys,
         "unknown method 'nope'")
    _bad(["certify", "--dataset", f"beir:{tmp_path / 'missing'}", "--out", str(tmp_path / "c")], capsys,
         f"--dataset: dataset 'beir': expected an existing file or folder as its path, got '{tmp_path / 'missing'}'")
    empty = tmp_path / "empty.json"
    empty.write_text("")
    _bad(["certify", "--dataset", f"rgb:{empty}", "--out", str(tmp_path / "c"), "--no-progress"], capsys,
         f"{empty}: no queries: the file is empty")
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("")
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
    _bad(["certify", "--dataset", f"beir:{beir}", "--out", str(tmp_path / "c"), "--no-progress"], capsys,
         "corpus.jsonl: no passages: the corpus is empty")
    _bad(["certify", "--out", str(afile / "c")], capsys, "is a file, so nothing can be created under it")


@pytest.mark.parametrize("flag, value, expected", [
    ("--queries", "0", "--queries: expected an integer >= 1, got '0'"),  # ran 1 query and exited 0
    ("--max-exact", "-5", "--max-exact: expected an integer >= 1, got '-5'"),  # passed until a full-scale run
    ("--fw-max-iter", "0", "--fw-max-iter: expected an integer >= 1, got '0'"),
    ("--corpus-size", "0", "--corpus-size: expected an integer >= 1, got '0'"),  # named the generator's n
    ("--time-limit", "-1", "--time-limit: expected a number > 0, got '-1'"),
])
def test_certify_options_are_checked_before_any_work(tmp_path, capsys, flag, value, expected):
    _bad(["certify", flag, value, "--out", str(tmp_path / "c"), "--no-progress"], capsys, expected)
    assert not (tmp_path / "c" / "parts").exists()


def test_sweep_parameter_names_are_checked(tmp_path, capsys):
    out = str(tmp_path / "s")
    line = _bad(["sweep", *TINY_SWEEP, "--out", out, "--param", "sigmaa=0.1"], capsys,
                "grid parameter 'sigmaa' is taken by none of the methods ['fw']", "valid names: [")
    assert "'relax_penalty'" in line and "'theta'" in line
    _bad(["sweep", *TINY_SWEEP, "--out", out, "--methods", "fw", "dartboard", "--param", "sigmaa=0.1"], capsys,
         "(did you mean 'sigma'?)")
    _bad(["sweep", *TINY_SWEEP, "--out", out, "--methods", "dartboard", "--method-param", "dartboard.sigm=0.1"],
         capsys, "method 'dartboard' does not take parameter 'sigm'", "its parameters: ['k', 'pool', 'sigma'")
    _bad(["sweep", *TINY_SWEEP, "--out", out, "--dataset-opt", "nn=5"], capsys,
         "dataset 'synthetic' has no option 'nn'; its options: ['d', 'n',")
    _bad(["sweep", *TINY_SWEEP, "--out", out, "--methods", "nope"], capsys, "unknown method 'nope'")
    _bad(["sweep", *TINY_SWEEP, "--out", out, "--evaluator", "metric:recal"], capsys, "unknown metric 'recal'")
    assert not (tmp_path / "s" / "results.parquet").exists()


def _empty_beir(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("")
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n')
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
    return root


def test_sweep_takes_name_colon_path_datasets_and_refuses_empty_ones(tmp_path, capsys):
    # `--dataset beir:PATH` (the form certify and the docs use) was read as a dataset named
    # 'beir:PATH' by the sweep: "unknown dataset" instead of loading the folder
    beir = _empty_beir(tmp_path / "beir")
    _bad(["sweep", "--dataset", f"beir:{beir}", "--methods", "mmr", "--n-workers", "0", "--no-progress",
          "--out", str(tmp_path / "s")], capsys, "corpus.jsonl: no passages: the corpus is empty")
    rgb = tmp_path / "rgb.json"
    rgb.write_text("")
    _bad(["sweep", "--dataset", f"rgb:{rgb}", "--methods", "mmr", "--n-workers", "0", "--no-progress",
          "--out", str(tmp_path / "s")], capsys, f"{rgb}: no queries: the file is empty")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f'dataset: "beir:{beir}"\nmethods: [mmr]\n')
    _bad(["sweep", "--config", str(cfg), "--n-workers", "0", "--no-progress", "--out", str(tmp_path / "s")], capsys,
         "corpus.jsonl: no passages: the corpus is empty")
    assert SweepConfig(dataset=f"npz:{tmp_path / 'e.npz'}").dataset == {"name": "npz", "path": str(tmp_path / "e.npz")}
    assert SweepConfig(dataset="my_plugin_set").dataset == {"name": "my_plugin_set"}  # named when plugins load
    assert not (tmp_path / "s" / "results.parquet").exists()


@pytest.mark.parametrize("suffix, text, where", [
    (".yaml", "dataset:\n  name: synthetic\nmethods: [fw\n", ":4: invalid YAML"),
    (".json", '{"dataset": {"name": "synthetic"}, "methods": ', ":1: invalid JSON"),
    (".toml", "[sweep]\nmethods = [\"fw\"\n", ": invalid TOML"),
    (".json", '{"methods": ["fw"], "grdi": {"k": [3]}}', ": unknown sweep config keys ['grdi']"),
    (".json", '[1, 2]', ": must hold a mapping at the top level"),
    (".ini", "x", ": a sweep config must be"),
])
def test_sweep_config_errors_name_the_file(tmp_path, capsys, suffix, text, where):
    cfg = tmp_path / f"cfg{suffix}"
    cfg.write_text(text)
    _bad(["sweep", "--config", str(cfg), "--out", str(tmp_path / "s")], capsys, f"{cfg}{where}")


def test_sweep_output_paths(tmp_path, capsys, afile):
    _bad(["sweep", *TINY_SWEEP, "--out", str(afile)], capsys, "is a file, expected a folder")
    _bad(["sweep", *TINY_SWEEP, "--out", str(tmp_path / "s"), "--config", str(tmp_path / "none.json")], capsys,
         f"--config: expected an existing sweep config file (.json, .toml, .yaml), got '{tmp_path / 'none.json'}' "
         f"(no such file or folder)")
    _bad(["sweep", "--out", str(tmp_path / "fresh"), "--consolidate-only"], capsys, "holds no sweep")


@pytest.fixture
def unwritable(tmp_path):
    """A folder nothing can be created in: read-only for a normal user; for root (who ignores
    permission bits, and for whom os.access says yes) /proc, where nobody creates files."""
    if os.name == "posix" and os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        yield ro
        ro.chmod(0o755)
    elif Path("/proc/self").is_dir():
        yield Path("/proc")
    else:  # pragma: no cover
        pytest.skip("no unwritable folder on this platform")


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_an_unwritable_out_is_refused_before_any_work(command, unwritable, capsys, monkeypatch):
    module_name, _, outputs = cli.COMMANDS[command]
    module = importlib.import_module(module_name)
    monkeypatch.setattr(module, "main", lambda args: pytest.fail("the command ran before --out was checked"))
    sample = str(Path(__file__).resolve().parents[2] / "helpers" / "fixtures" / "library_sample")
    extra = {("plot",): ["gaps", "--input", __file__], ("reproduce",): ["ccbqp-latency"],
             ("lib", "fetch"): [__file__], ("lib", "score"): ["--library", sample, "--submission", __file__],
             ("lib", "leaderboard"): ["--library", sample], ("lib", "release"): ["--library", sample]}.get(command, [])
    for dest, kind in outputs.items():
        target = unwritable / ("divopt-f2-out" + (".csv" if kind == "file" else ""))
        _bad([*command, *extra, "--" + dest.replace("_", "-"), str(target)], capsys,
             f"--{dest.replace('_', '-')} {target}: {unwritable} is not writable")
        assert not target.exists()


def test_plot_bad_input(tmp_path, capsys):
    _bad(["plot", "gaps", "--input", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "p")], capsys,
         "divopt-rag plot: ")


def test_an_unknown_command_or_flag_is_one_line_and_exit_2(capsys):
    # argparse printed its whole usage block (2-13 lines) and raised SystemExit
    _bad(["frobnicate"], capsys, "divopt-rag: COMMAND: invalid choice: 'frobnicate'", "see divopt-rag --help")
    _bad(["demo", "--nope"], capsys, "divopt-rag demo: unrecognized arguments: --nope (see divopt-rag demo --help)")
    _bad(["bench"], capsys, "divopt-rag bench: the following arguments are required: SUBCOMMAND")
    _bad(["sweep", "--k"], capsys, "divopt-rag sweep: --k: expected at least one argument")
    _bad(["bench", "latency", "--dtype", "int8"], capsys, "--dtype: expected one of float32, float16, bfloat16, got 'int8'")
    assert cli.main(["sweep", "--help"]) == 0 and "--k 5 10, --k 5,10" in capsys.readouterr().out


@pytest.mark.parametrize("argv, expected", [
    (["bench", "quality", "--exclude-seeds", "inf"], "--exclude-seeds: expected an integer in [0, 4294967295], got 'inf'"),
    (["bench", "quality", "--large-k", "1.5"], "--large-k: expected an integer >= 1, got '1.5'"),  # was read as k = 1
    (["bench", "latency", "--k", "10,x"], "--k: expected integers >= 1, got 'x' in '10,x'"),
])
def test_benchmark_integer_lists_are_integers_or_exit_2(argv, expected, capsys):
    _bad(argv, capsys, expected)  # inf was an internal error (OverflowError), exit 1


# ---- the one error policy: bugs, --debug, Ctrl-C, warnings -------------------------------------
def test_bugs_exit_1_in_one_line_and_debug_shows_the_traceback(monkeypatch, capsys, tmp_path):
    from divopt_rag.experiments.studies import demo

    def boom(args):
        raise RuntimeError("kaboom\nsecond line")

    monkeypatch.setattr(demo, "main", boom)
    assert cli.main(["demo", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("divopt-rag demo: internal error: RuntimeError: kaboom; second line "
                   "(run again with --debug for the traceback, and please report it)")
    with pytest.raises(RuntimeError, match="kaboom"):
        cli.main(["demo", "--out", str(tmp_path), "--debug"])
    with pytest.raises(RuntimeError, match="kaboom"):
        cli.main(["--debug", "demo", "--out", str(tmp_path)])

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "main", interrupted)
    assert cli.main(["demo", "--out", str(tmp_path)]) == 130
    assert capsys.readouterr().err.strip() == "divopt-rag demo: interrupted"

    def warns(args):
        warnings.warn("careful\nnow", UserWarning)
        return 0

    monkeypatch.setattr(demo, "main", warns)
    assert cli.main(["demo", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().err.strip() == "divopt-rag: warning: careful; now"


def test_a_real_process_prints_one_line_and_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "divopt_rag.experiments.cli", "demo", "--k", "0", *FAST_DEMO,
                           "--out", str(tmp_path / "d")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "divopt-rag demo: --k: expected an integer >= 1, got '0' (see divopt-rag demo --help)"]


# ---- item 4: failed runs are summarised and exit non-zero --------------------------------------
@register_method("_always_fails_reliability")
def _always_fails(inst, *, mood="grumpy"):
    raise RuntimeError(f"no selection today ({mood})")


def test_an_all_failed_sweep_exits_1_with_its_reasons(tmp_path, capsys):
    rc = cli.main(["sweep", *TINY_SWEEP, "--out", str(tmp_path / "s"), "--methods", "_always_fails_reliability"])
    captured = capsys.readouterr()
    assert rc == 1
    assert "Empty DataFrame" not in captured.out
    assert "divopt-rag sweep: every run failed" in captured.err
    assert "2 x RuntimeError: no selection today (grumpy)" in captured.err
    table = pd.read_parquet(tmp_path / "s" / "results.parquet")
    assert len(table) == 2 and (table["status"] == "error").all()


def test_partial_failures_are_summarised_at_the_end(tmp_path, capsys):
    rc = cli.main(["sweep", *TINY_SWEEP, "--out", str(tmp_path / "s"), "--methods", "topk", "_always_fails_reliability",
                   "--method-param", "_always_fails_reliability.mood=sad,cross"])
    captured = capsys.readouterr()
    assert rc == 1
    assert "divopt-rag sweep: 4 of 6 runs failed" in captured.err
    assert "2 x RuntimeError: no selection today (sad)" in captured.err
    assert "2 x RuntimeError: no selection today (cross)" in captured.err
    assert "topk" in captured.out  # the summary of the runs that worked is still printed


def test_certify_reports_failed_selectors(tmp_path, capsys, monkeypatch):
    from divopt_rag.experiments.studies import runs, sweep

    real = runs.execute_run

    def with_a_failure(data, task, *a, **kw):
        if task.method == "topk":
            raise RuntimeError("broken selector")
        return real(data, task, *a, **kw)

    monkeypatch.setattr(sweep, "execute_run", with_a_failure)
    rc = cli.main(["certify", "--queries", "1", "--corpus-size", "60", "--dim", "6", "--n", "6", "--k", "2",
                   "--theta", "0.5", "--methods", "topk", "mmr", "--out", str(tmp_path / "c"), "--no-progress"])
    err = capsys.readouterr().err
    # every row counts (the exact rows too, issue 48 item 2): 2 selector rows and the exact row
    assert rc == 1 and "divopt-rag certify: 1 of 3 runs failed" in err and "broken selector" in err
