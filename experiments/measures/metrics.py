"""Metrics on a selection: IR effectiveness, diversity, coverage and the optimisation objectives.

Every function takes plain inputs (embeddings, relevance, the selected row indices or passage
ids, qrels or subtopic labels) and returns a float; :func:`selection_metrics` returns every
metric that applies to an :class:`~divopt_rag.models.Instance` and a selection as one flat dict, the
shape one row of a tidy results table wants.

Conventions
-----------
* A selection is ranked in the order given (pick order for greedy methods, decreasing relevance
  for set-valued methods, see :class:`divopt_rag.solvers.Selection`).
* qrels for one query: a mapping ``passage id -> graded relevance`` (int, 0 = not relevant).
  Recall@k and NDCG@k are computed by ir-measures (pytrec_eval backend), not by hand; a query
  without any relevant passage gives NaN (the metric is undefined, pytrec_eval would say 0).
* subtopics for one query: a mapping ``passage id -> iterable of subtopic labels`` (a passage
  may cover several subtopics; a passage absent from the mapping covers none). Synthetic
  cluster labels are the one-subtopic-per-passage case.
* Metrics on fewer than two items that need pairs (ILAD, ILS) are NaN.
* In result tables a ranking metric carries its cutoff in its column name, as ir-measures and
  ranx name measures: ``recall@10``, ``ndcg@10``, ``alpha_ndcg@10``, ``s_recall@10``
  (:data:`CUTOFF_METRICS`, :func:`with_cutoff`); the cutoff is the row's k. A table over several
  k has one column per cutoff, each filled on the rows of its k; :func:`at_cutoff` reads "the
  metric at each row's own k" from it. Set measures (``ilad``, ``ils``, ``vrsd``,
  ``relevance_sum``, ``dartboard``) are properties of the whole selection and have no cutoff.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from divopt_rag.experiments.measures.tables import CUTOFF_METRICS
from divopt_rag.models import Instance, ccbqp_objective
from divopt_rag.models.ccbqp import mean_pairwise_cosine
from divopt_rag.models.kernels import gather_rows, matvec
from divopt_rag.models.validation import check_embeddings, check_indices, check_nonnegative, check_scalar, check_vector

__all__ = [
    "ir_scores",
    "recall_at_k",
    "ndcg_at_k",
    "ilad",
    "ils",
    "alpha_ndcg",
    "subtopic_recall",
    "vrsd_score",
    "dartboard_score",
    "jaccard",
    "consistency",
    "vrsd_win",
    "win_rates",
    "selection_metrics",
    "row_metrics",
    "SET_METRICS",
]


_QID = "q"  # ir-measures needs a query id; single-query helpers use this one


# --------------------------------------------------------------------------------------------
# IR effectiveness through ir-measures
# --------------------------------------------------------------------------------------------
def _run_from_ranking(ranked_ids: Sequence[Any]) -> dict[str, float]:
    # Strictly decreasing scores so pytrec_eval keeps the given order (it breaks ties by docid).
    ids = [str(i) for i in ranked_ids]
    if len(set(ids)) != len(ids):
        raise ValueError(f"ranked ids must be unique, got duplicates in {ids}")
    return {doc: float(len(ids) - r) for r, doc in enumerate(ids)}


def _clean_qrels(qrels: Mapping[Any, Any], name: str = "qrels") -> dict[str, int]:
    if not isinstance(qrels, Mapping):
        raise TypeError(f"{name} must be a mapping passage id -> relevance grade, got {type(qrels).__name__}")
    out: dict[str, int] = {}
    for doc, rel in qrels.items():
        try:
            out[str(doc)] = int(rel)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name}[{doc!r}] must be an integer relevance grade, got {rel!r}") from exc
    return out


def ir_scores(
    runs: Mapping[Any, Sequence[Any]],
    qrels: Mapping[Any, Mapping[Any, Any]],
    k: int,
    measures: Sequence[str] = ("R", "nDCG"),
) -> dict[Any, dict[str, float]]:
    """Per-query IR measures at cutoff k for many queries at once, through ir-measures.

    runs : query id -> ranked passage ids (the selection, best first).
    qrels : query id -> {passage id: relevance grade}.
    measures : ir-measures names evaluated at ``@k`` ("R", "nDCG", "P", "RR", "AP", ...).
    Returns query id -> {"R@k": value, ...}; a query with no relevant passage (or no qrels)
    gets NaN for every measure.
    """
    import ir_measures

    k = check_scalar(k, "k", int, min_val=1)
    parsed = [ir_measures.parse_measure(f"{m}@{int(k)}") for m in measures]
    names = {str(m): m for m in parsed}
    keymap = {str(q): q for q in runs}
    run_d = {str(q): _run_from_ranking(list(r)[: int(k)]) for q, r in runs.items()}
    qrels_d = {str(q): _clean_qrels(qr, f"qrels[{q!r}]") for q, qr in qrels.items() if str(q) in run_d}
    out: dict[Any, dict[str, float]] = {q: {n: float("nan") for n in names} for q in runs}
    judged = {q: qr for q, qr in qrels_d.items() if any(v > 0 for v in qr.values())}
    if judged:
        for m in ir_measures.iter_calc(parsed, judged, {q: run_d[q] for q in judged}):
            out[keymap[m.query_id]][str(m.measure)] = float(m.value)
    return out


def recall_at_k(ranked_ids: Sequence[Any], qrels: Mapping[Any, Any], k: int | None = None) -> float:
    """Recall@k = |relevant in the top k| / |relevant| (ir-measures ``R@k``); NaN if none relevant."""
    k = len(ranked_ids) if k is None else k
    return ir_scores({_QID: ranked_ids}, {_QID: qrels}, k, ("R",))[_QID][f"R@{k}"]


def ndcg_at_k(ranked_ids: Sequence[Any], qrels: Mapping[Any, Any], k: int | None = None) -> float:
    """NDCG@k with linear gains and log2(rank+1) discounts (ir-measures ``nDCG@k``, trec_eval's)."""
    k = len(ranked_ids) if k is None else k
    return ir_scores({_QID: ranked_ids}, {_QID: qrels}, k, ("nDCG",))[_QID][f"nDCG@{k}"]


# --------------------------------------------------------------------------------------------
# Diversity of the selected embeddings
# --------------------------------------------------------------------------------------------
def _rows(E: Any, indices: Any) -> torch.Tensor:
    Et = E if isinstance(E, torch.Tensor) else check_embeddings(E, "E")
    idx = check_indices(indices, int(Et.shape[0]))
    return gather_rows(Et, torch.as_tensor(idx, device=Et.device)).double()


def ils(E: Any, indices: Any) -> float:
    """Intra-list similarity: mean w_ij = e_i^T e_j over the m(m-1)/2 unordered pairs of the
    selection (:func:`divopt_rag.models.ccbqp.mean_pairwise_cosine` on the unit rows); NaN if m < 2."""
    return mean_pairwise_cosine(_rows(E, indices), normalize=False)


def ilad(E: Any, indices: Any) -> float:
    """Intra-list average distance: mean of 1 - cos(e_i, e_j) over unordered pairs (= 1 - ILS)."""
    return 1.0 - ils(E, indices)


# --------------------------------------------------------------------------------------------
# Subtopic coverage
# --------------------------------------------------------------------------------------------
def _subtopic_sets(subtopics: Mapping[Any, Any]) -> dict[str, frozenset]:
    if not isinstance(subtopics, Mapping):
        raise TypeError(f"subtopics must be a mapping passage id -> subtopic labels, got {type(subtopics).__name__}")
    out = {}
    for doc, labels in subtopics.items():
        if isinstance(labels, (str, bytes)) or not isinstance(labels, Iterable):
            labels = [labels]  # one label per passage (e.g. a cluster id)
        out[str(doc)] = frozenset(labels)
    return out


def _alpha_dcg(ranking: Sequence[frozenset], alpha: float, k: int) -> float:
    seen: dict[Any, int] = {}
    dcg = 0.0
    for r, labels in enumerate(ranking[:k]):
        gain = sum((1.0 - alpha) ** seen.get(s, 0) for s in labels)
        dcg += gain / math.log2(r + 2)
        for s in labels:
            seen[s] = seen.get(s, 0) + 1
    return dcg


#: the deepest cutoff TREC's ndeval evaluates (pyndeval asserts ``cutoff <= 20``); a deeper
#: alpha-nDCG@k or S-recall@k comes from divopt's own transcription, never an error
NDEVAL_CUTOFF_MAX = 20


def _ndeval(measure: Any, ranked_ids: Sequence[Any], sets: Mapping[str, frozenset], k: int) -> float | None:
    """``measure@k`` through ir_measures' pyndeval provider (TREC's ndeval), or None where pyndeval
    is not installed (the core install; ``pip install "divopt-rag[ir]"`` brings it) or where ``k``
    is deeper than ndeval evaluates (``NDEVAL_CUTOFF_MAX``): the caller's own transcription then
    gives the number."""
    if k > NDEVAL_CUTOFF_MAX:
        return None
    try:
        import pyndeval  # noqa: F401  (ir_measures' provider of alpha_nDCG and StRecall)
    except ImportError:
        return None
    import ir_measures

    qrels = [ir_measures.Qrel("q", doc, 1, str(label)) for doc, labels in sets.items() for label in labels]
    ranked = [str(d) for d in ranked_ids][:k]
    run = [ir_measures.ScoredDoc("q", d, float(len(ranked) - r)) for r, d in enumerate(ranked)]
    values = [m.value for m in ir_measures.pyndeval.iter_calc([measure @ k], qrels, run)] if run and k else []
    return float(values[0]) if values else 0.0


def alpha_ndcg(
    ranked_ids: Sequence[Any], subtopics: Mapping[Any, Any], k: int | None = None, alpha: float = 0.5
) -> float:
    """alpha-nDCG@k of Clarke et al. (2008), ir_measures' ``alpha_nDCG(alpha)@k`` (TREC's ndeval).

    Gain at rank r (1-based): G_r = sum over subtopics s of J(d_r, s) (1-alpha)^{C_s(r-1)}, with
    C_s(r-1) the number of passages ranked above r that cover s; alpha-DCG@k = sum_r G_r / log2(1+r).
    The ideal alpha-DCG@k is computed by the standard greedy ordering (as NTCIR/TREC ndeval do,
    the exact ideal is NP-hard) over every passage listed in ``subtopics``. NaN if no passage
    covers any subtopic.

    Computed by ir_measures' pyndeval provider where it is installed (``[ir]``) and ``k`` is at
    most ``NDEVAL_CUTOFF_MAX`` (20, the deepest cutoff ndeval evaluates). divopt's own
    transcription below stays for the core install, which has no ndeval (a compiled extra), and
    gives the same number: its greedy ideal takes one passage at a time and breaks a tie between
    equal marginal gains toward the larger passage id (string order), ndeval's rule, so the value
    never depends on which of the two computed it.
    """
    a = check_nonnegative(alpha, "alpha")
    if a > 1:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    k = len(ranked_ids) if k is None else int(k)
    sets = _subtopic_sets(subtopics)
    if not any(sets.values()):
        return float("nan")
    import ir_measures

    value = _ndeval(ir_measures.alpha_nDCG(alpha=a), ranked_ids, sets, k)
    if value is not None:
        return value
    ranking = [sets.get(str(d), frozenset()) for d in ranked_ids]
    dcg = _alpha_dcg(ranking, a, k)
    # greedy ideal, as ndeval builds it: at each rank the passage of largest marginal gain, a tie
    # (equal gains, each summed over the passage's subtopics in one fixed order) going to the
    # larger passage id; the gains of the labels are kept as ndeval keeps them, multiplied by
    # (1 - alpha) each time a chosen passage covers the label
    label_gain = {s: 1.0 for labels in sets.values() for s in labels}
    order = sorted(label_gain, key=str)
    left = {d: [s for s in order if s in labels] for d, labels in sets.items() if labels}
    ideal = []
    for _ in range(min(k, len(left))):
        best, best_gain = None, -1.0
        for d in sorted(left, reverse=True):  # larger ids first: a later equal gain never replaces them
            gain = sum(label_gain[s] for s in left[d])
            if gain > best_gain:
                best, best_gain = d, gain
        ideal.append(frozenset(left.pop(best)))
        for s in ideal[-1]:
            label_gain[s] *= 1.0 - a
    idcg = _alpha_dcg(ideal, a, k)
    return dcg / idcg if idcg > 0 else float("nan")


def subtopic_recall(
    ranked_ids: Sequence[Any], subtopics: Mapping[Any, Any], k: int | None = None, n_subtopics: int | None = None
) -> float:
    """S-recall@k (Zhai et al. 2003): |union of subtopics covered by the top k| / |subtopics|.

    ``n_subtopics`` defaults to the number of distinct labels in ``subtopics``; NaN if zero.
    ir_measures' ``StRecall@k`` (its pyndeval provider) computes it where installed; divopt's own
    line below serves the core install and a given ``n_subtopics`` (which ndeval has no option for).
    """
    k = len(ranked_ids) if k is None else int(k)
    sets = _subtopic_sets(subtopics)
    if n_subtopics is None and any(sets.values()):
        import ir_measures

        value = _ndeval(ir_measures.StRecall, ranked_ids, sets, k)
        if value is not None:
            return value
    covered = set().union(*(sets.get(str(d), frozenset()) for d in list(ranked_ids)[:k])) if k else set()
    total = len(set().union(*sets.values())) if n_subtopics is None else int(n_subtopics)
    return len(covered) / total if total > 0 else float("nan")


# --------------------------------------------------------------------------------------------
# Objectives of the baselines
# --------------------------------------------------------------------------------------------
def vrsd_score(E: Any, q: Any, indices: Any) -> float:
    """VRSD's sum-vector similarity: cos(sum_{i in S} e_i, q)."""
    R = _rows(E, indices)
    qv = check_vector(q, "q", R.shape[1], " (the embedding dimension d)").double().to(R.device)
    v = R.sum(0)
    nv, nq = float(v.norm()), float(qv.norm())
    if nv == 0.0 or nq == 0.0:
        return float("nan")
    return float(v @ qv) / (nv * nq)


def dartboard_score(E: Any, q: Any, indices: Any, sigma: float = 0.1) -> float:
    """Dartboard's relevant information gain (Pickett et al. 2024), in log space.

    With distance D(a, b) = (1 - cos(a, b)) / 2 and the Gaussian log-density
    log N(D, sigma) = -D^2 / (2 sigma^2) - log(sigma sqrt(2 pi)), the query places its "dart" on
    pool item t with probability P(t | q) proportional to N(D(q, t), sigma) (normalized over the
    whole pool E), and the score of a set S is
        log sum_t P(t | q) max_{g in S} N(D(t, g), sigma).
    Costs one pass over E per selected item (O(n k d)); no n x n matrix.
    """
    s = check_nonnegative(sigma, "sigma", allow_zero=False)
    Et = E if isinstance(E, torch.Tensor) else check_embeddings(E, "E")
    R = _rows(Et, indices)
    qv = check_vector(q, "q", R.shape[1], " (the embedding dimension d)")
    const = -math.log(s * math.sqrt(2 * math.pi))

    def lognorm(cos: torch.Tensor) -> torch.Tensor:
        dist = (1.0 - cos) / 2.0
        return -(dist * dist) / (2 * s * s) + const

    logp = lognorm(matvec(Et, qv.to(Et.device)).double())
    logp = logp - torch.logsumexp(logp, 0)
    best = torch.stack([lognorm(matvec(Et, r.to(device=Et.device)).double()) for r in R]).amax(0)
    return float(torch.logsumexp(logp + best, 0))


# --------------------------------------------------------------------------------------------
# Consistency between selections
# --------------------------------------------------------------------------------------------
def jaccard(a: Iterable[Any], b: Iterable[Any]) -> float:
    """|A intersect B| / |A union B| of two selections (ids or indices); 1.0 for two empty sets."""
    A = {x.item() if hasattr(x, "item") else x for x in a}
    B = {x.item() if hasattr(x, "item") else x for x in b}
    union = A | B
    return len(A & B) / len(union) if union else 1.0


def consistency(a: Any, b: Any, keys: Sequence[str] = ("query_id", "theta", "method"),
                column: str | None = None):
    """Jaccard between the selections of two result tables (two embedding models, two runs, ...).

    ``a`` and ``b`` are pandas frames with one row per ``keys`` and a column of selected passage
    ids (``selected``, as every divopt result table names it; ``column`` for another). Returns a frame
    with ``keys`` and ``jaccard`` for the rows present in both (inner join).
    """
    import pandas as pd

    def col(df):
        if column is not None:
            return column
        if "selected" in df.columns:
            return "selected"
        raise ValueError(f"no column 'selected' (the selected passage ids) in {sorted(df.columns)}")

    keys = list(keys)
    for name, df in (("a", a), ("b", b)):
        missing = [k for k in keys if k not in df.columns]
        if missing:
            raise ValueError(f"table {name} lacks key column(s) {missing}")
        if df.duplicated(keys).any():
            raise ValueError(f"table {name} has several rows per {keys}: aggregate or add keys first")
    m = pd.merge(a[keys + [col(a)]].rename(columns={col(a): "_a"}), b[keys + [col(b)]].rename(columns={col(b): "_b"}),
                 on=keys, how="inner")
    m["jaccard"] = [jaccard(list(x), list(y)) for x, y in zip(m["_a"], m["_b"])]
    return m.drop(columns=["_a", "_b"])


# --------------------------------------------------------------------------------------------
# VRSD's win rates (Gao & Zhang, arXiv 2407.04573, Eq. 8-9)
# --------------------------------------------------------------------------------------------
def vrsd_win(E: Any, q: Any, a: Any, b: Any) -> dict[str, float]:
    """VRSD's per-query comparison of two selections A and B of rows of E (one query q).

    similarity(S) = cos(sum_{i in S} e_i, q) (VRSD's objective, :func:`vrsd_score`);
    diversity(S) = ILAD(S) = mean over pairs of 1 - cos(e_i, e_j) (:func:`ilad`; NaN if |S| < 2).
    A wins on a measure when its value is larger by more than :data:`WIN_TOL` of the scale (the
    authors' evaluation counts ``VRSD - MMR > 0``); values closer than that are a tie, not a win
    (the same set in another order sums its vectors in another order). Returns the four values and
    ``similarity_win`` / ``diversity_win`` / ``similarity_tie`` / ``diversity_tie`` in {0.0, 1.0}
    (NaN when a value is undefined).
    """
    sa, sb = vrsd_score(E, q, a), vrsd_score(E, q, b)
    da, db = ilad(E, a), ilad(E, b)
    return {"similarity_a": sa, "similarity_b": sb, "diversity_a": da, "diversity_b": db,
            **_wins("similarity", sa, sb), **_wins("diversity", da, db)}


#: Two measures closer than WIN_TOL x max(1, |x|, |y|) are a tie in VRSD's win rates: the same set
#: in another order differs by float rounding (about 1e-16), never a win.
WIN_TOL = 1e-12


def _ties(x: Any, y: Any) -> Any:
    """|x - y| <= WIN_TOL x max(1, |x|, |y|), elementwise (floats or pandas Series)."""
    scale = np.maximum(1.0, np.maximum(np.abs(x), np.abs(y)))
    return np.abs(x - y) <= WIN_TOL * scale


def _wins(name: str, x: float, y: float) -> dict[str, float]:
    if math.isnan(x) or math.isnan(y):
        return {f"{name}_win": float("nan"), f"{name}_tie": float("nan")}
    tie = bool(_ties(x, y))
    return {f"{name}_win": float(x > y and not tie), f"{name}_tie": float(tie)}


def win_rates(table: Any, a: str, b: str, *, by: Sequence[str] = (), query_key: str = "query_id",
              method_column: str = "method", similarity: str = "vrsd", diversity: str = "ilad",
              per_query: bool = False):
    """VRSD's similarity and diversity win rates of method ``a`` over method ``b``, from a tidy table.

    ``table`` has one row per (``query_key``, ``method_column``, ``by``...) with the per-query
    measures in columns ``similarity`` (default "vrsd": cos(sum of the selected e_i, q), as
    :func:`selection_metrics` writes it) and ``diversity`` (default "ilad"). For each group of
    ``by`` (e.g. ("dataset", "theta")) and each query present for both methods::

        similarity win rate = (1/|Q|) sum_q 1[sim_a(q) > sim_b(q)]      (Eq. 8)
        diversity win rate  = (1/|Q|) sum_q 1[div_a(q) > div_b(q)]      (Eq. 9)

    over the queries Q where both values are defined. Values within :data:`WIN_TOL` of the scale
    (max(1, |x|, |y|)) of each other are a tie, not a win (VRSD and MMR picking the same set in
    another order differ by about 2e-16); the tie rates are reported beside. Returns a frame with ``by``, ``a``, ``b``, ``n_queries``,
    ``similarity_win_rate``, ``diversity_win_rate``, ``similarity_tie_rate``,
    ``diversity_tie_rate``; ``per_query=True`` returns the per-query rows (``by``, query, the
    four values, the win and tie indicators) instead.

    Source: VRSD (arXiv:2407.04573v3), App. E.2, Eqs. 8-9: the share of queries with
    Similarity_VRSD > Similarity_baseline, and with Diversity_VRSD < Diversity_baseline, where
    Diversity is Eq. 7's mean pairwise cosine; ``diversity`` here is a higher-is-more-diverse
    measure (ILAD = 1 - that cosine), so Eq. 9's "<" is this ">". The paper does not say how it
    counts equal values; divopt counts them as ties.
    """
    import pandas as pd

    by = list(by)
    keys = by + [query_key]
    need = keys + [method_column, similarity, diversity]
    missing = [c for c in need if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks column(s) {missing}; it needs {need}")
    parts = {}
    for name, m in (("a", a), ("b", b)):
        sub = table[table[method_column] == m]
        if sub.empty:
            raise ValueError(f"method {m!r} (argument {name}) has no row in column {method_column!r}")
        if sub.duplicated(keys).any():
            raise ValueError(f"method {m!r} has several rows per {keys}: aggregate or add keys to `by` first")
        parts[name] = sub[keys + [similarity, diversity]].rename(
            columns={similarity: f"similarity_{name}", diversity: f"diversity_{name}"})
    m = pd.merge(parts["a"], parts["b"], on=keys, how="inner")
    for meas in ("similarity", "diversity"):
        x, y = m[f"{meas}_a"].astype(float), m[f"{meas}_b"].astype(float)
        defined = x.notna() & y.notna()
        tie = _ties(x, y)
        m[f"{meas}_win"] = ((x > y) & ~tie).astype(float).where(defined)
        m[f"{meas}_tie"] = tie.astype(float).where(defined)
    if per_query:
        return m
    agg = (m.groupby(by, dropna=False) if by else m.assign(_all=0).groupby("_all"))
    out = agg.agg(n_queries=(query_key, "size"),
                  similarity_win_rate=("similarity_win", "mean"), diversity_win_rate=("diversity_win", "mean"),
                  similarity_tie_rate=("similarity_tie", "mean"), diversity_tie_rate=("diversity_tie", "mean"))
    out = out.reset_index(drop=not by)
    out.insert(len(by), "a", a)
    out.insert(len(by) + 1, "b", b)
    return out


# --------------------------------------------------------------------------------------------
# Everything that applies, as one row
# --------------------------------------------------------------------------------------------
def selection_metrics(
    inst: Instance,
    indices: Any,
    *,
    qrels: Mapping[Any, Any] | None = None,
    subtopics: Mapping[Any, Any] | None = None,
    k: int | None = None,
    alpha: float = 0.5,
    sigma: float | None = None,
    ids: Sequence[Any] | None = None,
) -> dict[str, float]:
    """Every metric that applies to a selection of rows of ``inst``, as a flat dict.

    Always: ``objective`` (CCBQP f at inst.theta, inst.k), ``relevance_sum`` (sum of c_i), ``ilad``,
    ``ils``. With a query vector: ``vrsd``, and ``dartboard`` when ``sigma`` is given (it costs
    O(n k d)). With qrels: ``recall``, ``ndcg`` (at k). With subtopics: ``alpha_ndcg``,
    ``s_recall``. Passage ids come from ``ids``, else ``inst.ids``, else the row indices.
    """
    idx = check_indices(indices, inst.n)
    if idx.size == 0:
        # An empty selection is a legitimate outcome (e.g. the sparsity model choosing nothing):
        # it retrieves nothing relevant (IR metrics 0) and has no pairs (ILAD/ILS undefined).
        out0: dict[str, float] = {"objective": 0.0, "relevance_sum": 0.0, "ilad": float("nan"), "ils": float("nan")}
        if inst.q is not None:
            out0["vrsd"] = float("nan")
        if qrels is not None:
            has_rel = any(float(g) > 0 for g in dict(qrels).values())
            out0["recall"] = out0["ndcg"] = 0.0 if has_rel else float("nan")
        if subtopics is not None:
            out0["alpha_ndcg"] = out0["s_recall"] = 0.0
        return out0
    k = idx.size if k is None else int(k)
    out: dict[str, float] = {
        "objective": ccbqp_objective(inst, idx, any_size=True),
        "relevance_sum": float(inst.relevance.double()[torch.as_tensor(idx, device=inst.device)].sum()),
        "ilad": ilad(inst.E, idx),
        "ils": ils(inst.E, idx),
    }
    if inst.q is not None:
        out["vrsd"] = vrsd_score(inst.E, inst.q, idx)
        if sigma is not None:
            out["dartboard"] = dartboard_score(inst.E, inst.q, idx, sigma)
    if qrels is not None or subtopics is not None:
        if ids is None:
            ids = inst.ids if inst.ids is not None else np.arange(inst.n)
        ranked = [np.asarray(ids)[i].item() for i in idx]
        out.update(_ranking_metrics(ranked, qrels, subtopics, k, alpha))
    return out


def _ranking_metrics(ranked: Sequence[Any], qrels: Mapping[Any, Any] | None, subtopics: Mapping[Any, Any] | None,
                     k: int, alpha: float) -> dict[str, float]:
    """The ranking metrics of :data:`CUTOFF_METRICS` that the labels allow, at cutoff k."""
    out: dict[str, float] = {}
    if qrels is not None:
        sc = ir_scores({_QID: ranked}, {_QID: qrels}, k, ("R", "nDCG"))[_QID]
        out["recall"] = sc[f"R@{k}"]
        out["ndcg"] = sc[f"nDCG@{k}"]
    if subtopics is not None:
        out["alpha_ndcg"] = alpha_ndcg(ranked, subtopics, k, alpha)
        out["s_recall"] = subtopic_recall(ranked, subtopics, k)
    return out


#: Measures of the whole selected set, whatever its size (the method may choose it): named for
#: what they measure, with no cutoff. ``set_recall`` = recall of the set (R@|S|),
#: ``set_precision`` = |relevant in S| / |S|, ``set_s_recall`` = subtopics the set covers.
SET_METRICS = ("set_size", "set_recall", "set_precision", "set_s_recall")


def row_metrics(
    inst: Instance,
    indices: Any,
    *,
    cutoffs: Sequence[int] = (),
    qrels: Mapping[Any, Any] | None = None,
    subtopics: Mapping[Any, Any] | None = None,
    alpha: float = 0.5,
    sigma: float | None = None,
) -> dict[str, float]:
    """The metric columns of one result row, under their table names.

    * the measures of the set with no cutoff (:func:`selection_metrics`: ``relevance_sum``,
      ``ilad``, ``ils``, ``vrsd``, ``dartboard``; ILAD and ILS are NaN, undefined, for |S| < 2);
    * every ranking metric of :data:`CUTOFF_METRICS` at every cutoff c of ``cutoffs``, named
      ``<metric>@<c>``, over the selection in its order (the first c items; a set of fewer than c
      items is a shorter ranking, as ir-measures reads a short run);
    * the set-level measures :data:`SET_METRICS` (``set_size`` always; the others as the labels
      allow), which a method that chooses its own set size is judged by.

    The CCBQP objective is not among them (it is the method's column, defined only where |S| = k).
    """
    idx = check_indices(indices, inst.n)
    base = selection_metrics(inst, idx, qrels=qrels, subtopics=subtopics, alpha=alpha, sigma=sigma)
    base.pop("objective", None)
    out: dict[str, float] = {m: v for m, v in base.items() if m not in CUTOFF_METRICS}
    ranked = [np.asarray(inst.ids if inst.ids is not None else np.arange(inst.n))[i].item() for i in idx]
    for c in cutoffs:
        c = check_scalar(c, "cutoff", int, min_val=1)
        if idx.size == 0:
            at = {m: v for m, v in base.items() if m in CUTOFF_METRICS}
        else:
            at = _ranking_metrics(ranked, qrels, subtopics, c, alpha)
        out.update({f"{m}@{c}": v for m, v in at.items()})
    out["set_size"] = int(idx.size)
    if qrels is not None:
        out["set_recall"] = base["recall"]  # the whole set: R@|S| (0 for an empty set)
        out["set_precision"] = (ir_scores({_QID: ranked}, {_QID: qrels}, idx.size, ("P",))[_QID][f"P@{idx.size}"]
                                if idx.size else float("nan"))
    if subtopics is not None:
        out["set_s_recall"] = base["s_recall"]
    return out
