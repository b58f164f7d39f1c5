"""LlamaIndex adapter: a node postprocessor that keeps the ``top_n`` nodes a divopt method picks.

Needs ``llama-index-core`` (``pip install "divopt-rag[llamaindex]"``).

Use it after a retriever that fetches more nodes than you keep::

    retriever = index.as_retriever(similarity_top_k=20)            # fetch_k
    post = DivoptPostprocessor(top_n=5, theta=0.5, method="fw_ms", embed_model=embed_model)
    nodes = post.postprocess_nodes(retriever.retrieve(query), query_str=query)
    # or: index.as_query_engine(similarity_top_k=20, node_postprocessors=[post])

The query vector is ``query_bundle.embedding`` when the retriever set it, else
``embed_model.get_agg_embedding_from_queries(query_bundle.embedding_strs)`` (what LlamaIndex's
vector retrievers do). A node's vector is ``node.embedding`` when present, else the vector
store's copy when ``vector_store`` is given and has ``get(node_id)`` (``SimpleVectorStore``:
retrieved nodes come from the docstore without their vectors), else the node's embed-mode
content embedded again with ``embed_model``. Override :meth:`DivoptPostprocessor.node_vectors`
for other stores.

Returned nodes are new ``NodeWithScore`` objects in selection order (``order="relevance"``:
by decreasing cosine), ``score`` = cosine similarity to the query, on copies of the nodes whose
metadata carries ``divopt_rank``, ``divopt_method``, ``divopt_theta``, ``divopt_objective``;
these keys are excluded from the LLM and embedding text, and the stored nodes are not changed.

Note: LlamaIndex's own ``vector_store_query_mode="mmr"`` penalizes only the similarity to the
most recent pick (``get_top_k_mmr_embeddings``); ``method="mmr"`` here is the published MMR
(max over all picks), equal to LangChain's.
"""
from __future__ import annotations

from typing import Any, Literal

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, model_validator
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.settings import Settings

from divopt_rag.models.validation import check_theta
from divopt_rag.solvers import DEFAULT_METHOD

from .candidates import check_method_params, select_candidates

__all__ = ["DivoptPostprocessor"]

_KEYS = ["divopt_rank", "divopt_method", "divopt_theta", "divopt_objective"]


class DivoptPostprocessor(BaseNodePostprocessor):
    """Keep the ``top_n`` retrieved nodes that a divopt method selects for the query.

    Attributes
    ----------
    top_n : nodes kept (fewer when fewer come in).
    theta : relevance-diversity trade-off in [0, 1], 1 = pure relevance.
    method : any name in :data:`divopt_rag.solvers.METHODS` (default ``DEFAULT_METHOD``).
    method_params : the method's own parameters (checked when the postprocessor is built).
    embed_model : embeds the query and nodes without vectors (default ``Settings.embed_model``,
        used only when something must be embedded).
    vector_store : optional store with ``get(node_id) -> vector`` (e.g. ``SimpleVectorStore``).
    order : ``"selection"`` or ``"relevance"``.
    """

    top_n: int = Field(default=4, ge=1)
    theta: float = 0.5
    method: str = DEFAULT_METHOD
    method_params: dict = Field(default_factory=dict)
    embed_model: BaseEmbedding | None = Field(default=None, exclude=True)
    vector_store: Any = Field(default=None, exclude=True)
    order: Literal["selection", "relevance"] = "selection"

    @model_validator(mode="after")
    def _check(self) -> DivoptPostprocessor:
        self.theta = check_theta(self.theta)
        try:
            check_method_params(self.method, self.method_params)
        except TypeError as exc:  # pydantic reports ValueErrors as a ValidationError
            raise ValueError(str(exc)) from None
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
        if self.vector_store is not None and hasattr(self.vector_store, "get"):
            for i, n in enumerate(nodes):
                if vecs[i] is None:
                    try:
                        vecs[i] = self.vector_store.get(n.node.node_id)
                    except KeyError:
                        pass
        missing = [i for i, v in enumerate(vecs) if v is None]
        if missing:
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
            meta = {
                **node.metadata,
                "divopt_rank": rank,
                "divopt_method": picks.method,
                "divopt_theta": picks.theta,
                "divopt_objective": float(picks.objective),
            }
            copy = node.model_copy(
                update={
                    "metadata": meta,
                    "excluded_llm_metadata_keys": list(dict.fromkeys(node.excluded_llm_metadata_keys + _KEYS)),
                    "excluded_embed_metadata_keys": list(dict.fromkeys(node.excluded_embed_metadata_keys + _KEYS)),
                }
            )
            out.append(NodeWithScore(node=copy, score=float(picks.relevance[i])))
        return out
