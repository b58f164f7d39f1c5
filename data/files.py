"""Reading only regular files: the one opener for files divopt-rag reads back.

A file divopt-rag wrote (a part, a manifest, a config, a cached array) can be replaced by
something that is not a file: a FIFO blocks ``open`` until a writer appears (a sweep hung
forever), a device never ends, a folder fails late. As SQLite and Git do, every file read
back is opened without blocking (``O_NONBLOCK``: a FIFO opens at once) and checked with
``fstat`` on that very descriptor (no race between the check and the read) to be a regular
file; anything else is :class:`NotRegularFile` naming the path and what it is.
"""
from __future__ import annotations

import io
import os
import stat
from typing import BinaryIO

__all__ = ["NotRegularFile", "open_regular", "read_regular"]


class NotRegularFile(OSError):
    """A path that is not a regular file where one was expected (the message names it)."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str | os.PathLike, buffering: int = -1) -> BinaryIO:
    """``open(path, "rb")`` that never blocks on a FIFO and refuses anything but a regular
    file (symlinks to one are followed): :class:`NotRegularFile` naming ``path``; the other
    ``OSError``s as ``open`` raises them (FileNotFoundError...)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise NotRegularFile(f"{path}: is a folder, not a file") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(f"{path}: is {_kind(mode)}, not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: plain reads from here on
    except BaseException:
        os.close(fd)
        raise
    return io.open(fd, "rb", buffering=buffering, closefd=True)  # type: ignore[return-value]


def read_regular(path: str | os.PathLike) -> bytes:
    """The bytes of the regular file ``path`` (:func:`open_regular`)."""
    with open_regular(path) as fh:
        return fh.read()
