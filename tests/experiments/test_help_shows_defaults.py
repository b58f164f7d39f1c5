"""--help as a new user reads it (issue 49, item 3): every flag of every subcommand shows its
default in the help argparse prints (a flag without help text too); one default per meaning
(``--n-workers``); output folders named with the folder they are relative to; the datasets the
help lists are the registry's, as its errors list them; "did you mean" for unknown names."""
import argparse
import re
import subprocess
import sys

import pytest

from divopt_rag.experiments.cli.flag_types import DATASET_NAMES
from divopt_rag.experiments.cli.main import COMMANDS, build_parser, main


def _rendered(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The lines ``--help`` prints for ``action`` (argparse's own formatting path)."""
    formatter = parser._get_formatter()
    return " ".join(formatter._format_action(action).split())


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(p))
def test_every_flag_shows_its_default(path):
    parser = build_parser(path)
    missing = []
    for action in parser._actions:
        if not action.option_strings or action.required or action.nargs == 0 or action.default is argparse.SUPPRESS:
            continue
        if "default" not in _rendered(parser, action).lower():
            missing.append(action.option_strings[-1])
    assert not missing, f"divopt-rag {' '.join(path)}: flags whose --help shows no default: {missing}"
    text = parser.format_help()
    assert "(default: None)" not in text  # a default is said in words ("none"), never Python's repr
    assert DATASET_NAMES not in text


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(p))
def test_output_folder_is_named_with_where_it_is(path):
    parser = build_parser(path)
    out = [a for a in parser._actions if "--out" in a.option_strings]
    if not out:
        pytest.skip("no --out")
    text = _rendered(parser, out[0])
    assert out[0].help, f"--out says nothing of what it writes: {text}"
    assert "in the current folder" in text, text  # where a relative default lands


def test_n_workers_has_one_default_and_one_meaning():
    actions = {}
    for path in COMMANDS:
        parser = build_parser(path)
        for action in parser._actions:
            if "--n-workers" in action.option_strings:
                actions[path] = (action.default, _rendered(parser, action))
    assert {("certify",), ("sweep",)} <= set(actions)
    assert len({default for default, _ in actions.values()}) == 1
    assert len({re.sub(r"\S+ --n-workers N_WORKERS ", "", text) for _, text in actions.values()}) == 1
    assert "in this process with --backend local" in actions[("sweep",)][1]


def test_engine_runs_in_this_process_by_default():
    from divopt_rag.experiments.engine.options import RunOptions

    assert RunOptions().n_workers is None  # executor: local + None or 0 -> inline (the one default)


def test_ray_with_zero_workers_is_refused(capsys):
    assert main(["sweep", "--backend", "ray", "--n-workers", "0", "--out", "unused-never-created"]) == 2
    err = capsys.readouterr().err
    assert "--n-workers" in err and "with --backend ray" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("path", [("certify",), ("sweep",)], ids=" ".join)
def test_dataset_help_lists_the_registry_as_its_errors_do(path, capsys):
    from divopt_rag.data.dataset_names import BUILTIN_DATASETS, usage
    from divopt_rag.experiments.cli.flag_types import builtin_dataset_usage

    help_text = " ".join(build_parser(path).format_help().split())
    assert builtin_dataset_usage() in help_text
    for name in BUILTIN_DATASETS:  # wordnet_glosses, ir_datasets, mini_wikipedia: in help as in errors
        assert name in help_text
    assert main([*path, "--dataset", "mini_wikipedai:x", "--out", "unused-never-created"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "did you mean 'mini_wikipedia'?" in err
    for name, (arg, aliases) in BUILTIN_DATASETS.items():  # each written as --help writes it
        assert usage([(name, arg, aliases)]) in err


def test_help_table_is_the_registry_in_a_fresh_process():
    """Other tests register datasets of their own: compare in a process of its own."""
    code = ("from divopt_rag.experiments.cli.flag_types import builtin_dataset_usage as help_list\n"
            "from divopt_rag.data.registry import dataset_usage\n"
            "print(help_list() == dataset_usage())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True", out.stdout + out.stderr


@pytest.mark.parametrize("argv, hint", [
    (["certify", "--methods", "mmrr"], "did you mean 'mmr'?"),
    (["sweep", "--methods", "fw_wss"], "did you mean 'fw_ws'?"),
    (["certify", "--solver", "gurobbi"], "did you mean 'gurobi'?"),
    (["certify", "--backend", "rey"], "did you mean 'ray'?"),
    (["reproduce", "dfrag-tabel1"], "did you mean 'dfrag-table1'?"),
    (["bench", "quality", "--parts", "smal"], "did you mean 'small'?"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_cli_suggests_the_closest_name(argv, hint, capsys, tmp_path):
    rc = main([*argv, "--out", str(tmp_path / "o")]) if argv[0] != "reproduce" else main(
        [*argv, "--out", str(tmp_path / "o"), "--analogue", "wordnet"])
    assert rc == 2
    err = capsys.readouterr().err
    assert hint in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()


def test_python_api_suggests_the_closest_name():
    import divopt_rag.data as dd
    from divopt_rag.experiments.methods import resolve_method
    from divopt_rag.experiments.reproduce import get_recipe
    from divopt_rag.solvers.selection import get_selector

    for call, hint in ((lambda: get_selector("mmrr"), "'mmr'"), (lambda: resolve_method("dppp"), "'dpp'"),
                       (lambda: dd.load("wordnett:3"), "'wordnet'"), (lambda: get_recipe("ccbqp-pareot"), "'ccbqp-pareto'")):
        with pytest.raises(ValueError, match=f"did you mean {hint}"):
            call()


def test_no_suggestion_for_a_name_far_from_every_one():
    from divopt_rag.models.names import did_you_mean

    assert did_you_mean("zzzz", ["mmr", "dpp"]) == ""
    assert did_you_mean("mmr_lazzy", ["mmr", "mmr_lazy"]) == "did you mean 'mmr_lazy'? "


def test_sweep_runs_in_this_process_and_says_last_where_it_wrote(tmp_path, capsys, monkeypatch):
    from divopt_rag.experiments.engine import backends

    def no_pool(*a, **k):
        raise AssertionError("the default must run in this process")

    monkeypatch.setattr(backends, "run_local", no_pool, raising=False)
    monkeypatch.setattr(backends, "run_ray", no_pool, raising=False)
    out = tmp_path / "s"
    rc = main(["sweep", "--out", str(out), "--dataset", "synthetic", "--dataset-opt", "n=30", "--dataset-opt", "d=6",
               "--dataset-opt", "n_queries=1", "--methods", "mmr", "--k", "3", "--theta", "0.5", "--no-progress"])
    assert rc == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"wrote {out / 'results.parquet'}"
