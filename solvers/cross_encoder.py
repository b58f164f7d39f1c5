"""Cross-encoder scores for the selectors that need them (Dartboard hybrid / D-CC, KNN-CC, MMR-CC).

A cross-encoder is any callable ``scorer(pairs) -> scores``: ``pairs`` is a list of
(left, right) tuples, the result one float per pair (a list, numpy array or tensor). Pairs are
(query, passage) for relevance and (passage_i, passage_j) for passage-passage scores. Anything
the callable understands may stand for a passage (texts, ids). A sentence-transformers
``CrossEncoder`` from a local model directory becomes such a callable with
``divopt_rag.data.load_cross_encoder(path)`` (raw logits, the scale of the paper's constants).

Precomputed scores may be given instead: ``query_scores`` (n,) for the n items of the instance
and ``pair_scores`` (n, n) with ``pair_scores[i, j]`` = score(passage_i, passage_j). A precomputed
array is used where given; the scorer fills in the rest. Only the triaged pool is scored:
K (query) and K^2 (pairs, both orders and the diagonal, as in the paper) calls per query.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from divopt_rag.models.parameters import ArrayLike, IsCallable, Sequence as SequenceOf, Text
from divopt_rag.models.validation import as_tensor, check_vector

__all__ = ["Scorer", "pool_query_scores", "pool_pair_scores", "rescale_to_distance", "PAPER_CE_RANGE"]

Scorer = Callable[[Sequence[tuple[Any, Any]]], Any]

#: The paper's rescaling range for cross-encoder logits (ms-marco-MiniLM-L-6-v2): a logit s
#: becomes the distance (hi - s) / (hi - lo), 0 for the most relevant pairs, 1 for the least.
PAPER_CE_RANGE = (-11.6, 11.4)
#: The scoring inputs every cross-encoder method takes, declared once (divopt_rag.models.parameters):
#: a scorer with the query text and the n passages, or precomputed query scores (length n,
#: checked on the instance).
CE_PARAMS = {"cross_encoder": [IsCallable("a callable scoring a list of (left, right) pairs (a local model folder: "
                                          "divopt_rag.data.load_cross_encoder(path))"), None],
             "query": [Text(), None], "passages": [SequenceOf("passages (texts or ids)", item=None, arrays=True), None],
             "query_scores": [ArrayLike(ndim=1), None]}
#: ... and what the methods that score passage pairs add: precomputed (n, n) pair scores and the
#: (lo, hi) range that rescales scores to distances.
CE_PAIR_PARAMS = {"pair_scores": [ArrayLike(ndim=2), None], "ce_range": ArrayLike(shape=(2,))}


def _missing(method: str, what: str) -> ValueError:
    return ValueError(
        f"{method} needs {what}: pass cross_encoder= (a callable scoring (left, right) pairs, e.g. "
        f"divopt_rag.data.load_cross_encoder(path)) with query= and passages=, or precomputed "
        f"{'query_scores= (n,)' if what.startswith('query') else 'pair_scores= (n, n)'}"
    )


def _check_scorer(cross_encoder: Any) -> Scorer:
    if isinstance(cross_encoder, torch.nn.Module) and hasattr(cross_encoder, "predict"):
        raise TypeError(
            "cross_encoder must be a callable scoring a list of pairs; wrap a sentence-transformers "
            "CrossEncoder with divopt_rag.data.cross_encoder_scorer(model) (raw logits), or load a local "
            "model directory with divopt_rag.data.load_cross_encoder(path)"
        )
    if not callable(cross_encoder):
        raise TypeError(
            "cross_encoder must be a callable scoring a list of (left, right) pairs, got "
            f"{type(cross_encoder).__name__}; load a local model directory with divopt_rag.data.load_cross_encoder(path)"
        )
    return cross_encoder


def _check_passages(passages: Any, n: int) -> Sequence[Any]:
    if passages is None:
        raise ValueError(f"passages must hold the n = {n} passages of the instance (texts or ids), got None")
    try:
        m = len(passages)
    except TypeError as exc:
        raise TypeError(f"passages must be a sequence of n = {n} passages, got {type(passages).__name__}") from exc
    if m != n:
        raise ValueError(f"passages must hold n = {n} passages (one per row of E), got {m}")
    return passages


def _score(scorer: Scorer, pairs: list[tuple[Any, Any]], device: torch.device) -> torch.Tensor:
    out = scorer(pairs)
    if isinstance(out, torch.Tensor):
        out = out.detach().cpu().numpy()
    arr = np.asarray(out, dtype=np.float64).reshape(-1)
    if arr.size != len(pairs):
        raise ValueError(f"cross_encoder returned {arr.size} scores for {len(pairs)} pairs")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"cross_encoder returned a non-finite score ({arr[i]}) for pair {i}")
    return torch.from_numpy(arr).to(device)


def pool_query_scores(pool: torch.Tensor, n: int, *, method: str, cross_encoder: Any = None, query: Any = None,
                      passages: Any = None, query_scores: Any = None) -> torch.Tensor:
    """float64 scores s(q, passage_i) for i in ``pool``: from ``query_scores`` (n,) or the scorer."""
    if query_scores is not None:
        s = check_vector(query_scores, "query_scores", n, " (the pool size n)")
        return s.to(device=pool.device, dtype=torch.float64).index_select(0, pool)
    if cross_encoder is None:
        raise _missing(method, "query-passage cross-encoder scores")
    scorer = _check_scorer(cross_encoder)
    if query is None:
        raise ValueError(f"{method}: query must be the query text (what the cross_encoder scores passages against)")
    passages = _check_passages(passages, n)
    return _score(scorer, [(query, passages[i]) for i in pool.tolist()], pool.device)


def pool_pair_scores(pool: torch.Tensor, n: int, *, method: str, cross_encoder: Any = None, passages: Any = None,
                     pair_scores: Any = None) -> torch.Tensor:
    """float64 (K, K) scores s(passage_i, passage_j), i, j in ``pool``: from ``pair_scores`` or the scorer."""
    if pair_scores is not None:
        P = as_tensor(pair_scores, "pair_scores")
        if P.shape != (n, n):
            raise ValueError(f"pair_scores must have shape ({n}, {n}) (n x n, n the pool size), got {tuple(P.shape)}")
        P = P.to(device=pool.device, dtype=torch.float64).index_select(0, pool).index_select(1, pool)
        if not bool(torch.isfinite(P).all()):
            i, j = (int(v) for v in torch.nonzero(~torch.isfinite(P))[0])
            raise ValueError(f"pair_scores contains non-finite values (NaN or inf): first at row {int(pool[i])}, "
                             f"column {int(pool[j])}")
        return P
    if cross_encoder is None:
        raise _missing(method, "passage-passage cross-encoder scores")
    scorer = _check_scorer(cross_encoder)
    passages = _check_passages(passages, n)
    rows = pool.tolist()
    K = len(rows)
    return _score(scorer, [(passages[i], passages[j]) for i in rows for j in rows], pool.device).reshape(K, K)


def rescale_to_distance(scores: torch.Tensor, ce_range: tuple[float, float]) -> torch.Tensor:
    """The paper's cross-encoder distance (hi - s) / (hi - lo) for ``ce_range = (lo, hi)`` (not clipped)."""
    try:
        lo, hi = (float(v) for v in ce_range)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"ce_range must be a pair (lo, hi) of numbers, got {ce_range!r}") from exc
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"ce_range must satisfy lo < hi (finite), got {ce_range!r}")
    return (hi - scores) / (hi - lo)
