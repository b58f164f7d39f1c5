"""What verified caches cost: writing and loading a dataset cache folder and an embedding cache
of n x d float32 rows, with their checksums, against the same reads and writes without them.
One tidy row per measurement, written to parquet.

    python -m divopt_rag.data.bench_cache --out /tmp/cache_bench.parquet --n 100000 1000000 --d 1024

Stages (each timed once, in this process):

* ``save_plain`` / ``save_verified``: ``np.save`` of E and Q, against
  :meth:`EmbeddedDataset.save` (the same files, then their checksums and the manifest);
* ``load_plain``: ``np.load(mmap_mode="r")`` of E and Q (touches no data page);
* ``load_unverified``: :meth:`EmbeddedDataset.load` with the checksum step switched off (what
  a load cost before: the memory maps plus meta.json's ids and labels);
* ``load_verified_first`` / ``load_verified_again``: :meth:`EmbeddedDataset.load` the first
  time in the process (every byte hashed) and again (the digests remembered per file
  identity: a ``stat`` per file);
* ``hash_from_page_cache``: the two digests alone, recomputed (the hash's own speed);
* ``shards_write``: the embedding cache's shards (16384 rows each) with manifests;
* ``shards_lookup_unverified`` / ``shards_lookup_first`` / ``shards_lookup_again``: a fresh
  :class:`EmbeddingCache` looking up every key without checksums, then with them (keys files
  verified on open, every data shard on its first hit), then with the digests remembered.

Files are hashed from the page cache (they were just written; the machine has the RAM): a
first load from a cold disk adds the disk's read time, which a memory-mapped run that touches
every row pays anyway. Files are aged past :data:`~divopt_rag.data.hashing.RACY_SECONDS`
before the timed loads so that the "again" rows show the remembered digests.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from . import embedded as embedded_module
from . import embedding_cache as cache_module
from . import hashing
from .embedding_cache import EmbeddingCache, text_keys
from .embedded import EmbeddedDataset
from .hashing import RACY_SECONDS, file_digest
from .atomic import atomic_write

__all__ = ["run", "main"]

_CHUNK = 16384


def _rows(n: int, d: int, seed: int) -> np.ndarray:
    """n unit rows, generated chunk by chunk into a memory map (never 2 copies in RAM)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, d), dtype=np.float32)
    for i in range(0, n, _CHUNK):
        block = rng.standard_normal((min(_CHUNK, n - i), d), dtype=np.float32)
        out[i : i + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def _timed(rows: list[dict], stage: str, n: int, d: int, nbytes: int, fn):
    t = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t
    rows.append({"stage": stage, "n": n, "d": d, "bytes": nbytes, "seconds": seconds, "gb_per_s": nbytes / seconds / 1e9})
    return result


def _bench_one(rows: list[dict], n: int, d: int, work: Path) -> None:
    E = _rows(n, d, seed=0)
    Q = _rows(64, d, seed=1)
    data = EmbeddedDataset("bench", "0" * 16, E, Q, [f"q{i}" for i in range(64)], np.arange(n))
    nbytes = E.nbytes + Q.nbytes
    plain = work / "plain"
    plain.mkdir()
    _timed(rows, "save_plain", n, d, nbytes, lambda: (np.save(plain / "E.npy", E), np.save(plain / "Q.npy", Q)))
    _timed(rows, "save_verified", n, d, nbytes, lambda: data.save(work / "verified"))
    keys = text_keys([f"text {i}" for i in range(n)])
    cache = EmbeddingCache(work / "emb", "bench/model", revision="r1")

    def write_shards() -> None:
        for i in range(0, n, _CHUNK):
            cache.write(keys[i : i + _CHUNK], E[i : i + _CHUNK])

    _timed(rows, "shards_write", n, d, E.nbytes + keys.nbytes, write_shards)
    del E, data
    time.sleep(RACY_SECONDS + 0.5)  # past the racy window: digests may now be remembered
    _timed(rows, "load_plain", n, d, nbytes,
           lambda: (np.load(plain / "E.npy", mmap_mode="r"), np.load(plain / "Q.npy", mmap_mode="r")))
    with _unverified():
        _timed(rows, "load_unverified", n, d, nbytes, lambda: EmbeddedDataset.load(work / "verified"))
    _timed(rows, "load_verified_first", n, d, nbytes, lambda: EmbeddedDataset.load(work / "verified"))
    _timed(rows, "load_verified_again", n, d, nbytes, lambda: EmbeddedDataset.load(work / "verified"))
    hashing._memo.clear()
    _timed(rows, "hash_from_page_cache", n, d, nbytes,
           lambda: [file_digest(work / "verified" / f) for f in ("E.npy", "Q.npy")])

    def lookup() -> None:
        found, _, _ = EmbeddingCache(work / "emb", "bench/model", revision="r1").lookup(np.sort(keys))
        assert found.all()

    with _unverified():
        _timed(rows, "shards_lookup_unverified", n, d, nbytes, lookup)
    _timed(rows, "shards_lookup_first", n, d, nbytes, lookup)
    _timed(rows, "shards_lookup_again", n, d, nbytes, lookup)


@contextlib.contextmanager
def _unverified():
    """The same loads with the checksum step switched off: what they cost before it."""
    saved = embedded_module.verify, cache_module.verify
    embedded_module.verify = cache_module.verify = lambda *args, **kwargs: None
    try:
        yield
    finally:
        embedded_module.verify, cache_module.verify = saved


def run(out: str | Path, ns: list[int], d: int = 1024, work_dir: str | None = None):
    """Run every stage for each n; write and return the tidy frame."""
    import pandas as pd

    rows: list[dict] = []
    for n in ns:
        work = Path(tempfile.mkdtemp(prefix="divopt-cache-bench-", dir=work_dir))
        try:
            _bench_one(rows, n, d, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    frame = pd.DataFrame(rows)
    frame.insert(0, "host", f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cpu, load {os.getloadavg()[0]:.1f})")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, lambda fh: frame.to_parquet(fh, index=False))
    return frame


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="parquet file to write")
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000], help="rows (default 1e5 1e6)")
    parser.add_argument("--d", type=int, default=1024, help="dimension (default 1024)")
    parser.add_argument("--work-dir", default=None, help="where the temporary caches go (default: the system's)")
    args = parser.parse_args(argv)
    frame = run(args.out, args.n, args.d, args.work_dir)
    print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
