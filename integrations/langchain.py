"""LangChain adapters: a retriever over any vector store, and a drop-in for LangChain's MMR.

Needs ``langchain-core`` (``pip install "divopt-rag[langchain]"``).

Retriever
---------
``DivoptRetriever(vectorstore=store, embedding=..., k=4, fetch_k=20, method="fw_ms", theta=0.5)``
fetches the ``fetch_k`` nearest documents of the query, gets their vectors, and returns the
``k`` documents that ``method`` picks, in selection order (``order="relevance"`` lists the
chosen set by decreasing similarity instead: set methods such as ``fw`` have no pick order). Each returned document is a copy
whose metadata carries ``score`` (cosine similarity to the query) and ``divopt_rank``,
``divopt_method``, ``divopt_theta``, ``divopt_objective`` (CCBQP objective of the set).

Where the candidates' vectors come from (``vectors=``):

* ``"store"``: read from the store. Built in for :class:`~langchain_core.vectorstores.InMemoryVectorStore`
  (its ``store`` dict keeps every vector by document id). LangChain's ``VectorStore``
  interface has no method that returns vectors, so for other stores subclass and override
  :meth:`DivoptRetriever.candidate_vectors` (e.g. FAISS ``index.reconstruct``, Chroma
  ``collection.get(ids, include=["embeddings"])``).
* ``"reembed"``: embed the fetched texts again with the query's embedding model
  (``embed_documents``); works with every store, costs ``fetch_k`` document embeddings per
  query, and equals the stored vectors when the model is deterministic.
* ``"auto"`` (default): ``"store"`` when the store exposes vectors, else ``"reembed"``.

Candidates are fetched with ``similarity_search_by_vector`` (part of the ``VectorStore``
interface; ``search_kwargs`` such as ``filter`` are passed on), falling back to
``similarity_search`` for stores that do not implement it. Precomputed candidates (documents
with their vectors, no store) are given as ``documents=`` and ``document_embeddings=``; the
``fetch_k`` most similar of them are the candidates.

Drop-in MMR
-----------
:func:`maximal_marginal_relevance` has the signature of
``langchain_core.vectorstores.utils.maximal_marginal_relevance`` and returns the same indices;
its ``method=`` keyword runs any divopt method instead.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore
from pydantic import ConfigDict, Field, model_validator

from divopt_rag.models.validation import check_theta
from divopt_rag.solvers import DEFAULT_METHOD

from .candidates import Picks, check_method_params, select_candidates

__all__ = ["DivoptRetriever", "maximal_marginal_relevance", "select_documents"]


def maximal_marginal_relevance(
    query_embedding: Any,
    embedding_list: Any,
    lambda_mult: float = 0.5,
    k: int = 4,
    *,
    method: str = "mmr",
    **params: Any,
) -> list[int]:
    """Indices of ``k`` embeddings chosen for the query, in selection order.

    Same signature and result as LangChain's ``maximal_marginal_relevance`` (swap the import);
    ``method=`` runs any divopt method instead of MMR, ``**params`` are that method's parameters.
    ``lambda_mult`` is divopt's ``theta`` (1 = pure relevance). Vectors need not be unit norm
    (cosine similarity is used, as in LangChain); a zero vector is refused with a clear error
    where LangChain would score it 0.

    MMR (Carbonell & Goldstein 1998): first the most similar item, then repeatedly
    ``argmax_i lambda_mult * cos(q, e_i) - (1 - lambda_mult) * max_{j in S} cos(e_i, e_j)``.
    """
    return select_candidates(query_embedding, embedding_list, k, lambda_mult, method, **params).indices.tolist()


def select_documents(
    query_embedding: Any,
    documents: list[Document],
    embeddings: Any,
    k: int = 4,
    theta: float = 0.5,
    method: str = DEFAULT_METHOD,
    order: Literal["selection", "relevance"] = "selection",
    **params: Any,
) -> list[Document]:
    """The ``k`` of ``documents`` (row i of ``embeddings`` is document i's vector) chosen by
    ``method``, in ``order``, as copies with scores in their metadata (see module doc)."""
    if len(documents) != len(embeddings):
        raise ValueError(
            f"embeddings must have one row per document: {len(documents)} documents, got {len(embeddings)} rows"
        )
    return _annotate(documents, select_candidates(query_embedding, embeddings, k, theta, method, order, **params))


def _annotate(documents: list[Document], picks: Picks) -> list[Document]:
    out = []
    for rank, i in enumerate(picks.indices.tolist()):
        doc = documents[i]
        meta = {
            **doc.metadata,
            "score": float(picks.relevance[i]),
            "divopt_rank": rank,
            "divopt_method": picks.method,
            "divopt_theta": picks.theta,
            "divopt_objective": float(picks.objective),
        }
        # a copy: the store's own documents stay untouched
        out.append(Document(id=doc.id, page_content=doc.page_content, metadata=meta))
    return out


class DivoptRetriever(BaseRetriever):
    """Retrieve ``fetch_k`` candidates, return the ``k`` that a divopt method selects.

    Attributes
    ----------
    vectorstore : any LangChain ``VectorStore`` (or give ``documents`` + ``document_embeddings``).
    documents, document_embeddings : precomputed candidates and their (n, d) vectors.
    embedding : the model that embeds the query (default: ``vectorstore.embeddings``).
    k : documents returned; fewer when fewer candidates exist.
    fetch_k : candidates fetched per query (>= k).
    method : any name in :data:`divopt_rag.solvers.METHODS` (default ``DEFAULT_METHOD``).
    theta : relevance-diversity trade-off in [0, 1] (LangChain's ``lambda_mult``; 1 = relevance).
    method_params : the method's own parameters (checked when the retriever is built).
    search_kwargs : passed to the store's search (e.g. ``filter``).
    vectors : ``"auto"``, ``"store"`` or ``"reembed"``: where candidate vectors come from.
    order : ``"selection"`` (as the method picks them) or ``"relevance"`` (decreasing cosine).

    Example
    -------
    >>> retriever = DivoptRetriever(vectorstore=store, k=5, fetch_k=50, theta=0.7)  # doctest: +SKIP
    >>> docs = retriever.invoke("what causes tides?")  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    vectorstore: VectorStore | None = None
    documents: list[Document] | None = None
    document_embeddings: Any = None
    embedding: Embeddings | None = None
    k: int = Field(4, ge=1)
    fetch_k: int = Field(20, ge=1)
    method: str = DEFAULT_METHOD
    theta: float = 0.5
    method_params: dict[str, Any] = Field(default_factory=dict)
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    vectors: Literal["auto", "store", "reembed"] = "auto"
    order: Literal["selection", "relevance"] = "selection"

    @model_validator(mode="after")
    def _check(self) -> DivoptRetriever:
        if (self.vectorstore is None) == (self.documents is None):
            raise ValueError("give exactly one of vectorstore= or documents= (with document_embeddings=)")
        if self.documents is not None:
            if self.document_embeddings is None:
                raise ValueError("documents= needs document_embeddings=, one vector per document")
            E = np.asarray(self.document_embeddings, dtype=np.float64)
            if E.ndim != 2 or E.shape[0] != len(self.documents):
                raise ValueError(
                    f"document_embeddings must have shape ({len(self.documents)}, d), got {E.shape}"
                )
            self.document_embeddings = E
        if self.fetch_k < self.k:
            raise ValueError(f"fetch_k must be >= k = {self.k}, got fetch_k = {self.fetch_k}")
        self.theta = check_theta(self.theta)
        try:
            check_method_params(self.method, self.method_params)
        except TypeError as exc:  # pydantic reports ValueErrors as a ValidationError naming the model
            raise ValueError(str(exc)) from None
        if self.vectors == "store" and self.vectorstore is not None and not self._store_has_vectors():
            raise ValueError(
                f"vectors='store': {type(self.vectorstore).__name__} does not expose its vectors; "
                "use vectors='reembed' or override DivoptRetriever.candidate_vectors"
            )
        if self._query_model() is None:
            raise ValueError("no model to embed the query: pass embedding= or a vectorstore whose .embeddings is set")
        return self

    # --- where vectors come from (override for stores that expose them) ------------------------
    def _query_model(self) -> Embeddings | None:
        if self.embedding is not None:
            return self.embedding
        return None if self.vectorstore is None else self.vectorstore.embeddings

    def _store_has_vectors(self) -> bool:
        return isinstance(self.vectorstore, InMemoryVectorStore)

    def candidate_vectors(self, docs: list[Document]) -> np.ndarray:
        """The (len(docs), d) vectors of fetched documents (see module doc for the choice)."""
        use_store = self.vectors == "store" or (self.vectors == "auto" and self._store_has_vectors())
        if use_store and isinstance(self.vectorstore, InMemoryVectorStore):
            records = self.vectorstore.store
            missing = [d.id for d in docs if d.id not in records]
            if missing:
                raise KeyError(f"documents {missing[:3]} returned by the store have no stored vector")
            return np.asarray([records[d.id]["vector"] for d in docs], dtype=np.float64)
        if not docs:
            return np.zeros((0, 0))
        return np.asarray(self._query_model().embed_documents([d.page_content for d in docs]), dtype=np.float64)

    def fetch_candidates(self, query: str, query_vector: list[float]) -> tuple[list[Document], np.ndarray]:
        """The ``fetch_k`` candidates of a query and their vectors."""
        if self.documents is not None:
            E = self.document_embeddings
            q = np.asarray(query_vector, dtype=np.float64)
            cos = (E @ q) / (np.linalg.norm(E, axis=1) * np.linalg.norm(q))
            top = np.argsort(-cos, kind="stable")[: self.fetch_k]
            return [self.documents[i] for i in top], E[top]
        try:
            docs = self.vectorstore.similarity_search_by_vector(query_vector, k=self.fetch_k, **self.search_kwargs)
        except NotImplementedError:
            docs = self.vectorstore.similarity_search(query, k=self.fetch_k, **self.search_kwargs)
        return docs, self.candidate_vectors(docs)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        q = self._query_model().embed_query(query)
        docs, E = self.fetch_candidates(query, q)
        return _annotate(
            docs, select_candidates(q, E, self.k, self.theta, self.method, self.order, **self.method_params)
        )
