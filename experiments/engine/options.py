"""How a run runs, as one object: what the command line's flags give the engine.

:class:`RunOptions` is what :func:`divopt_rag.experiments.engine.executor.run` takes besides the
spec and its folder: where the tasks run and how a resumed run treats what it finds. The command
line builds one from its flags (:func:`divopt_rag.experiments.cli.arguments.run_options`); a
library caller gives one, or the same fields as keywords. The engine never reads an argparse
namespace. Standard library only (the command line imports it while it parses).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BACKENDS", "RunOptions"]

#: Backends a run can use.
BACKENDS = ("inline", "local", "ray")


@dataclass(frozen=True)
class RunOptions:
    """The options of one run (checked by :func:`~divopt_rag.experiments.engine.executor.run`).

    backend : "inline" (this process, plan order), "local" (``n_workers`` spawned processes;
        ``n_workers`` None or 0, the default, runs inline) or "ray" (``address`` of a trusted
        cluster, else a local Ray on 127.0.0.1 with ``n_workers`` CPUs, None: this machine's CPU
        count); None: the spec's first. One default for every command (issue 49): in this process,
        where small runs are fastest (docs/benchmarks.md, "Throughput") and a selector's seconds are
        not shared with other workers. chunk_size : tasks per worker call (None: about 4
        calls per worker, at most 16 tasks). progress : show a progress bar. retry_errors : run
        the error parts again. new_grid : accept a configuration other than the one the folder
        holds (:func:`~divopt_rag.experiments.engine.folder.check_folder`).
    """

    backend: str | None = None
    n_workers: int | None = None
    address: str | None = None
    chunk_size: int | None = None
    progress: bool = True
    retry_errors: bool = False
    new_grid: bool = False
