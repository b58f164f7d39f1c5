"""divopt_rag.experiments.studies: the studies the commands run, each a run spec for the engine.

Sweeps (:mod:`~divopt_rag.experiments.studies.grid`, :mod:`~divopt_rag.experiments.studies.runs`,
:mod:`~divopt_rag.experiments.studies.sweep`, the ``divopt-rag sweep`` command
:mod:`~divopt_rag.experiments.studies.sweep_command`), certification
(:mod:`~divopt_rag.experiments.studies.certify`), the demo and the benchmarks
(``bench_exact``, ``bench_fullscale``, ``bench_latency``, ``bench_quality``, ``bench_time_limits``).
"""
