"""divopt_rag.experiments.measures: what a result table measures and how it is read.

:mod:`~divopt_rag.experiments.measures.metrics` (the metrics of one selection),
:mod:`~divopt_rag.experiments.measures.tables` (the long measures table, metric columns with
their cutoffs, the settings of a table), :mod:`~divopt_rag.experiments.measures.quality` (the gap
rule against an exact solve, the best known value, exact gaps of a table, printed tables) and
:mod:`~divopt_rag.experiments.measures.export` (TREC run files and ranx runs).
"""
