"""divopt_rag.experiments.rag: the LLM/RAG pipeline, apart from the orchestration code.

* :mod:`.llm`: the one OpenAI-compatible client every LLM step goes through;
* :mod:`.prompts`, :mod:`.generation`: answer generation from retrieved passages;
* :mod:`.answers`: answer-level metrics (F1, exact match, answer recall, ...);
* :mod:`.evaluator`: evaluators that score a selection for one query;
* :mod:`.adaptive`: query-adaptive theta on sweep tables (median gate, Oracle);
* :mod:`.dfrag`, :mod:`.dfrag_prompts`: DF-RAG (Khan et al.) as published.
"""
