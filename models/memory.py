"""What this process may still allocate, and byte counts in words: the numbers every memory
refusal quotes (the exact solvers' :func:`~divopt_rag.models.mip_sizing.memory_refusal`, the
CLI's ``check_memory``). Standard library only (psutil where installed), so a check costs no
heavy import.
"""
from __future__ import annotations

import os
import resource

__all__ = ["available_memory", "format_bytes"]


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _cgroup_available() -> int | None:
    """The cgroup (v2, else v1) memory limit minus the group's usage; None without a limit."""
    pairs = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
             ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"))
    for limit_path, usage_path in pairs:
        try:
            with open(limit_path) as fh:
                text = fh.read().strip()
            if text == "max":
                return None
            limit = int(text)
            if limit >= 1 << 60:  # v1's "no limit"
                return None
            with open(usage_path) as fh:
                usage = int(fh.read().strip())
            return max(0, limit - usage)
        except (OSError, ValueError):
            continue
    return None


def _address_space_available() -> int | None:
    """RLIMIT_AS (``ulimit -v``) minus the address space this process already maps."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm") as fh:
            vm = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None
    return max(0, soft - vm)


def available_memory() -> tuple[int, str]:
    """(bytes, source): the least of the system's MemAvailable (psutil where installed), the
    cgroup's limit minus its usage, and RLIMIT_AS minus this process's address space."""
    found: list[tuple[int, str]] = []
    try:
        import psutil

        found.append((int(psutil.virtual_memory().available), "available system memory"))
    except ImportError:
        avail = _meminfo_available()
        if avail is not None:
            found.append((avail, "MemAvailable"))
    cg = _cgroup_available()
    if cg is not None:
        found.append((cg, "the cgroup's memory limit"))
    rl = _address_space_available()
    if rl is not None:
        found.append((rl, "the address-space limit (ulimit -v)"))
    if not found:
        return (1 << 62), "unknown"
    return min(found)


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB', 8e10 -> '74.5 GiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} B" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024.0
    return f"{n:.3g} TiB"  # pragma: no cover
