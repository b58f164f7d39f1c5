"""Deterministic synthetic pools: anisotropic "narrow cone" embeddings with planted
near-duplicate clusters, and a small readable toy corpus of redundant facts.

Narrow cone (sentence embeddings are anisotropic: pairwise cosines of unrelated texts are
far above 0). Row i of cluster c(i):
    e_i ∝ cone * mu0 + spread * u_{c(i)} + noise * z_i / sqrt(d)
with mu0 a common unit direction, u_c unit cluster directions and z_i standard normal.
Rows of one cluster are near-duplicates (cosine ≈ (cone² + spread²) / (cone² + spread² + noise²)).
The query mixes mu0 with a few "relevant" cluster directions, so plain top-k returns
near-duplicates of one or two clusters while several clusters are relevant.
Generated in row chunks from per-chunk seeds: the same seed gives the same matrix at any
chunk size, and 10^6 x 1024 never needs more than the output array plus one chunk.
"""
from __future__ import annotations

import numpy as np

__all__ = ["narrow_cone", "toy_corpus"]


def _unit(a: np.ndarray, axis: int = -1) -> np.ndarray:
    return a / np.linalg.norm(a, axis=axis, keepdims=True)


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
    chunk_rows: int = 1 << 16,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (E, q, labels): E (n, d) unit rows in ``dtype``, q (d,) unit float32,
    labels (n,) int64 cluster ids (the subtopics).

    ``n_clusters`` defaults to max(2, n // 20) (about 20 near-duplicates per cluster).
    ``out`` may be a preallocated (n, d) array (e.g. a np.memmap) to fill in place.
    """
    if n < 1 or d < 1:
        raise ValueError(f"narrow_cone needs n >= 1 and d >= 1, got n={n}, d={d}")
    n_clusters = max(2, n // 20) if n_clusters is None else int(n_clusters)
    if n_clusters < 1:
        raise ValueError(f"n_clusters must be >= 1, got {n_clusters}")
    root = np.random.default_rng(seed)
    mu0 = _unit(root.standard_normal(d))
    # cluster directions are drawn lazily in blocks so huge n_clusters stays cheap
    centers = _unit(root.standard_normal((n_clusters, d)))
    labels = root.integers(0, n_clusters, size=n).astype(np.int64)
    rel = root.choice(n_clusters, size=min(n_relevant_clusters, n_clusters), replace=False)
    q = _unit(1.0 * mu0 + 0.9 * _unit(centers[rel].sum(0)) + 0.2 * _unit(root.standard_normal(d)))
    E = np.empty((n, d), dtype=dtype) if out is None else out
    if E.shape != (n, d):
        raise ValueError(f"out must have shape ({n}, {d}), got {E.shape}")
    chunk_size = 1 << 14  # fixed generation granularity: results do not depend on chunk_rows
    seeds = np.random.SeedSequence(seed).spawn((n + chunk_size - 1) // chunk_size)
    step = max(chunk_size, (chunk_rows // chunk_size) * chunk_size)
    for start in range(0, n, step):
        for s in range(start, min(n, start + step), chunk_size):
            stop = min(n, s + chunk_size)
            rng = np.random.default_rng(seeds[s // chunk_size])
            z = rng.standard_normal((stop - s, d), dtype=np.float32)
            blk = cone * mu0[None, :] + spread * centers[labels[s:stop]] + (noise / np.sqrt(d)) * z
            E[s:stop] = _unit(blk.astype(np.float32), axis=1).astype(dtype, copy=False)
    return E, q.astype(np.float32), labels


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
