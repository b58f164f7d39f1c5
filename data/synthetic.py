"""Deterministic synthetic pools: anisotropic "narrow cone" embeddings with planted
near-duplicate clusters, and a small readable toy corpus of redundant facts.

Narrow cone (sentence embeddings are anisotropic: pairwise cosines of unrelated texts are
far above 0). Row i of cluster c(i):
    e_i ∝ cone * mu0 + spread * u_{c(i)} + noise * z_i / sqrt(d)
with mu0 a common unit direction, u_c unit cluster directions and z_i standard normal.
Rows of one cluster are near-duplicates (cosine ≈ (cone² + spread²) / (cone² + spread² + noise²)).
The query mixes mu0 with a few "relevant" cluster directions, so plain top-k returns
near-duplicates of one or two clusters while several clusters are relevant.
Generated in fixed 2^14-row chunks, each from its own seed: the same seed gives the same
matrix whether it is built in memory, into ``out`` or streamed to a .npy file, and 10^6 x 1024
never needs more than the output array plus one chunk.
"""
from __future__ import annotations

import os

import numpy as np
from tqdm.auto import tqdm

from .atomic import write_atomically
from .dataset import Dataset
from .embedded import EmbeddedDataset

__all__ = ["narrow_cone", "narrow_cone_npy", "toy_corpus", "toy_dataset", "synthetic_dataset", "synthetic_pools"]


def _unit(a: np.ndarray, axis: int = -1) -> np.ndarray:
    return a / np.linalg.norm(a, axis=axis, keepdims=True)


def _structure(n: int, d: int, n_clusters: int, n_relevant_clusters: int, seed: int):
    """The seed's common direction mu0, cluster directions, labels and planted relevant
    clusters (drawn in this order from one generator; returned with it for the query)."""
    root = np.random.default_rng(seed)
    mu0 = _unit(root.standard_normal(d))
    # all cluster directions are drawn up front: (n_clusters, d) float64, e.g. 50 000 x 1024
    # = 400 MB for n = 10^6 at the default 20 rows per cluster
    centers = _unit(root.standard_normal((n_clusters, d)))
    labels = root.integers(0, n_clusters, size=n).astype(np.int64)
    rel = root.choice(n_clusters, size=min(n_relevant_clusters, n_clusters), replace=False)
    return mu0, centers, labels, rel, root


def narrow_cone(
    n: int,
    d: int,
    *,
    n_clusters: int | None = None,
    n_relevant_clusters: int = 5,
    cone: float = 1.0,
    spread: float = 1.0,
    noise: float = 0.35,
    seed: int = 0,
    dtype=np.float32,
    out: np.ndarray | None = None,
    show_progress: bool | None = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (E, q, labels): E (n, d) unit rows in ``dtype``, q (d,) unit float32,
    labels (n,) int64 cluster ids (the subtopics).

    ``n_clusters`` defaults to max(2, n // 20) (about 20 near-duplicates per cluster).
    ``out`` may be a preallocated (n, d) array (e.g. a np.memmap) to fill in place; see
    :func:`narrow_cone_npy` for a 10^6 x 1024 matrix written straight to a .npy file.
    ``show_progress``: a tqdm bar over rows (None: only on a terminal).
    """
    if n < 1 or d < 1:
        raise ValueError(f"narrow_cone needs n >= 1 and d >= 1, got n={n}, d={d}")
    n_clusters = max(2, n // 20) if n_clusters is None else int(n_clusters)
    if n_clusters < 1:
        raise ValueError(f"n_clusters must be >= 1, got {n_clusters}")
    mu0, centers, labels, rel, root = _structure(n, d, n_clusters, n_relevant_clusters, seed)
    q = _unit(1.0 * mu0 + 0.9 * _unit(centers[rel].sum(0)) + 0.2 * _unit(root.standard_normal(d)))
    E = np.empty((n, d), dtype=dtype) if out is None else out
    if E.shape != (n, d):
        raise ValueError(f"out must have shape ({n}, {d}), got {E.shape}")
    chunk_size = 1 << 14  # fixed generation granularity, each chunk from its own seed
    seeds = np.random.SeedSequence(seed).spawn((n + chunk_size - 1) // chunk_size)
    disable = None if show_progress is None else not show_progress
    with tqdm(total=n, desc=f"narrow_cone {n}x{d}", unit="row", disable=disable) as bar:
        for s in range(0, n, chunk_size):
            stop = min(n, s + chunk_size)
            rng = np.random.default_rng(seeds[s // chunk_size])
            z = rng.standard_normal((stop - s, d), dtype=np.float32)
            blk = cone * mu0[None, :] + spread * centers[labels[s:stop]] + (noise / np.sqrt(d)) * z
            E[s:stop] = _unit(blk.astype(np.float32), axis=1).astype(dtype, copy=False)
            bar.update(stop - s)
    if isinstance(E, np.memmap):
        E.flush()
    return E, q.astype(np.float32), labels


class _NpyAppender:
    """Write-only (n, d) target for :func:`narrow_cone`: rows arrive in order and are appended
    to a .npy file, so neither the matrix nor its page cache stays resident (a np.memmap
    would keep every written page counted in RSS)."""

    def __init__(self, path: str, n: int, d: int, dtype):
        self.shape, self.dtype, self._next = (n, d), np.dtype(dtype), 0
        self._fh = open(path, "wb")
        np.lib.format.write_array_header_1_0(
            self._fh, {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": (n, d)}
        )

    def __setitem__(self, key: slice, block: np.ndarray) -> None:
        if not isinstance(key, slice) or key.start != self._next:
            raise RuntimeError(f"rows must be written in order: expected row {self._next}, got {key}")
        self._fh.write(np.ascontiguousarray(block, dtype=self.dtype).tobytes())
        self._next = key.stop

    def close(self) -> None:
        self._fh.close()
        if self._next != self.shape[0]:
            raise RuntimeError(f"wrote {self._next} of {self.shape[0]} rows")


def narrow_cone_npy(path: str | os.PathLike, n: int, d: int, **kwargs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`narrow_cone` streamed chunk by chunk into a .npy file at ``path`` (created or
    overwritten); returns (E as a read-only memory map, q, labels), equal to the in-memory
    result. Peak memory is one 2^14-row chunk plus the (n_clusters, d) cluster directions,
    so 10^6 x 1024 (4 GB in float32) needs well under 1 GB of RAM."""
    dtype = kwargs.pop("dtype", np.float32)
    if "out" in kwargs:
        raise TypeError("narrow_cone_npy writes to path; do not pass out=")
    made: dict[str, np.ndarray] = {}

    def stream(tmp) -> None:
        writer = _NpyAppender(os.fspath(tmp), n, d, dtype)
        try:
            _, made["q"], made["labels"] = narrow_cone(n, d, dtype=dtype, out=writer, **kwargs)
        finally:
            writer._fh.close()
        writer.close()

    write_atomically(path, stream)  # the file is whole or absent, as every file divopt writes
    return np.load(os.fspath(path), mmap_mode="r"), made["q"], made["labels"]


# A readable redundant corpus: 6 subtopics of one query, each stated several times in
# near-paraphrases (the redundancy a RAG retriever must avoid), plus off-topic distractors.
_TOY = [
    ("history", "Python was created by Guido van Rossum and first released in 1991."),
    ("history", "Guido van Rossum released the first version of Python in 1991."),
    ("history", "The Python language dates back to 1991, when Guido van Rossum published it."),
    ("history", "Python's first public release came in 1991 from its creator Guido van Rossum."),
    ("typing", "Python is dynamically typed: variables have no declared types."),
    ("typing", "In Python, types are checked at run time, not at compile time."),
    ("typing", "Python uses dynamic typing, so a name can refer to objects of any type."),
    ("memory", "CPython manages memory with reference counting and a cycle-detecting garbage collector."),
    ("memory", "Python frees objects through reference counting plus a garbage collector for cycles."),
    ("memory", "Memory in CPython is reclaimed by reference counts and a cyclic garbage collector."),
    ("indentation", "Python uses indentation instead of braces to delimit blocks of code."),
    ("indentation", "Code blocks in Python are defined by whitespace indentation rather than curly braces."),
    ("indentation", "Instead of braces, Python marks blocks by their indentation level."),
    ("packages", "The Python Package Index hosts hundreds of thousands of third-party packages installed with pip."),
    ("packages", "pip installs third-party Python packages from the Python Package Index (PyPI)."),
    ("gil", "The global interpreter lock lets only one thread execute Python bytecode at a time in CPython."),
    ("gil", "CPython's GIL prevents multiple threads from running Python bytecode simultaneously."),
    ("gil", "Because of the global interpreter lock, CPython threads do not run bytecode in parallel."),
    ("off-topic", "The python is a large non-venomous snake found in Africa, Asia and Australia."),
    ("off-topic", "Monty Python was a British comedy group formed in 1969."),
    ("off-topic", "Java is an island of Indonesia and home to its capital, Jakarta."),
    ("off-topic", "Rust is a reddish-brown coating of iron oxide formed by oxidation."),
]


def toy_corpus() -> tuple[list[str], list[str], str]:
    """Return (texts, subtopic labels, query) of the toy redundant-facts corpus."""
    labels = [t for t, _ in _TOY]
    texts = [s for _, s in _TOY]
    return texts, labels, "What are the main facts about the Python programming language?"


def toy_dataset() -> Dataset:
    """The toy corpus as a :class:`divopt_rag.data.Dataset`: one query, every on-topic fact
    relevant (grade 1, off-topic grade 0), subtopic label per passage."""
    texts, labels, query = toy_corpus()
    pids = [f"toy{i}" for i in range(len(texts))]
    return Dataset(
        name="toy-python-facts",
        passage_ids=pids,
        texts=texts,
        query_ids=["q0"],
        queries=[query],
        qrels={"q0": {p: int(l != "off-topic") for p, l in zip(pids, labels)}},
        subtopics={p: l for p, l in zip(pids, labels) if l != "off-topic"},
    )


def synthetic_dataset(n: int, d: int, *, seed: int = 0, **kwargs) -> tuple[Dataset, np.ndarray, np.ndarray]:
    """(Dataset, E, q) from :func:`narrow_cone`: passages "s<i>" labelled by cluster, one query
    "q0" whose relevant passages (grade 1) are those of the ``n_relevant_clusters`` planted
    clusters the query mixes in (``meta["relevant_clusters"]``). The texts are
    placeholders ("synthetic passage i of cluster c"): use E, not an encoder."""
    E, q, labels = narrow_cone(n, d, seed=seed, **kwargs)
    n_clusters = kwargs.get("n_clusters")
    n_clusters = max(2, n // 20) if n_clusters is None else int(n_clusters)
    _, _, _, rel, _ = _structure(n, d, n_clusters, kwargs.get("n_relevant_clusters", 5), seed)
    relevant = set(int(c) for c in rel)
    pids = [f"s{i}" for i in range(n)]
    ds = Dataset(
        name=f"narrow_cone(n={n},d={d},seed={seed})",
        passage_ids=pids,
        texts=[f"synthetic passage {i} of cluster {int(c)}" for i, c in enumerate(labels)],
        query_ids=["q0"],
        queries=["synthetic query"],
        qrels={"q0": {p: 1 for p, c in zip(pids, labels) if int(c) in relevant}},
        subtopics={p: f"c{int(c)}" for p, c in zip(pids, labels)},
        meta={"relevant_clusters": sorted(relevant)},
    )
    return ds, E, q


def synthetic_pools(
    n: int = 200,
    d: int = 32,
    n_queries: int = 4,
    n_clusters: int | None = None,
    n_relevant_clusters: int = 5,
    noise: float = 0.35,
    seed: int = 0,
    subtopics: str = "relevant",
) -> EmbeddedDataset:
    """The "synthetic" dataset of :func:`divopt_rag.data.load`: query ``q<j>`` has its own pool of
    ``n`` narrow-cone rows, :func:`synthetic_dataset` with seed ``seed + j`` (doc ids
    ``q<j>-d<i>``). Ground truth: the passages of the query's planted relevant clusters are
    relevant (grade 1) and their cluster ``c<id>`` is their subtopic; with ``subtopics="all"``
    every passage is labelled by its cluster (coverage of the whole pool)."""
    if subtopics not in ("relevant", "all"):
        raise ValueError(f"subtopics must be 'relevant' or 'all', got {subtopics!r}")
    for name, value in (("n", n), ("d", d), ("n_queries", n_queries)):  # before anything is generated
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    Es, qs, pools, subs, qrels, doc_ids, qids = [], [], [], {}, {}, [], []
    for j in range(int(n_queries)):
        ds, E, q = synthetic_dataset(
            int(n), int(d), seed=int(seed) + j, n_clusters=n_clusters, n_relevant_clusters=n_relevant_clusters,
            noise=noise,
        )
        qid = f"q{j}"
        rename = {p: f"{qid}-d{i}" for i, p in enumerate(ds.passage_ids)}
        rel = {rename[p]: g for p, g in ds.qrels["q0"].items()}
        qids.append(qid)
        pools.append(np.arange(j * int(n), (j + 1) * int(n)))
        qrels[qid] = rel
        subs[qid] = {rename[p]: lab for p, lab in ds.subtopics_for("q0").items() if subtopics == "all" or rel.get(rename[p], 0) > 0}
        doc_ids.extend(rename[p] for p in ds.passage_ids)
        Es.append(E)
        qs.append(q)
    return EmbeddedDataset(
        name="synthetic", key="", E=Es[0] if len(Es) == 1 else np.concatenate(Es), Q=np.stack(qs), query_ids=qids,
        doc_ids=np.asarray(doc_ids), pools=pools, qrels=qrels, subtopics=subs,
    )
