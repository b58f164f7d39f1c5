"""Loading an embedding model as a newcomer should see it: divopt's own progress bar, and
transformers' bars and logs quiet.

Importing sentence-transformers (and with it transformers and torch) is most of the time a
first embedding takes (7 s of 7.5 s on a loaded 2-core machine, the weights of
all-MiniLM-L6-v2 0.25 s), so :class:`LoadProgress` shows a bar with the stage under way and its
elapsed time, refreshed while the stage runs. It is a tqdm bar on stderr, shown on a terminal
only (tqdm's rule).

:func:`quiet_transformers` turns transformers' own progress bars ("Loading weights") and its
info logs off *inside a block* and puts back exactly what was there when the block ends: the
caller's settings are never changed (a library call changes no global state). Set
``DIVOPT_RAG_VERBOSE=1``, or turn transformers' verbosity up to info or debug yourself, to see
them. The switch is transformers' process-wide one, so another thread loading a model during
the block sees it too.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Iterator, Sequence

from tqdm.auto import tqdm

__all__ = ["LoadProgress", "quiet_transformers", "VERBOSE_ENV"]

#: Set to 1 (or true / yes / on) to let transformers show its own bars and logs.
VERBOSE_ENV = "DIVOPT_RAG_VERBOSE"
_REFRESH_SECONDS = 0.5


def _asked_for_verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' progress bars and logs below errors off within the block, restored after.

    Nothing is changed when :data:`VERBOSE_ENV` is set, when transformers is not installed, or
    when its verbosity is already info or debug (the caller asked for them)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    if _asked_for_verbose() or verbosity <= logging.INFO:
        yield
        return
    hf_logging.set_verbosity(logging.ERROR)
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


class LoadProgress:
    """A bar over named stages, ``with LoadProgress("load MiniLM", ["import", "weights"]) as p:``
    then :meth:`next` after each stage; the stage under way and the elapsed time are redrawn
    every half second while it runs (a daemon thread that only redraws).

    ``show``: None (on a terminal only, tqdm's rule), True or False.
    """

    def __init__(self, desc: str, stages: Sequence[str], show: bool | None = None):
        self.stages = list(stages)
        self.bar = tqdm(total=len(self.stages), desc=desc, unit="step", disable=None if show is None else not show,
                        bar_format="{desc}: {postfix} [{n_fmt}/{total_fmt} steps, {elapsed}]")
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "LoadProgress":
        self._show_stage()
        if not self.bar.disable:
            self._thread = threading.Thread(target=self._tick, name="divopt-load-progress", daemon=True)
            self._thread.start()
        return self

    def _show_stage(self) -> None:
        if self.bar.n < len(self.stages):
            self.bar.set_postfix_str(self.stages[self.bar.n], refresh=True)

    def _tick(self) -> None:
        while not self._done.wait(_REFRESH_SECONDS):
            self.bar.refresh()

    def next(self) -> None:
        """The current stage is done: count it and show the next one."""
        self.bar.update(1)
        self._show_stage()

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        self.bar.close()
