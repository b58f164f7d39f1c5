"""divopt_rag.integrations: adapters that put divopt's selectors into RAG stacks.

* :mod:`divopt_rag.integrations.langchain`: ``DivoptRetriever`` (a LangChain retriever over any
  vector store) and a drop-in ``maximal_marginal_relevance`` (``pip install "divopt-rag[langchain]"``).
  It reads the stored vectors of InMemoryVectorStore, FAISS (``[faiss]``), Chroma (``[chroma]``)
  and Qdrant (``[qdrant]``), and warns once per retriever when it must embed candidates again.
* :mod:`divopt_rag.integrations.llamaindex`: ``DivoptPostprocessor`` (a LlamaIndex node
  postprocessor; ``pip install "divopt-rag[llamaindex]"``).
* :mod:`divopt_rag.integrations.haystack`: ``DivoptRanker`` (a Haystack ranker component, also
  at ``haystack_integrations.components.rankers.divopt``; Haystack's diversity ranker with its
  ``strategy``; ``pip install "divopt-rag[haystack]"``).

Each fetches candidates with their vectors and calls :func:`select_candidates`, which runs any
method of :data:`divopt_rag.solvers.METHODS`. The stack-specific modules are imported on demand so
this package needs neither stack.
"""
from divopt_rag.models import __version__
from .candidates import METADATA_KEYS, Picks, check_method_params, select_candidates

__all__ = ["__version__", "Picks", "select_candidates", "check_method_params", "METADATA_KEYS"]
