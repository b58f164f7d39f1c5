"""divopt_rag.experiments: orchestration, one subpackage per job.

* :mod:`~divopt_rag.experiments.methods`, :mod:`~divopt_rag.experiments.method_result`: what every
  study shares (resolve and run a method; its typed result);
* :mod:`~divopt_rag.experiments.engine`: the executor and its run store (plan, parts, backends,
  consolidation, atomic writes, locks, limits); it never imports the command line;
* :mod:`~divopt_rag.experiments.measures`: metrics, measure tables, exact gaps, export;
* :mod:`~divopt_rag.experiments.studies`: sweeps, certification, the demo and the benchmarks;
* :mod:`~divopt_rag.experiments.plots`: figures from result files;
* :mod:`~divopt_rag.experiments.cli`: the ``divopt-rag`` command line (the only place argparse lives);
* :mod:`~divopt_rag.experiments.reproduce`: the seed papers' headline tables as recipes;
* :mod:`~divopt_rag.experiments.rag`: the LLM pipeline (answers, generation, DF-RAG, evaluators);
* ``notebooks/``: notebooks that read result files only.
"""
from divopt_rag.models import __version__

__all__ = ["__version__"]
