"""Deterministic fake embedding and a small redundant corpus for the RAG-adapter tests
(tests/test_integrations_*.py); no model, no network."""
import zlib

import numpy as np

D = 48

TOPICS = [
    "tide moon gravity ocean", "volcano lava magma eruption", "bread yeast flour oven",
    "python code function loop", "violin string bow music", "glacier ice snow cold",
    "stock market price trade", "bee honey hive flower",
]

QUERY = "ocean tide gravity volcano lava bread"


def hash_embed(text: str) -> list[float]:
    """Bag of words: each word adds a crc32-chosen signed weight in [0.5, 1.5) to a
    crc32-chosen coordinate (real weights: no cosine ties), plus a shared offset (real sentence
    embeddings share a direction too)."""
    v = np.zeros(D)
    v[0] = 0.5
    for w in text.lower().split():
        h = zlib.crc32(w.encode())
        weight = 0.5 + ((h >> 8) % 997) / 997
        v[1 + h % (D - 1)] += weight if (h >> 20) & 1 else -weight
    return v.tolist()


def corpus(seed=0, per_topic=6):
    """Near-duplicate texts per topic (topic words + 3 random filler words + a unique tag)."""
    rng = np.random.default_rng(seed)
    filler = [f"w{i}" for i in range(40)]
    texts, meta = [], []
    for t, words in enumerate(TOPICS):
        for j in range(per_topic):
            extra = rng.choice(filler, size=3, replace=False)
            texts.append(f"{words} {' '.join(extra)} t{t}d{j}")
            meta.append({"topic": t, "j": j})
    return texts, meta


def cosine(E, q):
    E, q = np.asarray(E, dtype=np.float64), np.asarray(q, dtype=np.float64)
    return E @ q / (np.linalg.norm(E, axis=1) * np.linalg.norm(q))
