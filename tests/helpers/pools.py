"""Small embedding pools the tests build: random unit rows, clusters of near duplicates, a query."""
import numpy as np


def random_unit(n, d, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((n, d))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    return E.astype(dtype)


def planted_duplicates(n_clusters, per_cluster, d, seed, jitter=0.05):
    """Clusters of near-duplicate rows (cosine ~ 1 - jitter^2/2) around random centers."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((n_clusters, d))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    E = np.repeat(centers, per_cluster, axis=0) + jitter * rng.standard_normal((n_clusters * per_cluster, d)) / np.sqrt(d)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    perm = rng.permutation(E.shape[0])
    return E[perm]


def unit_query(d, seed):
    rng = np.random.default_rng(seed + 10_000)
    q = rng.standard_normal(d)
    return q / np.linalg.norm(q)
