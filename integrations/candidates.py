"""The one step every RAG adapter shares: choose k of a query's fetched candidates.

A retriever (LangChain, LlamaIndex, a hand-written one) fetches ``fetch_k`` candidates and
their embedding vectors ``E`` (one row each) for a query vector ``q``. This module turns them
into a divopt problem and runs any fast selector on it:

    rows and query rescaled to unit norm, relevance c = E q (cosine similarity),
    maximize  f(x) = theta (k-1) c^T x + (1-theta)(k - ||E^T x||^2)  over  sum(x) = k

(the CCBQP objective, :func:`divopt_rag.models.ccbqp_objective`; each method optimizes or
approximates it in its own way, see :data:`divopt_rag.solvers.METHODS`). ``theta`` is LangChain's
``lambda_mult``: 1 is pure relevance, 0 pure diversity.

Vectors are normalized here, whatever the store's metric, so inner-product, cosine and L2
stores give the same picks for the same vectors.

Importing this module (and the adapters) imports neither torch nor divopt's solvers: they load
when an adapter is built (its method and parameters are checked against the registry of
:mod:`divopt_rag.solvers`) or first selects, so an application that imports an adapter starts
without paying for torch.
"""
from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = ["Picks", "select_candidates", "check_method_params", "check_argument_names", "check_trade_off", "pick_metadata",
           "user_stacklevel", "trade_off_hints", "TRADE_OFF_ALIASES", "ORDERS",
           "METADATA_KEYS"]

#: How chosen items are listed: as the method returns them, or by decreasing relevance.
ORDERS = ("selection", "relevance")


@dataclass(frozen=True)
class Picks:
    """The chosen candidates of one query.

    Attributes
    ----------
    indices : int64 array, rows of the candidate matrix in the requested order: "selection"
        is the order :func:`divopt_rag.solvers.select` returns (greedy methods: pick order; set
        methods such as ``fw``: the solver's order, which carries no meaning), "relevance"
        sorts the chosen set by decreasing cosine to the query (ties: selection order).
    relevance : float64 array (n,), cosine similarity of every candidate to the query.
    objective : CCBQP objective f of the chosen set (NaN when nothing was chosen).
    method : the method that chose them.
    theta : the trade-off it used.
    """

    indices: np.ndarray
    relevance: np.ndarray
    objective: float
    method: str
    theta: float


#: The keys every adapter adds to a returned item's metadata (never a key the user may own, such
#: as ``score``): cosine to the query, position in the returned list, what chose it, and the
#: CCBQP objective of the whole chosen set.
METADATA_KEYS = ("divopt_score", "divopt_rank", "divopt_method", "divopt_theta", "divopt_objective")


def pick_metadata(picks: Picks, rank: int, row: int) -> dict[str, Any]:
    """divopt's metadata for candidate ``row`` returned at position ``rank`` (keys: ``METADATA_KEYS``)."""
    return {
        "divopt_score": float(picks.relevance[row]),
        "divopt_rank": rank,
        "divopt_method": picks.method,
        "divopt_theta": picks.theta,
        "divopt_objective": float(picks.objective),
    }


#: Each stack's own name for ``theta`` (each, like ``theta``, 1 = pure relevance in its own MMR):
#: LangChain's ``max_marginal_relevance_search(lambda_mult=)``, LlamaIndex's MMR query mode
#: (``vector_store_kwargs={"mmr_threshold": ...}``), Haystack's diversity ranker
#: (``lambda_threshold``). The one aliasing rule (docs/howto/integrations.md): an adapter accepts its
#: own stack's name with the meaning that stack's own MMR gives it, and refuses the other stacks'
#: names with a hint naming ``theta``.
TRADE_OFF_ALIASES = {"langchain": "lambda_mult", "llamaindex": "mmr_threshold", "haystack": "lambda_threshold"}
_STACK_NAMES = {"langchain": "LangChain", "llamaindex": "LlamaIndex", "haystack": "Haystack"}


def trade_off_hints(stack: str) -> dict[str, str]:
    """The hints an adapter of ``stack`` gives for the other stacks' names of ``theta``."""
    own = f"{_STACK_NAMES[stack]}'s {TRADE_OFF_ALIASES[stack]}="
    return {name: f"that is {_STACK_NAMES[other]}'s name; write theta= (or {own}): the same number, 1 = pure relevance"
            for other, name in TRADE_OFF_ALIASES.items() if other != stack}


#: modules whose frames a warning skips to point at the user's line (the stacks and divopt's adapters)
_FRAMEWORKS = ("pydantic", "langchain_core", "llama_index", "haystack", "divopt_rag.integrations",
               "haystack_integrations.components.rankers.divopt")


def user_stacklevel() -> int:
    """The ``stacklevel`` for a warning raised by the caller of this function that names the first
    line outside the RAG stacks and these adapters (the user's), however deep their validators run."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (frame.f_globals.get("__name__") or "").startswith(_FRAMEWORKS):
        frame, level = frame.f_back, level + 1
    return level


def check_argument_names(
    given: Iterable[str], accepted: Iterable[str], owner: str, hints: Mapping[str, str] | None = None
) -> None:
    """Refuse an argument name that ``owner`` does not take, with a hint, instead of ignoring it.

    ``hints`` maps names users bring from other libraries (``top_k``, ``lambda_mult``) to what to
    write instead; other unknown names get the closest accepted name, if one is close.
    """
    accepted = list(accepted)
    for name in given:
        if name in accepted:
            continue
        hint = (hints or {}).get(name)
        if hint is None:
            close = difflib.get_close_matches(name, accepted, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"accepted: {', '.join(sorted(accepted))}"
        raise ValueError(f"{owner} got an unknown argument {name!r}; {hint}")


def check_method_params(method: str | None, params: Mapping[str, Any]) -> str:
    """``method`` must name a fast selector and ``params`` fit its declaration: the validator
    :func:`~divopt_rag.solvers.select` runs (:data:`~divopt_rag.solvers.selection.METHOD_PARAMS`),
    called when an adapter is built, so a typo or a bad value fails at construction, not at the
    first query, with the same one-line message. Returns the method's name (None:
    :data:`~divopt_rag.solvers.DEFAULT_METHOD`)."""
    from divopt_rag.models.validation import check_choice  # torch and the registry: when an adapter is built
    from divopt_rag.solvers import DEFAULT_METHOD, METHODS
    from divopt_rag.solvers.selection import parameters

    method = DEFAULT_METHOD if method is None else method
    check_choice(method, "method", METHODS)
    parameters(method).validate(params)
    return method


def check_trade_off(theta: Any) -> float:
    """``theta`` in [0, 1] (the validator every entry point runs), as a float."""
    from divopt_rag.models.validation import check_theta

    return check_theta(theta)


def select_candidates(
    query_embedding: Any,
    embeddings: Any,
    k: int,
    theta: float,
    method: str | None = None,
    order: Literal["selection", "relevance"] = "selection",
    **params: Any,
) -> Picks:
    """Choose ``min(k, n)`` of the n candidate rows of ``embeddings`` for ``query_embedding``.

    Parameters
    ----------
    query_embedding : (d,) or (1, d) array-like, any nonzero norm.
    embeddings : (n, d) array-like, one candidate per row, any nonzero norms; n may be 0.
    k : number to choose (fewer when there are fewer candidates, as in LangChain).
    theta : relevance-diversity trade-off in [0, 1], 1 = pure relevance.
    method : any name in :data:`divopt_rag.solvers.METHODS` (None, the default:
        :data:`~divopt_rag.solvers.DEFAULT_METHOD`).
    order : "selection" (as ``select`` returns them) or "relevance" (decreasing cosine).
    **params : the method's own parameters, passed to :func:`divopt_rag.solvers.select`.

    Raises
    ------
    ValueError / TypeError naming the argument: a zero or non-finite vector, a dimension
    mismatch, ``theta`` outside [0, 1], an unknown method or parameter.
    """
    from divopt_rag.models import Instance
    from divopt_rag.models.validation import check_choice, check_scalar
    from divopt_rag.solvers import select

    theta = check_trade_off(theta)
    check_choice(order, "order", ORDERS)
    method = check_method_params(method, params)
    k = check_scalar(k, "k", int)
    q = np.asarray(query_embedding, dtype=np.float64)
    if q.ndim == 2 and q.shape[0] == 1:  # LangChain passes (1, d) as well as (d,)
        q = q[0]
    E = np.asarray(embeddings, dtype=np.float64)
    if E.size == 0 and E.ndim <= 2:
        E = E.reshape(0, q.shape[-1] if q.ndim else 0)
    if E.ndim != 2:
        raise ValueError(f"embeddings must be 2-D of shape (n, d), got shape {E.shape}")
    n = E.shape[0]
    if n == 0 or k <= 0:
        return Picks(np.zeros(0, dtype=np.int64), np.zeros(n), float("nan"), method, theta)
    inst = Instance(E, q, k=min(int(k), n), theta=theta, normalize=True)
    sel = select(inst, method, **params)
    c = inst.relevance.cpu().numpy().astype(np.float64)
    idx = sel.indices
    if order == "relevance":
        idx = idx[np.argsort(-c[idx], kind="stable")]
    return Picks(idx, c, sel.objective, method, theta)
