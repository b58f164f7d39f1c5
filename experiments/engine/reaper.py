"""Every process of a local Ray cluster goes when the driver that started it goes, however the
driver dies (``kill -9`` included).

Ray binds its head processes (GCS, raylet, log monitor, ...) to the driver with the kernel's
parent-death signal, but the raylet's own children (the DashboardAgent, the RuntimeEnvAgent and
the workers) only poll for their parent, and then try to report to a GCS that is gone: they
were seen alive 50 s and more after their driver was killed. So divopt starts its local Ray
with a watchdog, this module run as a small process of its own (standard library only):

* every process of the cluster carries a mark: the driver puts ``DIVOPT_RAY_SESSION=<id>`` in
  its environment while ``ray.init`` starts the head processes, and every process they start
  inherits it (Ray passes its environment on to its agents and workers). The agents then set
  their process titles over the memory ``/proc/<pid>/environ`` reads (``ray::DashboardAgent``
  padded with spaces), so the mark can no longer be read there: a process that holds a file
  open under the cluster's temporary folder (its logs) counts as marked too;
* the watchdog (:class:`Reaper`, started before ``ray.init`` in a session of its own, so a
  Ctrl-C in the terminal does not stop it first) waits on a pipe from the driver. The pipe
  closes when the driver closes it after ``ray.shutdown()``, or when the kernel closes it
  because the driver died; the watchdog also sees the driver's death as its own re-parenting
  (checked twice a second). Then it kills (SIGKILL) every process that carries the mark, again
  until none has appeared for a second (:func:`kill_marked`), removes the cluster's temporary
  folder and exits.

Linux reads the marks from ``/proc/<pid>/environ``; elsewhere psutil does, when installed.
"""
from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

__all__ = ["MARK", "Reaper", "marked_processes", "kill_marked", "main"]

#: The environment variable that marks the processes of one local Ray cluster.
MARK = "DIVOPT_RAY_SESSION"


def _environ(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read()
    except OSError:  # gone, a zombie, or another user's
        return None


def _holds_file_under(pid: int, root: str) -> bool:
    """Whether process ``pid`` has a file open below the folder ``root`` (a real path)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(root):
                return True
        except OSError:
            continue
    return False


def _linux_marked(token: bytes, root: str | None) -> Iterator[int]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            pid = int(entry.name)
            env = _environ(pid)
            if (env and token in env.split(b"\0")) or (root is not None and _holds_file_under(pid, root)):
                yield pid


def _psutil_marked(mark: str, root: str | None) -> Iterator[int]:  # pragma: no cover - macOS and friends
    try:
        import psutil
    except ImportError:
        return
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARK) == mark or (
                    root is not None and any(f.path.startswith(root) for f in proc.open_files())):
                yield proc.pid
        except (psutil.Error, OSError):
            continue


def marked_processes(mark: str, temp_dir: str | os.PathLike | None = None, exclude: tuple[int, ...] = ()) -> list[int]:
    """The live processes that carry ``DIVOPT_RAY_SESSION=<mark>`` or, given the cluster's
    ``temp_dir``, hold a file open below it (module docstring); this one and ``exclude`` left out."""
    root = None if temp_dir is None else os.path.join(os.path.realpath(temp_dir), "")
    if os.path.isdir("/proc/self"):
        found = _linux_marked(f"{MARK}={mark}".encode(), root)
    else:  # pragma: no cover
        found = _psutil_marked(mark, root)
    skip = {os.getpid(), *exclude}
    return [pid for pid in found if pid not in skip]


def kill_marked(mark: str, timeout: float = 15.0, quiet: float = 1.0, temp_dir: str | os.PathLike | None = None,
                exclude: tuple[int, ...] = ()) -> int:
    """SIGKILL every process marked ``mark`` (:func:`marked_processes`), scanning again (a dying
    raylet may still have started an agent or a worker) until no scan has found one for
    ``quiet`` seconds, or ``timeout`` seconds pass. Returns the number of processes killed."""
    killed: set[int] = set()
    start = last_seen = time.monotonic()
    while time.monotonic() - last_seen < quiet and time.monotonic() - start < timeout:
        pids = marked_processes(mark, temp_dir, exclude)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        if pids:
            last_seen = time.monotonic()
        time.sleep(0.05)
    return len(killed)


class Reaper:
    """The watchdog of one local Ray cluster (module docstring), started at construction:
    ``env()`` is the environment to start the cluster with (the mark set), ``stop()`` (after
    ``ray.shutdown()``) lets it clean up and waits for it."""

    def __init__(self, temp_dir: str | os.PathLike | None = None) -> None:
        self.mark = uuid.uuid4().hex
        self.temp_dir = None if temp_dir is None else str(temp_dir)
        env = {k: v for k, v in os.environ.items() if k != MARK}
        self.process = subprocess.Popen(
            [sys.executable, "-S", os.path.abspath(__file__), str(os.getpid()), self.mark,
             *([self.temp_dir] if self.temp_dir else [])],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True, env=env, close_fds=True,
        )

    @contextlib.contextmanager
    def marked(self) -> Iterator[None]:
        """Inside the block the driver's environment carries the mark: wrap ``ray.init`` in it,
        and every process it starts inherits the mark."""
        old = os.environ.get(MARK)
        os.environ[MARK] = self.mark
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(MARK, None)
            else:
                os.environ[MARK] = old

    def stop(self, timeout: float = 30.0) -> None:
        """Close the pipe (the watchdog kills what is left and removes the temporary folder) and
        wait for it to finish."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:  # pragma: no cover - it gives up after its own timeout
            pass


def _wait_for_driver(driver: int) -> None:
    """Return when the driver closes the pipe (stdin) or is gone: this process is then
    re-parented, which is checked twice a second in case a process the driver started
    still holds the pipe open."""
    fd = sys.stdin.fileno()
    while os.getppid() == driver:
        try:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready and not os.read(fd, 1 << 16):
                return
        except OSError:
            return


def main(argv: list[str] | None = None) -> int:
    """``python reaper.py DRIVER_PID MARK [TEMP_DIR]``: wait until the driver closes stdin or
    dies, then kill every process marked MARK and remove TEMP_DIR."""
    argv = sys.argv[1:] if argv is None else argv
    driver, mark, temp_dir = int(argv[0]), argv[1], (argv[2] if len(argv) > 2 else None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver's Ctrl-C is not ours: wait for the pipe
    _wait_for_driver(driver)
    kill_marked(mark, temp_dir=temp_dir, exclude=(driver,))  # a driver that closed the pipe lives on
    if temp_dir:
        shutil.rmtree(Path(temp_dir), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
