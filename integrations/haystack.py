"""Haystack 2 adapter: a ranker component that keeps the ``top_k`` documents a divopt method picks.

Needs ``haystack-ai`` (``pip install "divopt-rag[haystack]"``).

``DivoptRanker`` takes the place of Haystack's ``SentenceTransformersDiversityRanker`` in a
pipeline (after a retriever that fetches more documents than you keep)::

    from haystack import Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from divopt_rag.integrations.haystack import DivoptRanker

    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=50))
    pipe.add_component("ranker", DivoptRanker(model="sentence-transformers/all-MiniLM-L6-v2", top_k=5))
    pipe.connect("retriever.documents", "ranker.documents")
    pipe.run({"retriever": {"query": q}, "ranker": {"query": q}})["ranker"]["documents"]

With ``method="mmr"`` it returns exactly the documents, in the same order, that
``SentenceTransformersDiversityRanker(strategy="maximum_margin_relevance")`` returns for the
same model, documents and ``lambda_threshold`` (Haystack's name for ``theta``, accepted here
too): both embed the same text (``document_prefix``, ``meta_fields_to_embed`` joined by
``embedding_separator``, the content, ``document_suffix``), both drop duplicate ids keeping the
best-scored copy, and both run the published MMR on cosine similarity. Any other name in
:data:`divopt_rag.solvers.METHODS` runs that method instead (default ``DEFAULT_METHOD``).

Vectors (``embeddings=``): ``"auto"`` (default) uses the documents' own ``embedding`` when every
document carries one (an embedding retriever with ``return_embedding=True``) and the query's
``query_embedding`` when given, and embeds the rest with ``model``; ``"model"`` always embeds
with ``model`` (the diversity ranker's behaviour); ``"stored"`` requires the stored vectors.

Returned documents are copies in selection order (``order="relevance"``: by decreasing
cosine); their ``score`` is the retriever's, untouched, and their ``meta`` keeps every key of
the user's and adds ``divopt_score`` (cosine to the query), ``divopt_rank``, ``divopt_method``,
``divopt_theta`` and ``divopt_objective``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import numpy as np
from haystack import Document, component, default_from_dict, default_to_dict

from divopt_rag.models.validation import check_choice, check_scalar, check_theta
from divopt_rag.solvers import DEFAULT_METHOD

from .candidates import ORDERS, check_method_params, pick_metadata, select_candidates

__all__ = ["DivoptRanker"]

EMBEDDINGS = ("auto", "model", "stored")


def _theta(theta: float | None, lambda_threshold: float | None, default: float) -> float:
    if theta is not None and lambda_threshold is not None:
        raise ValueError("give theta or lambda_threshold, not both (lambda_threshold is Haystack's name for theta)")
    value = theta if theta is not None else lambda_threshold
    return check_theta(default if value is None else value)


def _deduplicate(documents: list[Document]) -> list[Document]:
    """One document per id, the best-scored copy, in the order ids first appear (as Haystack's rankers do)."""
    best: dict[str, Document] = {}
    for doc in documents:
        kept = best.get(doc.id)
        score = -math.inf if doc.score is None else doc.score
        if kept is None or score > (-math.inf if kept.score is None else kept.score):
            best[doc.id] = doc
    return list(best.values())


@component
class DivoptRanker:
    """Keep the ``top_k`` documents that a divopt method selects for the query.

    Parameters
    ----------
    model : local path or Hugging Face name of a sentence-transformers model, for documents and
        queries that come without vectors (loaded in ``warm_up``). Optional when vectors come in.
    top_k : documents returned (fewer when fewer come in).
    method : any name in :data:`~divopt_rag.solvers.METHODS` (default ``DEFAULT_METHOD``).
    theta : relevance-diversity trade-off in [0, 1], 1 = pure relevance (default 0.5).
    lambda_threshold : Haystack's name for ``theta``; give one of the two.
    method_params : the method's own parameters (checked here).
    order : ``"selection"`` (as the method picks them) or ``"relevance"`` (decreasing cosine).
    embeddings : ``"auto"``, ``"model"`` or ``"stored"``: where vectors come from (module doc).
    device : torch device string for the model (default: sentence-transformers' choice).
    query_prefix, query_suffix, document_prefix, document_suffix, meta_fields_to_embed,
    embedding_separator : the text that is embedded, as in Haystack's diversity ranker.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        top_k: int = 10,
        method: str = DEFAULT_METHOD,
        theta: float | None = None,
        lambda_threshold: float | None = None,
        method_params: dict[str, Any] | None = None,
        order: Literal["selection", "relevance"] = "selection",
        embeddings: Literal["auto", "model", "stored"] = "auto",
        device: str | None = None,
        query_prefix: str = "",
        query_suffix: str = "",
        document_prefix: str = "",
        document_suffix: str = "",
        meta_fields_to_embed: list[str] | None = None,
        embedding_separator: str = "\n",
    ) -> None:
        self.top_k = check_scalar(top_k, "top_k", int, min_val=1)
        self.theta = _theta(theta, lambda_threshold, 0.5)
        self.method_params = dict(method_params or {})
        check_method_params(method, self.method_params)
        self.method = method
        self.order = check_choice(order, "order", ORDERS)
        self.embeddings = check_choice(embeddings, "embeddings", EMBEDDINGS)
        if embeddings == "model" and model is None:
            raise ValueError("embeddings='model' needs model=, the sentence-transformers model to embed with")
        self.model_name_or_path = model
        self.device = device
        self.query_prefix, self.query_suffix = query_prefix, query_suffix
        self.document_prefix, self.document_suffix = document_prefix, document_suffix
        self.meta_fields_to_embed = list(meta_fields_to_embed or [])
        self.embedding_separator = embedding_separator
        self.model: Any = None

    def warm_up(self) -> None:
        """Load the sentence-transformers model (once)."""
        if self.model is None and self.model_name_or_path is not None:
            from sentence_transformers import SentenceTransformer  # heavy: only when a model is used

            self.model = SentenceTransformer(self.model_name_or_path, device=self.device)

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self, model=self.model_name_or_path, top_k=self.top_k, method=self.method, theta=self.theta,
            method_params=self.method_params, order=self.order, embeddings=self.embeddings, device=self.device,
            query_prefix=self.query_prefix, query_suffix=self.query_suffix, document_prefix=self.document_prefix,
            document_suffix=self.document_suffix, meta_fields_to_embed=self.meta_fields_to_embed,
            embedding_separator=self.embedding_separator,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DivoptRanker:
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
        this call; ``query_embedding`` is the query's vector when the pipeline already has it.
        """
        top_k = self.top_k if top_k is None else check_scalar(top_k, "top_k", int, min_val=1)
        theta = _theta(theta, lambda_threshold, self.theta)
        documents = _deduplicate(documents)
        if not documents:
            return {"documents": []}
        E = self.document_vectors(documents)
        q = self.query_vector(query, query_embedding)
        picks = select_candidates(q, E, top_k, theta, self.method, self.order, **self.method_params)
        out = [
            dataclasses.replace(documents[i], meta={**documents[i].meta, **pick_metadata(picks, rank, i)})
            for rank, i in enumerate(picks.indices.tolist())
        ]
        return {"documents": out}
