"""LlamaIndex adapter: a node postprocessor that keeps the ``top_n`` nodes a divopt method picks.

Needs ``llama-index-core`` (``pip install "divopt-rag[llamaindex]"``).

Use it after a retriever that fetches more nodes than you keep, and hand it the index so it
reads the vectors the index already stores::

    post = DivoptPostprocessor(index=index, top_n=5, theta=0.5)      # method: DEFAULT_METHOD
    engine = index.as_query_engine(similarity_top_k=50, node_postprocessors=[post])
    # or: post.postprocess_nodes(index.as_retriever(similarity_top_k=50).retrieve(q), query_str=q)

The query vector is ``query_bundle.embedding`` when the retriever set it, else
``embed_model.get_agg_embedding_from_queries(query_bundle.embedding_strs)`` (what LlamaIndex's
vector retrievers do). A node's vector is, in this order: ``node.embedding`` when the node
carries it; the vector store's copy (``index.vector_store``, or ``vector_store=``, any store with
``get(node_id)`` such as the default ``SimpleVectorStore``: its retrieved nodes come from the
docstore without their vectors); else the node's embed-mode content embedded again with
``embed_model`` (a warning says so when no ``embed_model`` was chosen either). Override
:meth:`DivoptPostprocessor.node_vectors` for other stores.

Returned nodes are new ``NodeWithScore`` objects sorted by decreasing ``score``, as LlamaIndex's
own rerankers return theirs (``SentenceTransformerRerank``, ``LLMRerank``); the ``score`` is the
cosine similarity of the node to the query (the similarity a vector retriever reports, computed
on the vectors divopt selected with). ``order="selection"`` lists them in the method's pick order
instead (greedy methods: the order they were chosen; the scores are then not sorted), and
``metadata["divopt_rank"]`` is always the pick order. Each is a copy of the node whose metadata
keeps every key of the user's and adds ``divopt_score``, ``divopt_rank``, ``divopt_method``,
``divopt_theta`` and ``divopt_objective``; these keys are excluded from the LLM and embedding
text, and the stored nodes are not changed. ``apostprocess_nodes`` awaits the embedding model's
async API and selects in a worker thread.

Arguments are checked when the postprocessor is built: an unknown name (``thetaa=``, or
``top_k=`` where LlamaIndex's postprocessors say ``top_n``) is an error with a hint, never
ignored. LlamaIndex's own name for the trade-off, ``mmr_threshold`` (its MMR mode's
``vector_store_kwargs``: 1 = pure relevance), is accepted for ``theta`` with that meaning (the
aliasing rule of docs/howto/integrations.md); LangChain's ``lambda_mult`` is refused with a hint.

Note: LlamaIndex's own ``vector_store_query_mode="mmr"`` penalizes only the similarity to the
most recent pick (``get_top_k_mmr_embeddings``); ``method="mmr"`` here is the published MMR
(max over all picks), equal to LangChain's.
"""
from __future__ import annotations

import asyncio
import warnings
from typing import Any, Literal

import numpy as np

from divopt_rag.models.extras import require

require("llama_index.core", "divopt_rag.integrations.llamaindex")  # one line naming the extra when missing
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import ConfigDict, Field, model_validator
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.settings import Settings

from .candidates import (
    METADATA_KEYS,
    check_argument_names,
    check_method_params,
    check_trade_off,
    pick_metadata,
    select_candidates,
    trade_off_hints,
    user_stacklevel,
)

__all__ = ["DivoptPostprocessor"]

# names users bring from LlamaIndex's other postprocessors and retrievers, and what to write instead
_HINTS = {
    "top_k": "the number of nodes kept is top_n= (as in LlamaIndex's rerankers); the retriever's "
    "similarity_top_k= is the number fetched",
    "similarity_top_k": "that is the retriever's argument (the number fetched); the number kept is top_n=",
    **trade_off_hints("llamaindex"),
}


class DivoptPostprocessor(BaseNodePostprocessor):
    """Keep the ``top_n`` retrieved nodes that a divopt method selects for the query.

    Attributes
    ----------
    top_n : nodes kept (fewer when fewer come in).
    theta : relevance-diversity trade-off in [0, 1], 1 = pure relevance (default 0.5).
        LlamaIndex's ``mmr_threshold`` is accepted in its place (the same number; not both).
    method : any name in :data:`~divopt_rag.solvers.METHODS` (None, the default:
        :data:`~divopt_rag.solvers.DEFAULT_METHOD`; the attribute holds the name once built).
    method_params : the method's own parameters (checked when the postprocessor is built).
    index : the index the nodes come from; its ``vector_store`` supplies their stored vectors.
    vector_store : a store with ``get(node_id) -> vector`` (instead of ``index``).
    embed_model : embeds the query and nodes without vectors (default ``Settings.embed_model``,
        used only when something must be embedded).
    order : ``"relevance"`` (default: by decreasing score, LlamaIndex's convention) or
        ``"selection"`` (the method's pick order).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    top_n: int = Field(default=4, ge=1)
    theta: float = 0.5
    method: str | None = None
    method_params: dict = Field(default_factory=dict)
    index: Any = Field(default=None, exclude=True)
    vector_store: Any = Field(default=None, exclude=True)
    embed_model: BaseEmbedding | None = Field(default=None, exclude=True)
    order: Literal["relevance", "selection"] = "relevance"

    @model_validator(mode="before")
    @classmethod
    def _names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if "mmr_threshold" in data:
                if "theta" in data:
                    raise ValueError("give theta or mmr_threshold, not both (mmr_threshold is LlamaIndex's name for theta)")
                data = {**data}
                data["theta"] = data.pop("mmr_threshold")
            check_argument_names(data, cls.model_fields, "DivoptPostprocessor", _HINTS)
        return data

    @model_validator(mode="after")
    def _check(self) -> DivoptPostprocessor:
        self.theta = check_trade_off(self.theta)
        try:
            self.method = check_method_params(self.method, self.method_params)
        except TypeError as exc:  # pydantic reports ValueErrors as a ValidationError
            raise ValueError(str(exc)) from None
        if self.index is not None:
            if self.vector_store is not None:
                raise ValueError("give index= or vector_store=, not both (index= reads index.vector_store)")
            if not hasattr(self.index, "vector_store"):
                raise ValueError(
                    f"index= must be a LlamaIndex vector index (with .vector_store), got {type(self.index).__name__}"
                )
        return self

    @classmethod
    def class_name(cls) -> str:
        return "DivoptPostprocessor"

    def _embed_model(self) -> BaseEmbedding:
        return self.embed_model if self.embed_model is not None else Settings.embed_model

    @property
    def mmr_threshold(self) -> float:
        """LlamaIndex's name for ``theta``."""
        return self.theta

    def query_vector(self, query_bundle: QueryBundle | None) -> np.ndarray:
        if query_bundle is None:
            raise ValueError("DivoptPostprocessor needs the query: pass query_str= or query_bundle=")
        if query_bundle.embedding is not None:
            return np.asarray(query_bundle.embedding, dtype=np.float64)
        model = self._embed_model()
        return np.asarray(model.get_agg_embedding_from_queries(query_bundle.embedding_strs), dtype=np.float64)

    async def aquery_vector(self, query_bundle: QueryBundle | None) -> np.ndarray:
        """Async :meth:`query_vector` (the embedding model's async API)."""
        if query_bundle is None or query_bundle.embedding is not None:
            return self.query_vector(query_bundle)
        model = self._embed_model()
        return np.asarray(await model.aget_agg_embedding_from_queries(query_bundle.embedding_strs), dtype=np.float64)

    def _known_vectors(self, nodes: list[NodeWithScore]) -> tuple[list, list[int], list[str]]:
        """The nodes' own or stored vectors, the positions still without one and their texts."""
        vecs: list = [n.node.embedding for n in nodes]
        store = self.index.vector_store if self.index is not None else self.vector_store
        if store is not None and hasattr(store, "get"):
            for i, n in enumerate(nodes):
                if vecs[i] is None:
                    try:
                        vecs[i] = store.get(n.node.node_id)
                    except KeyError:
                        pass
        missing = [i for i, v in enumerate(vecs) if v is None]
        if missing and self.embed_model is None:
            warnings.warn(
                f"DivoptPostprocessor is embedding {len(missing)} retrieved nodes again because it cannot see "
                "their stored vectors: pass index= (or vector_store=) to reuse them",
                stacklevel=user_stacklevel(),
            )
        return vecs, missing, [nodes[i].node.get_content(metadata_mode=MetadataMode.EMBED) for i in missing]

    def node_vectors(self, nodes: list[NodeWithScore]) -> np.ndarray:
        """(len(nodes), d) vectors: the node's own, the vector store's, or embedded again."""
        vecs, missing, texts = self._known_vectors(nodes)
        if missing:
            for i, v in zip(missing, self._embed_model().get_text_embedding_batch(texts)):
                vecs[i] = v
        return np.asarray(vecs, dtype=np.float64)

    async def anode_vectors(self, nodes: list[NodeWithScore]) -> np.ndarray:
        """Async :meth:`node_vectors` (the embedding model's async API for nodes to embed again)."""
        vecs, missing, texts = self._known_vectors(nodes)
        if missing:
            for i, v in zip(missing, await self._embed_model().aget_text_embedding_batch(texts)):
                vecs[i] = v
        return np.asarray(vecs, dtype=np.float64)

    def _select(self, nodes: list[NodeWithScore], q: np.ndarray, E: np.ndarray) -> list[NodeWithScore]:
        picks = select_candidates(q, E, self.top_n, self.theta, self.method, "selection", **self.method_params)
        out = []
        for rank, i in enumerate(picks.indices.tolist()):
            node = nodes[i].node
            meta = {**node.metadata, **pick_metadata(picks, rank, i)}
            copy = node.model_copy(
                update={
                    "metadata": meta,
                    "excluded_llm_metadata_keys": _with_keys(node.excluded_llm_metadata_keys),
                    "excluded_embed_metadata_keys": _with_keys(node.excluded_embed_metadata_keys),
                }
            )
            out.append(NodeWithScore(node=copy, score=float(picks.relevance[i])))
        if self.order == "relevance":  # LlamaIndex's rerankers: by decreasing score (ties: pick order)
            out.sort(key=lambda n: -n.score)
        return out

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        return self._select(nodes, self.query_vector(query_bundle), self.node_vectors(nodes))

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        q = await self.aquery_vector(query_bundle)
        E = await self.anode_vectors(nodes)
        return await asyncio.to_thread(self._select, nodes, q, E)  # CPU/GPU work off the event loop


def _with_keys(excluded: list[str]) -> list[str]:
    return list(dict.fromkeys([*excluded, *METADATA_KEYS]))
