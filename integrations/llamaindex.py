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

Returned nodes are new ``NodeWithScore`` objects in selection order (``order="relevance"``:
by decreasing cosine), ``score`` = cosine similarity to the query, on copies of the nodes whose
metadata keeps every key of the user's and adds ``divopt_score``, ``divopt_rank``,
``divopt_method``, ``divopt_theta`` and ``divopt_objective``; these keys are excluded from the
LLM and embedding text, and the stored nodes are not changed.

Arguments are checked when the postprocessor is built: an unknown name (``thetaa=``, or
``top_k=`` where LlamaIndex's postprocessors say ``top_n``) is an error with a hint, never
ignored.

Note: LlamaIndex's own ``vector_store_query_mode="mmr"`` penalizes only the similarity to the
most recent pick (``get_top_k_mmr_embeddings``); ``method="mmr"`` here is the published MMR
(max over all picks), equal to LangChain's.
"""
from __future__ import annotations

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

from divopt_rag.models.validation import check_theta
from divopt_rag.solvers import DEFAULT_METHOD

from .candidates import METADATA_KEYS, check_argument_names, check_method_params, pick_metadata, select_candidates

__all__ = ["DivoptPostprocessor"]

# names users bring from LlamaIndex's other postprocessors and retrievers, and what to write instead
_HINTS = {
    "top_k": "the number of nodes kept is top_n= (as in LlamaIndex's rerankers); the retriever's "
    "similarity_top_k= is the number fetched",
    "similarity_top_k": "that is the retriever's argument (the number fetched); the number kept is top_n=",
    "lambda_mult": "write theta= (the same number: 1 = pure relevance)",
    "mmr_threshold": "write theta= (the same number: 1 = pure relevance)",
}


class DivoptPostprocessor(BaseNodePostprocessor):
    """Keep the ``top_n`` retrieved nodes that a divopt method selects for the query.

    Attributes
    ----------
    top_n : nodes kept (fewer when fewer come in).
    theta : relevance-diversity trade-off in [0, 1], 1 = pure relevance.
    method : any name in :data:`~divopt_rag.solvers.METHODS` (default ``DEFAULT_METHOD``).
    method_params : the method's own parameters (checked when the postprocessor is built).
    index : the index the nodes come from; its ``vector_store`` supplies their stored vectors.
    vector_store : a store with ``get(node_id) -> vector`` (instead of ``index``).
    embed_model : embeds the query and nodes without vectors (default ``Settings.embed_model``,
        used only when something must be embedded).
    order : ``"selection"`` or ``"relevance"``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    top_n: int = Field(default=4, ge=1)
    theta: float = 0.5
    method: str = DEFAULT_METHOD
    method_params: dict = Field(default_factory=dict)
    index: Any = Field(default=None, exclude=True)
    vector_store: Any = Field(default=None, exclude=True)
    embed_model: BaseEmbedding | None = Field(default=None, exclude=True)
    order: Literal["selection", "relevance"] = "selection"

    @model_validator(mode="before")
    @classmethod
    def _names(cls, data: Any) -> Any:
        if isinstance(data, dict):
            check_argument_names(data, cls.model_fields, "DivoptPostprocessor", _HINTS)
        return data

    @model_validator(mode="after")
    def _check(self) -> DivoptPostprocessor:
        self.theta = check_theta(self.theta)
        try:
            check_method_params(self.method, self.method_params)
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

    def query_vector(self, query_bundle: QueryBundle | None) -> np.ndarray:
        if query_bundle is None:
            raise ValueError("DivoptPostprocessor needs the query: pass query_str= or query_bundle=")
        if query_bundle.embedding is not None:
            return np.asarray(query_bundle.embedding, dtype=np.float64)
        model = self._embed_model()
        return np.asarray(model.get_agg_embedding_from_queries(query_bundle.embedding_strs), dtype=np.float64)

    def node_vectors(self, nodes: list[NodeWithScore]) -> np.ndarray:
        """(len(nodes), d) vectors: the node's own, the vector store's, or embedded again."""
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
        if missing:
            if self.embed_model is None:
                warnings.warn(
                    f"DivoptPostprocessor is embedding {len(missing)} retrieved nodes again because it cannot see "
                    "their stored vectors: pass index= (or vector_store=) to reuse them",
                    stacklevel=3,
                )
            texts = [nodes[i].node.get_content(metadata_mode=MetadataMode.EMBED) for i in missing]
            for i, v in zip(missing, self._embed_model().get_text_embedding_batch(texts)):
                vecs[i] = v
        return np.asarray(vecs, dtype=np.float64)

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        q = self.query_vector(query_bundle)
        picks = select_candidates(
            q, self.node_vectors(nodes), self.top_n, self.theta, self.method, self.order, **self.method_params
        )
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
        return out


def _with_keys(excluded: list[str]) -> list[str]:
    return list(dict.fromkeys([*excluded, *METADATA_KEYS]))
