"""LangChain adapters: a retriever over any vector store, and a drop-in for LangChain's MMR.

Needs ``langchain-core`` (``pip install "divopt-rag[langchain]"``).

Retriever
---------
``DivoptRetriever(vectorstore=store, k=4, fetch_k=20, method=DEFAULT_METHOD, theta=0.5)``
fetches the ``fetch_k`` nearest documents of the query, gets their vectors, and returns the
``k`` documents that ``method`` picks, in selection order (``order="relevance"`` lists the
chosen set by decreasing similarity instead: set methods such as ``fw`` have no pick order).
It is a LangChain ``BaseRetriever``: ``invoke``, ``ainvoke`` (native async), ``batch`` and
chains (``retriever | format_docs | prompt | llm``) work as with ``store.as_retriever()``.
Coming from ``store.as_retriever(search_type="mmr", search_kwargs={"k": 5, "fetch_k": 50,
"lambda_mult": 0.3})``: write ``DivoptRetriever(vectorstore=store, k=5, fetch_k=50,
lambda_mult=0.3, method="mmr")`` for the same documents, and change ``method`` for another
selector. ``lambda_mult`` is accepted as the name of ``theta`` (1 = pure relevance), with the
meaning the store's own MMR gives it (Qdrant's below).

Each returned document is a copy whose metadata keeps every key of the stored document and adds
divopt's own: ``divopt_score`` (cosine similarity to the query), ``divopt_rank``,
``divopt_method``, ``divopt_theta`` and ``divopt_objective`` (CCBQP objective of the set).

Where the candidates' vectors come from (``vectors=``):

* ``"store"``: read from the store by document id, through its public API, without
  re-embedding anything:

    * LangChain's ``InMemoryVectorStore``: its ``store`` records;
    * FAISS (``langchain_community.vectorstores.FAISS``, ``pip install "divopt-rag[faiss]"``):
      ``index.reconstruct_batch`` on the rows that ``index_to_docstore_id`` names;
    * Chroma (``langchain_chroma.Chroma`` or the older ``langchain_community`` one,
      ``pip install "divopt-rag[chroma]"``): ``get(ids=..., include=["embeddings"])``;
    * Qdrant (``langchain_qdrant.QdrantVectorStore``, its older ``Qdrant``, or
      ``langchain_community``'s, ``pip install "divopt-rag[qdrant]"``): the client's
      ``retrieve(collection_name, ids, with_vectors=...)`` on the point ids the search returns
      (``metadata["_id"]``).

  For other stores subclass and override :meth:`DivoptRetriever.stored_vectors` (the one hook:
  ``"auto"`` then reads through it).
* ``"reembed"``: embed the fetched texts again with the query's embedding model
  (``embed_documents``); works with every store, costs ``fetch_k`` document embeddings per
  query, and equals the stored vectors when the model is deterministic.
* ``"auto"`` (default): ``"store"`` for the stores above (or an overridden ``stored_vectors``),
  else ``"reembed"`` with a :class:`ReembeddingWarning`, once per retriever, that names the
  store, the cost (``fetch_k`` re-embeddings per query) and the hook ``stored_vectors``.
  ``vectors="reembed"`` says it is intended and warns nothing.

Candidates are fetched with ``similarity_search_by_vector`` (``asimilarity_search_by_vector``
when awaited; part of the ``VectorStore`` interface; ``search_kwargs`` such as ``filter`` are
passed on), falling back to ``similarity_search`` for stores that do not implement it. With
``method="mmr"`` the picks equal the store's own ``max_marginal_relevance_search`` with the same
``k``, ``fetch_k`` and ``lambda_mult`` (tested for InMemoryVectorStore, FAISS and Chroma), in the
store's order: langchain-chroma lists its MMR picks in the order its search returned them, so for
a Chroma store the default ``order="auto"`` is ``"fetch"`` (``"selection"`` keeps pick order).
Qdrant runs its own MMR on the server; ``method="mmr"`` picks what it picks, in its order, with
Qdrant's ``diversity = 1 - theta``. langchain-qdrant's ``QdrantVectorStore`` passes its
``lambda_mult`` to Qdrant *as that diversity* (0 = pure relevance: the reverse of LangChain's
meaning), so over such a store ``DivoptRetriever(lambda_mult=x)`` reads ``x`` as the store does,
``theta = 1 - x``, and picks what ``store.max_marginal_relevance_search(lambda_mult=x)`` picks; a
:class:`LambdaMultWarning` says so (write ``theta=`` to say it without one). This is the aliasing
rule of every adapter (docs/howto/integrations.md): a stack's own name for the trade-off means
what that stack's own MMR makes of it. Precomputed candidates (documents
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

import dataclasses
import warnings

import numpy as np

from divopt_rag.models.extras import require

require("langchain_core", "divopt_rag.integrations.langchain")  # one line naming the extra when missing
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from .candidates import (
    Picks,
    check_argument_names,
    check_method_params,
    check_trade_off,
    pick_metadata,
    select_candidates,
    trade_off_hints,
    user_stacklevel,
)

__all__ = ["DivoptRetriever", "ReembeddingWarning", "LambdaMultWarning", "maximal_marginal_relevance",
           "select_documents"]


class ReembeddingWarning(UserWarning):
    """A retriever embeds its candidates again on every query because it cannot read the store's vectors."""


class LambdaMultWarning(UserWarning):
    """``lambda_mult`` was read as the store's own MMR reads it, which is not LangChain's meaning."""


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
    method: str | None = None,
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
        # a copy whose metadata keeps every key of the user's and adds divopt's own (METADATA_KEYS)
        meta = {**doc.metadata, **pick_metadata(picks, rank, i)}
        out.append(Document(id=doc.id, page_content=doc.page_content, metadata=meta))
    return out


# --- reading stored vectors, per store (public APIs only) ---------------------------------------
# Matched by class name along the store's MRO, so subclasses work and no store package is imported
# here: a FAISS or Chroma store can only exist if its package is already loaded.
_STORE_KINDS = {
    "langchain_core.vectorstores.in_memory.InMemoryVectorStore": "in_memory",
    "langchain_community.vectorstores.faiss.FAISS": "faiss",
    "langchain_chroma.vectorstores.Chroma": "chroma",
    "langchain_community.vectorstores.chroma.Chroma": "chroma",
    "langchain_qdrant.qdrant.QdrantVectorStore": "qdrant",
    "langchain_qdrant.vectorstores.Qdrant": "qdrant",
    "langchain_community.vectorstores.qdrant.Qdrant": "qdrant",
}


def _store_kind(store: VectorStore | None) -> str | None:
    for cls in type(store).__mro__:
        kind = _STORE_KINDS.get(f"{cls.__module__}.{cls.__qualname__}")
        if kind is not None:
            return kind
    return None


#: Stores whose own ``max_marginal_relevance_search`` hands ``lambda_mult`` to the server as the
#: weight of diversity (Qdrant's ``Mmr(diversity=lambda_mult)``: 0 = pure relevance), the reverse of
#: LangChain's meaning. The older ``langchain_qdrant.Qdrant`` runs LangChain's MMR and is not here.
_INVERTED_LAMBDA_MULT = ("langchain_qdrant.qdrant.QdrantVectorStore",)


def _inverts_lambda_mult(store: Any) -> bool:
    return store is not None and any(f"{c.__module__}.{c.__qualname__}" in _INVERTED_LAMBDA_MULT
                                     for c in type(store).__mro__)


def _theta_of_lambda_mult(lambda_mult: Any, store: Any) -> float:
    """``theta`` for a ``lambda_mult`` with the meaning the store's own MMR gives it (the aliasing
    rule of docs/howto/integrations.md): ``theta = lambda_mult``, or ``1 - lambda_mult`` for a
    store that passes it on as diversity, said once in a :class:`LambdaMultWarning`."""
    value = check_trade_off(lambda_mult)
    if not _inverts_lambda_mult(store):
        return value
    theta = 1.0 - value
    warnings.warn(
        f"{type(store).__name__}.max_marginal_relevance_search passes lambda_mult to Qdrant as its diversity "
        f"(0 = pure relevance, the reverse of LangChain's lambda_mult), so DivoptRetriever reads "
        f"lambda_mult={value:g} as that store does: theta={theta:g} (1 = pure relevance), the documents the store's "
        f"own MMR returns; write theta={theta:g} to say so without this warning",
        LambdaMultWarning, stacklevel=user_stacklevel(),
    )
    return theta


def _ids(docs: list[Document], store: VectorStore) -> list[str]:
    missing = [i for i, d in enumerate(docs) if d.id is None]
    if missing:
        raise KeyError(
            f"{type(store).__name__} returned documents without an id (positions {missing[:3]}), so their stored "
            "vectors cannot be looked up; use vectors='reembed'"
        )
    return [d.id for d in docs]


def _in_memory_vectors(store: InMemoryVectorStore, ids: list[str]) -> list:
    records = store.store  # InMemoryVectorStore keeps {id: {"id", "vector", "text", "metadata"}}
    missing = [i for i in ids if i not in records]
    if missing:
        raise KeyError(f"documents {missing[:3]} returned by the store have no stored vector")
    return [records[i]["vector"] for i in ids]


def _chroma_vectors(store: VectorStore, ids: list[str]) -> list:
    # Chroma.get(ids=..., include=["embeddings"]) returns rows in its own order: match them by id
    got = store.get(ids=ids, include=["embeddings"])
    by_id = dict(zip(got["ids"], got["embeddings"]))
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise KeyError(f"documents {missing[:3]} returned by the store have no stored vector")
    return [by_id[i] for i in ids]


def _qdrant_vectors(store: Any, docs: list[Document]) -> list:
    """Qdrant's stored vectors of ``docs``: its search puts each point id in ``metadata["_id"]``;
    the client's ``retrieve`` returns the points with their vectors (the store's named vector)."""
    ids = [d.metadata.get("_id") for d in docs]
    missing = [i for i, p in enumerate(ids) if p is None]
    if missing:
        raise KeyError(f"{type(store).__name__} returned documents without metadata['_id'] (positions {missing[:3]}), "
                       "so their stored vectors cannot be looked up; use vectors='reembed'")
    name = getattr(store, "vector_name", None) or None  # "" / None: the collection's unnamed vector
    points = store.client.retrieve(store.collection_name, ids=ids, with_vectors=[name] if name else True,
                                   with_payload=False)
    by_id = {p.id: (p.vector[name] if name else p.vector) for p in points}
    lost = [i for i in ids if i not in by_id]
    if lost:
        raise KeyError(f"documents {lost[:3]} returned by the store have no stored vector")
    return [by_id[i] for i in ids]


class _FaissPositions:
    """Document id -> row of a FAISS store's index, from its public ``index_to_docstore_id``.

    The inverse map is built once per store and checked on every lookup (adds, deletes and
    merges renumber rows): a stale entry rebuilds it, so lookups cost O(fetch_k) per query.
    """

    def __init__(self) -> None:
        self.store_id: int | None = None
        self.rows: dict[str, int] = {}

    def __call__(self, store: Any, ids: list[str]) -> np.ndarray:
        mapping = store.index_to_docstore_id
        for attempt in (0, 1):
            if attempt or self.store_id != id(store):
                self.store_id, self.rows = id(store), {v: int(k) for k, v in mapping.items()}
            rows = [self.rows.get(i) for i in ids]
            if all(r is not None and mapping.get(r) == i for r, i in zip(rows, ids)):
                return np.asarray(rows, dtype=np.int64)
        missing = [i for r, i in zip(rows, ids) if r is None]
        raise KeyError(f"documents {missing[:3]} returned by the store have no row in its FAISS index")


class DivoptRetriever(BaseRetriever):
    """Retrieve ``fetch_k`` candidates, return the ``k`` that a divopt method selects.

    Attributes
    ----------
    vectorstore : any LangChain ``VectorStore`` (or give ``documents`` + ``document_embeddings``).
    documents, document_embeddings : precomputed candidates and their (n, d) vectors.
    embedding : the model that embeds the query (default: ``vectorstore.embeddings``).
    k : documents returned; fewer when fewer candidates exist.
    fetch_k : candidates fetched per query (>= k).
    method : any name in :data:`~divopt_rag.solvers.METHODS` (None, the default:
        :data:`~divopt_rag.solvers.DEFAULT_METHOD`; the attribute holds the name once built).
    theta : relevance-diversity trade-off in [0, 1], 1 = pure relevance. LangChain's
        ``lambda_mult`` is accepted in its place (not both), meaning what the store's own MMR
        makes of it: the same number, or ``1 - theta`` over langchain-qdrant's
        ``QdrantVectorStore`` (module doc).
    method_params : the method's own parameters (checked when the retriever is built).
    search_kwargs : passed to the store's search (e.g. ``filter``); ``k``, ``fetch_k`` and
        ``lambda_mult`` are the retriever's own arguments and are refused here.
    vectors : ``"auto"``, ``"store"`` or ``"reembed"``: where candidate vectors come from.
    order : ``"auto"`` (the store's own MMR order: ``"fetch"`` for Chroma, else ``"selection"``),
        ``"selection"`` (as the method picks them), ``"relevance"`` (decreasing cosine) or
        ``"fetch"`` (the order the store's search returned them).

    Examples
    --------
    >>> retriever = DivoptRetriever(vectorstore=store, k=5, fetch_k=50, theta=0.7)  # doctest: +SKIP
    >>> docs = retriever.invoke("what causes tides?")  # doctest: +SKIP
    >>> docs = await retriever.ainvoke("what causes tides?")  # doctest: +SKIP
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    vectorstore: VectorStore | None = None
    documents: list[Document] | None = None
    document_embeddings: Any = None
    embedding: Embeddings | None = None
    k: int = Field(4, ge=1)
    fetch_k: int = Field(20, ge=1)
    method: str | None = None
    theta: float = 0.5
    method_params: dict[str, Any] = Field(default_factory=dict)
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    vectors: Literal["auto", "store", "reembed"] = "auto"
    order: Literal["auto", "selection", "relevance", "fetch"] = "auto"
    _faiss_rows: _FaissPositions = PrivateAttr(default_factory=_FaissPositions)
    _warned: bool = PrivateAttr(default=False)

    @model_validator(mode="before")
    @classmethod
    def _names(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "lambda_mult" in data:
            if "theta" in data:
                raise ValueError("give theta or lambda_mult, not both (lambda_mult is LangChain's name for theta)")
            data = {**data}
            data["theta"] = _theta_of_lambda_mult(data.pop("lambda_mult"), data.get("vectorstore"))
        check_argument_names(data, cls.model_fields, "DivoptRetriever", _HINTS)
        for key in ("k", "fetch_k", "lambda_mult"):
            if key in (data.get("search_kwargs") or {}):
                raise ValueError(
                    f"search_kwargs[{key!r}]: pass {key}= to DivoptRetriever itself (search_kwargs go to the store's search)"
                )
        return data

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
        self.theta = check_trade_off(self.theta)
        try:
            self.method = check_method_params(self.method, self.method_params)
        except TypeError as exc:  # pydantic reports ValueErrors as a ValidationError naming the model
            raise ValueError(str(exc)) from None
        if self.vectors == "store" and self.vectorstore is not None and not self._store_has_vectors():
            raise ValueError(
                f"vectors='store': divopt cannot read the stored vectors of {type(self.vectorstore).__name__}; "
                "subclass DivoptRetriever and override stored_vectors(docs), or use vectors='reembed'"
            )
        if self._query_model() is None:
            raise ValueError("no model to embed the query: pass embedding= or a vectorstore whose .embeddings is set")
        return self

    @property
    def lambda_mult(self) -> float:
        """The ``lambda_mult`` the store's own MMR takes for the same trade-off: ``theta``, or
        ``1 - theta`` for langchain-qdrant's ``QdrantVectorStore`` (module doc)."""
        return 1.0 - self.theta if _inverts_lambda_mult(self.vectorstore) else self.theta

    # --- where vectors come from (override candidate_vectors for other stores) ------------------
    def _query_model(self) -> Embeddings | None:
        if self.embedding is not None:
            return self.embedding
        return None if self.vectorstore is None else self.vectorstore.embeddings

    def _store_has_vectors(self) -> bool:
        overridden = type(self).stored_vectors is not DivoptRetriever.stored_vectors
        return overridden or _store_kind(self.vectorstore) is not None

    def _use_store(self) -> bool:
        if self.vectors == "store" or (self.vectors == "auto" and self._store_has_vectors()):
            return True
        if self.vectors == "auto" and not self._warned:
            self._warned = True
            warnings.warn(
                f"DivoptRetriever cannot read the stored vectors of {type(self.vectorstore).__name__}, so every "
                f"query embeds its fetch_k = {self.fetch_k} candidates again ({self.fetch_k} embed_documents "
                "texts per query); subclass DivoptRetriever and override stored_vectors(docs) to read them from the "
                "store, or pass vectors='reembed' to accept the cost without this warning",
                ReembeddingWarning, stacklevel=user_stacklevel(),
            )
        return False

    def _order(self) -> str:
        if self.order != "auto":
            return self.order
        return "fetch" if _store_kind(self.vectorstore) == "chroma" else "selection"

    def stored_vectors(self, docs: list[Document]) -> list:
        """The store's own vectors of ``docs``, read through its public API (module doc).

        The hook for other stores: override it in a subclass to return one vector per document
        (matched by ``doc.id`` or metadata); the retriever then never embeds candidates again.
        """
        kind = _store_kind(self.vectorstore)
        if kind == "qdrant":
            return _qdrant_vectors(self.vectorstore, docs)
        ids = _ids(docs, self.vectorstore)
        if kind == "in_memory":
            return _in_memory_vectors(self.vectorstore, ids)
        if kind == "faiss":
            return self.vectorstore.index.reconstruct_batch(self._faiss_rows(self.vectorstore, ids))
        return _chroma_vectors(self.vectorstore, ids)

    def candidate_vectors(self, docs: list[Document]) -> np.ndarray:
        """The (len(docs), d) vectors of fetched documents (see module doc for the choice)."""
        if not docs:
            return np.zeros((0, 0))
        if self._use_store():
            return np.asarray(self.stored_vectors(docs), dtype=np.float64)
        return np.asarray(self._query_model().embed_documents([d.page_content for d in docs]), dtype=np.float64)

    async def acandidate_vectors(self, docs: list[Document]) -> np.ndarray:
        """Async :meth:`candidate_vectors`: the embedding model's ``aembed_documents`` when
        re-embedding; Chroma's lookup (a local call with no async API) runs in a worker thread."""
        if not docs:
            return np.zeros((0, 0))
        if not self._use_store():
            texts = [d.page_content for d in docs]
            return np.asarray(await self._query_model().aembed_documents(texts), dtype=np.float64)
        if _store_kind(self.vectorstore) in ("in_memory", "faiss"):
            return np.asarray(self.stored_vectors(docs), dtype=np.float64)  # in-memory lookups
        # Chroma, Qdrant and overridden hooks: calls with no async API, in a worker thread
        return np.asarray(await run_in_executor(None, self.stored_vectors, docs), dtype=np.float64)

    # --- candidates -------------------------------------------------------------------------------
    def _search_kwargs(self) -> dict[str, Any]:
        kwargs = dict(self.search_kwargs)
        if _store_kind(self.vectorstore) == "faiss" and kwargs.get("filter") is not None:
            # FAISS filters after its search: look at 2 fetch_k rows, as its own MMR search does
            kwargs.setdefault("fetch_k", 2 * self.fetch_k)
        return kwargs

    def _precomputed(self, query_vector: list[float]) -> tuple[list[Document], np.ndarray]:
        E = self.document_embeddings
        q = np.asarray(query_vector, dtype=np.float64)
        cos = (E @ q) / (np.linalg.norm(E, axis=1) * np.linalg.norm(q))
        top = np.argsort(-cos, kind="stable")[: self.fetch_k]
        return [self.documents[i] for i in top], E[top]

    def fetch_candidates(self, query: str, query_vector: list[float]) -> tuple[list[Document], np.ndarray]:
        """The ``fetch_k`` candidates of a query and their vectors."""
        if self.documents is not None:
            return self._precomputed(query_vector)
        try:
            docs = self.vectorstore.similarity_search_by_vector(query_vector, k=self.fetch_k, **self._search_kwargs())
        except NotImplementedError:
            docs = self.vectorstore.similarity_search(query, k=self.fetch_k, **self._search_kwargs())
        return docs, self.candidate_vectors(docs)

    async def afetch_candidates(self, query: str, query_vector: list[float]) -> tuple[list[Document], np.ndarray]:
        """Async :meth:`fetch_candidates`, through the store's async search."""
        if self.documents is not None:
            return self._precomputed(query_vector)
        store = self.vectorstore
        try:
            docs = await store.asimilarity_search_by_vector(query_vector, k=self.fetch_k, **self._search_kwargs())
        except NotImplementedError:
            docs = await store.asimilarity_search(query, k=self.fetch_k, **self._search_kwargs())
        return docs, await self.acandidate_vectors(docs)

    def _pick(self, q: list[float], docs: list[Document], E: np.ndarray) -> list[Document]:
        order = self._order()
        picks = select_candidates(q, E, self.k, self.theta, self.method, "selection" if order == "fetch" else order,
                                  **self.method_params)
        if order == "fetch":  # candidates come in the store's order
            picks = dataclasses.replace(picks, indices=np.sort(picks.indices))
        return _annotate(docs, picks)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        q = self._query_model().embed_query(query)
        return self._pick(q, *self.fetch_candidates(query, q))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        q = await self._query_model().aembed_query(query)
        return self._pick(q, *(await self.afetch_candidates(query, q)))


# names users bring from LangChain's own retrievers, and what to write instead
_HINTS = {
    **trade_off_hints("langchain"),
    "search_type": "DivoptRetriever always selects with method= (e.g. method='mmr' is LangChain's search_type='mmr')",
    "top_k": "the number of documents returned is k=",
    "top_n": "the number of documents returned is k=",
}
