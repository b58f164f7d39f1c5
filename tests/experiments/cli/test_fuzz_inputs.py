"""Fuzzing what users hand divopt from disk and the command line (issue 16, item 8):

* every dataset loader of :func:`divopt_rag.data.load` on garbage files (random bytes, random text,
  JSON lines with random fields, a random JSON document): it loads a non-empty, consistent
  dataset, or raises ValueError / TypeError / OSError whose message names the file;
* sweep config files with garbage content: a SweepConfig or a ConfigError naming the file;
* the command line: random argument lists for every command's parser (argparse's exit 2, or
  parsed arguments), and the sweep's flags -> config step (a SweepConfig or an error naming the
  flag or value), never another exception.
Embedding is replaced by a fake (hashing) encoder, so no model is loaded.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from divopt_rag.data import EmbeddedDataset, registry
from divopt_rag.experiments.cli import arguments, main as cli
from divopt_rag.experiments.studies import sweep_command
from divopt_rag.experiments.studies.grid import ConfigError, SweepConfig

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INPUT_ERRORS = (ValueError, TypeError, OSError)

KEYS = ["id", "_id", "text", "title", "query", "question", "answer", "answers", "positive", "negative",
        "qa_pairs", "short_answers", "long_answer", "context", "input", "passages", "ctxs", "support",
        "correct_answer", "distractor1", "question_stem", "choices", "answerKey", "fact1", "length", "dataset"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5)
garbage = st.one_of(
    st.binary(max_size=120),
    st.lists(st.text(max_size=25), max_size=5).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")),
    st.lists(json_objects, max_size=4).map(lambda objs: "\n".join(json.dumps(o) for o in objs).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
)


def _fake_embed(dataset, model=None, cache=None, with_titles=False):
    """Unit vectors from a hash of each text: no model, deterministic."""
    def vec(t):
        rng = np.random.default_rng(abs(hash(t)) % 2**32)
        v = rng.standard_normal(4)
        return v / np.linalg.norm(v)
    return (np.array([vec(t) for t in dataset.texts]).reshape(-1, 4),
            np.array([vec(t) for t in dataset.queries]).reshape(-1, 4))


PATH_DATASETS = sorted(n for n, e in registry.DATASETS.items() if e.arg == "path")
SUFFIX = {"npz": ".npz", "mini_wikipedia": ".parquet", "longbench": ".jsonl", "rgb": ".json"}


def _check_loaded(data: EmbeddedDataset) -> None:
    n, m = data.E.shape[0], data.Q.shape[0]
    assert n >= 1 and m >= 1 and len(data.doc_ids) == n and len(data.query_ids) == m
    assert np.allclose(np.linalg.norm(np.asarray(data.E, dtype=np.float64), axis=1), 1.0, atol=1e-4)


@pytest.mark.parametrize("name", PATH_DATASETS)
@SETTINGS
@given(content=garbage)
def test_every_loader_on_garbage_names_the_file_or_loads_consistently(name, content, tmp_path_factory):
    folder = tmp_path_factory.mktemp(name)
    target = folder / f"data{SUFFIX.get(name, '.json')}"
    target.write_bytes(content)
    with mock.patch.object(registry, "embed_dataset", _fake_embed):
        try:
            data = registry.load({"name": name, "path": str(target)})
        except INPUT_ERRORS as exc:
            assert str(target) in str(exc) or target.name in str(exc) or str(folder) in str(exc), repr(exc)
            return
    _check_loaded(data)


@SETTINGS
@given(corpus=garbage, queries=garbage, qrels=garbage)
def test_beir_folders_with_garbage_files(corpus, queries, qrels, tmp_path_factory):
    root = tmp_path_factory.mktemp("beir")
    (root / "qrels").mkdir()
    (root / "corpus.jsonl").write_bytes(corpus)
    (root / "queries.jsonl").write_bytes(queries)
    (root / "qrels" / "test.tsv").write_bytes(qrels)
    with mock.patch.object(registry, "embed_dataset", _fake_embed):
        try:
            data = registry.load({"name": "beir", "path": str(root)})
        except INPUT_ERRORS as exc:
            assert str(root) in str(exc), repr(exc)
            return
    _check_loaded(data)


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".toml"])
@SETTINGS
@given(content=garbage)
def test_sweep_config_files_parse_or_name_the_file(suffix, content, tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / f"sweep{suffix}"
    path.write_bytes(content)
    try:
        cfg = SweepConfig.from_file(path)
    except ConfigError as exc:
        assert str(path) in str(exc)
        return
    assert isinstance(cfg, SweepConfig) and cfg.methods and "name" in cfg.dataset


# ---- the command line ---------------------------------------------------------------------------
FLAGS = ["--n", "--d", "--k", "--theta", "--seed", "--out", "--methods", "--queries", "--dataset", "--solver",
         "--time-limit", "--param", "--method-param", "--dataset-opt", "--pool", "--n-workers", "--backend",
         "--evaluator", "--config", "--no-progress", "--solvers", "--input", "--kind", "--chunk-size", "--retry-errors",
         "--new-grid", "--consolidate-only", "--address", "--no-plot", "--repeats", "--sigma"]
VALUES = st.sampled_from(["0", "-1", "1", "2.5", "nan", "inf", "1e309", "fw", "mmr", "none", "x=1", "sigma=0.1,0.2",
                          "fw.sigma=1", "=", "", "auto", "ray", "local", "synthetic", "beir:/nope", "metric:recall",
                          "n=5", "--", "-"]) | st.text(max_size=6)
argvs = st.lists(st.sampled_from(FLAGS) | VALUES, max_size=8)


def _parser(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="divopt-rag " + " ".join(path))
    arguments.COMMAND_FLAGS[path][0](parser)  # the command's flags, from their one home
    return parser


@pytest.mark.parametrize("path", sorted(cli.COMMANDS), ids=lambda p: "-".join(p))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=argvs)
def test_every_parser_parses_or_exits_2(path, argv):
    parser = _parser(path)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            assert exc.code in (0, 2), exc.code  # 0: --help; 2: a usage error, explained on stderr
            if exc.code == 2:
                assert "error:" in err.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=argvs)
def test_sweep_flags_become_a_config_or_a_named_error(argv):
    parser = _parser(("sweep",))
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            args = parser.parse_args(argv)
        except SystemExit:
            return
    try:
        cfg = sweep_command.config_from_args(args)
    except INPUT_ERRORS as exc:
        assert str(exc).strip(), "an error without a message"
        return
    assert isinstance(cfg, SweepConfig) and cfg.methods and "name" in cfg.dataset
