"""DF-RAG's candidate chunk sets (Khan et al., arXiv:2601.17212v1): the lambda grids, the
retrieval functions that build one set per lambda, and what a question offers them.

* gMMR (Sec. 3.1, Eqs. 1-3): first pick argmax cos(q, c); then
  argmax_c  lambda cos(q, c) + (1 - lambda) sqrt(2 - 2 cos(c, c_S)),  c_S the centroid of S
  (divopt's registered selector ``gmmr``).
* classical MMR as App. B.2 defines it for Table 3: "The only difference in these two retrieval
  functions is the distance metric, where traditional MMR uses cosine similarity and gMMR uses
  Euclidean distance in a normalized embedding space". So the centroid stays and the diversity
  term becomes the cosine similarity, subtracted as MMR subtracts it:
  argmax_c  lambda cos(q, c) - (1 - lambda) cos(c, c_S), the same first pick
  (:func:`classical_mmr`). It is not divopt's plain ``mmr`` (Carbonell & Goldstein, the maximum
  similarity to any selected chunk). The text decides it; the authors' public code
  (github.com/SaadatKhan/DF-RAG, ``utils.py``) has only gMMR, with a comment naming the cosine
  to the centroid at the distance term and no sign, so divopt subtracts it as MMR does. At lambda = 0 and 1 both functions pick alike
  (sqrt(2 - 2x) falls as x rises); in between they weigh the two terms differently.

divopt's theta is DF-RAG's lambda (1 = pure relevance: S_1 is the cosine top-k).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from divopt_rag.models import Instance
from divopt_rag.models.kernels import matvec
from divopt_rag.models.validation import check_indices
from divopt_rag.solvers import select
from divopt_rag.solvers.greedy import exact_relevance, exact_rows, greedy_loop

__all__ = ["DFRAG_THETAS", "ORACLE_THETAS", "FIXED_THETAS", "SCORE_MAX", "CANDIDATE_SETS", "classical_mmr",
           "candidate_set", "question_texts", "generator_order"]

#: DF-RAG's candidate lambdas {0.1, ..., 1.0} (Sec. 3.4): lambda = 0 (diversity only) is not a candidate.
DFRAG_THETAS: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(1, 11))
#: The Oracle's lambdas {0, 0.1, ..., 1.0} (Sec. 3.3: "from 0 to 1 in increments of 0.1").
ORACLE_THETAS: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(0, 11))
#: The fixed-lambda baseline's lambdas (Sec. 3.2: "lambda in [0, 1] in increments of 0.1").
FIXED_THETAS: tuple[float, ...] = ORACLE_THETAS
#: The Evaluator's best score of one plan step, r(p_i) in {0, ..., 5} (Sec. 3.4).
SCORE_MAX = 5


def classical_mmr(inst: Instance) -> np.ndarray:
    """DF-RAG's classical MMR (App. B.2, module docstring): first pick argmax c; then
    argmax_i theta c_i - (1 - theta) cos(e_i, m_S), m_S the centroid of the selected set. Rows of
    ``inst`` in pick order; near ties re-decided in float64 as divopt's greedy selectors do."""
    c, th = inst.relevance, inst.theta
    s = torch.zeros(inst.d, dtype=inst.acc_dtype, device=inst.device)

    def add(e: torch.Tensor, j: int) -> torch.Tensor:
        s.add_(e)
        return th * c - (1 - th) * matvec(inst.E, s) / max(float(torch.linalg.vector_norm(s)), 1e-12)

    def exact(rows: torch.Tensor, picks: list[int]) -> torch.Tensor:
        m = exact_rows(inst, torch.tensor(picks)).sum(dim=0)
        cos = exact_rows(inst, rows) @ (m / torch.linalg.vector_norm(m).clamp_min(1e-300))
        return th * exact_relevance(inst, rows) - (1 - th) * cos

    picks, _, _ = greedy_loop(inst, add, exact)
    return picks.cpu().numpy().astype(np.int64)


#: DF-RAG's own retrieval functions by name; any other name is a divopt selector (``select``).
CANDIDATE_SETS: dict[str, Callable[[Instance], np.ndarray]] = {"classical_mmr": classical_mmr}


def candidate_set(inst: Instance, method: str = "gmmr") -> np.ndarray:
    """S_theta: the k chunks ``method`` picks at ``inst.theta`` (rows of ``inst`` in pick order):
    ``"gmmr"`` (Sec. 3.1), ``"classical_mmr"`` (App. B.2), or any registered divopt selector (a
    divopt variant, not the paper's)."""
    fn = CANDIDATE_SETS.get(method)
    idx = fn(inst) if fn is not None else select(inst, method).indices
    return check_indices(idx, inst.n, f"{method} indices")


def question_texts(context: Any) -> tuple[str, Sequence[str]]:
    """(question, one passage text per pool row) of a query context; ValueError naming what is missing."""
    qid = getattr(context, "query_id", "?")
    if getattr(context, "query_text", None) is None:
        raise ValueError(f"DF-RAG needs the question text: context.query_text is None for query {qid!r}")
    if getattr(context, "passages", None) is None:
        raise ValueError(f"DF-RAG needs the passage texts: context.passages is None for query {qid!r}")
    if len(context.passages) != context.instance.n:
        raise ValueError(f"context.passages must hold one text per pool row ({context.instance.n}), "
                         f"got {len(context.passages)} for query {qid!r}")
    return str(context.query_text), context.passages


def generator_order(context: Any, indices: np.ndarray, order: str) -> np.ndarray:
    """The generator's passage order: ``"selection"`` (pick order) or ``"relevance"`` (decreasing
    cosine; the paper gives no order, the authors' public code sorts the chosen chunks by cosine)."""
    if order == "selection":
        return indices
    rel = context.instance.relevance.double().cpu().numpy()[indices]
    return indices[np.argsort(-rel, kind="stable")]
