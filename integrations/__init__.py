"""divopt.integrations: adapters that put divopt's selectors into RAG stacks.

* :mod:`divopt.integrations.langchain`: ``DivoptRetriever`` (a LangChain retriever over any
  vector store) and a drop-in ``maximal_marginal_relevance`` (``pip install "divopt[langchain]"``).
* :mod:`divopt.integrations.llamaindex`: ``DivoptPostprocessor`` (a LlamaIndex node
  postprocessor; ``pip install "divopt[llamaindex]"``).

Both fetch candidates with their vectors and call :func:`select_candidates`, which runs any
method of :data:`divopt.solvers.METHODS`. The stack-specific modules are imported on demand so
this package needs neither stack.
"""
from .candidates import Picks, check_method_params, select_candidates

__all__ = ["Picks", "select_candidates", "check_method_params"]
