"""The domains every entry point checks its values against, declared once: theta's range, the
upper ends of counts, iterations and seeds, and the names of the exact engines.

The library's validators (:func:`divopt_rag.models.validation.check_theta`, the constraints of
:mod:`divopt_rag.models.parameters`), the sweep's instance parameters and the command line's
flag types (:mod:`divopt_rag.experiments.cli.flag_types`) all read these. Standard library only:
the command line reads it without loading numpy or torch.
"""
from __future__ import annotations

import os

__all__ = ["THETA_RANGE", "ROWS_MAX", "COUNT_MAX", "ITERATIONS_MAX", "SEED_MAX", "THREADS_MAX", "SOLVERS",
           "EXACT_SOLVERS", "RUNS_MAX", "EXACT_N_MAX", "REPEATS_MAX", "CORPUS_MAX"]

#: The relevance-diversity trade-off theta: [0, 1], 1 = pure relevance (every method's theta).
THETA_RANGE = (0.0, 1.0)
#: Upper end of a count of rows (pool sizes, samples, entrants), each clipped to the pool by its
#: method: it keeps the value within the machine integers tensors index with.
ROWS_MAX = 2**31 - 1
#: Upper end of every count a caller gives (sizes, numbers of queries, repeats, chunks): a count
#: never exceeds the rows a tensor can index, and Python integers past it overflow the machine
#: integers of numpy and torch (``--k 1e30`` was an internal OverflowError).
COUNT_MAX = ROWS_MAX
#: Upper end of an iteration cap (FW steps, swaps, rounds): a bounded loop, never a hang.
ITERATIONS_MAX = 1_000_000
#: Upper end of a seed: the range every generator takes (numpy, torch, Python).
SEED_MAX = 2**32 - 1
#: Upper end of a thread count (a MIP solver's ``threads``, torch's intra-op threads, local
#: workers): this machine's CPUs, the most that do not oversubscribe it (``threads=100000`` hung
#: HiGHS creating them, and Gurobi refused 10**6 with its own error). The lower end is 1.
THREADS_MAX = max(1, os.cpu_count() or 1)
#: The MIP solvers the model runner drives, in the order ``"auto"`` tries them.
SOLVERS = ("gurobi", "scip", "highs")
#: The exact engines of an exact CCBQP optimum (the ``exact`` method, ``--solver``): enumeration,
#: the MIP solvers and divopt's own branch-and-bound (``"auto"`` chooses among them).
EXACT_SOLVERS = ("brute", *SOLVERS, "bnb")
#: Upper end of the runs of one sweep (its grid counted before it is expanded): a grid of 3e7 runs
#: planned for minutes at 786 MiB before anything was written; a million runs plan in seconds.
RUNS_MAX = 1_000_000
#: Upper end of a pool certified by an exact solver (``bench exact --n``, ``bench quality --pool``):
#: its n x n float64 similarity alone is 800 MB at 10^4, far past what any of the
#: exact engines proves in hours.
EXACT_N_MAX = 10_000
#: Upper end of timed repeats per cell (``bench latency --repeats``): the median of a thousand is
#: as good as of more, and 10^9 repeats never end.
REPEATS_MAX = 1_000
#: Upper end of a corpus of WordNet glosses (``--corpus-size``): WordNet 3.0 has 117,659 synsets,
#: one gloss each; a corpus cannot be larger.
CORPUS_MAX = 117_659
