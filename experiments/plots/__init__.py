"""divopt_rag.experiments.plots: figures from result files (``divopt-rag plot``):
:mod:`~divopt_rag.experiments.plots.figures` (Pareto, latency, gaps, certified) and
:mod:`~divopt_rag.experiments.plots.robust` (the plots of a robust sweep). Needs matplotlib
(``pip install "divopt-rag[plots]"``).
"""
