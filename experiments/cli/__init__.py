"""divopt_rag.experiments.cli: the ``divopt-rag`` command line, the only place argparse lives.

:mod:`~divopt_rag.experiments.cli.main` (the entry point: one command per module, errors as exit
codes), :mod:`~divopt_rag.experiments.cli.arguments` (each command's flags and the checks across
them; the run options the engine takes), :mod:`~divopt_rag.experiments.cli.flag_types` (the value
types, one-line errors) and :mod:`~divopt_rag.experiments.cli.flag_checks` (checks that need the
file system or the registries). Building a parser imports nothing heavy.
"""
