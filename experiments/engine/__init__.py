"""divopt_rag.experiments.engine: the one executor and its run store, apart from every front end.

A run is a spec handed to :func:`~divopt_rag.experiments.engine.executor.run` with its
:class:`~divopt_rag.experiments.engine.options.RunOptions`: planned into tasks
(:mod:`~divopt_rag.experiments.engine.plan`), each finished task a checksummed part
(:mod:`~divopt_rag.experiments.engine.parts`) run by a backend
(:mod:`~divopt_rag.experiments.engine.backends`: inline, local processes, Ray; workers reaped with
their driver, :mod:`~divopt_rag.experiments.engine.reaper`), consolidated into one tidy table
(:mod:`~divopt_rag.experiments.engine.consolidate`) in an output folder that holds one
configuration (:mod:`~divopt_rag.experiments.engine.folder`), written atomically under the
folder's lock (:mod:`~divopt_rag.experiments.engine.store`), after the limits of
:mod:`~divopt_rag.experiments.engine.limits` were checked. The engine never imports the command
line: the command line turns its flags into a ``RunOptions``.
"""
