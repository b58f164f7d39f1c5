"""Count the host syncs of a block of torch code, on any device (the CPU included).

A host sync is a point where the host waits for the device's queue: on CUDA these cost a round
trip each, and a loop that makes one per step runs at the host's pace instead of the device's.
On the CPU nothing waits, but the same calls are made, so counting them on the CPU checks a
GPU budget without a GPU. Counted, by kind:

* ``scalar``: ``aten::_local_scalar_dense`` (``.item()``, ``float(t)``, ``int(t)``, ``bool(t)``,
  ``if t:``), recorded by ``torch.profiler`` wherever it happens (Python or C++);
* ``nonzero``: ``aten::nonzero`` (``t.nonzero()``, boolean-mask indexing, ``torch.where(cond)``):
  its output size is known only on the host;
* ``d2h``: a tensor's data read on the host: ``.cpu()`` / ``.to("cpu")`` of a tensor, ``.numpy()``,
  ``.tolist()``, ``np.asarray(t)`` (a ``.numpy()`` of a tensor just brought to the CPU by a
  counted ``.cpu()`` is the same read and counts once: ``t.cpu().numpy()`` is one);
* ``h2d``: a host array or list made into a tensor (``torch.as_tensor`` / ``torch.tensor`` of
  numpy data or Python lists): on CUDA a pageable host-to-device copy waits for the stream.

Python-level calls are seen through a ``TorchFunctionMode``, aten ops through the profiler.

    from helpers.sync_count import count_host_syncs
    with count_host_syncs() as syncs:
        select(inst, "fw")
    syncs.total, syncs.by_kind      # e.g. 8, {"scalar": 0, "nonzero": 0, "d2h": 8, "h2d": 0}
"""
from __future__ import annotations

import weakref
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile

__all__ = ["HostSyncs", "count_host_syncs"]

_PROFILED = {"aten::_local_scalar_dense": "scalar", "aten::nonzero": "nonzero"}
_READS = {"numpy", "tolist", "__array__"}


@dataclass
class HostSyncs:
    """The host syncs of a block: ``by_kind`` (scalar, nonzero, d2h, h2d) and their ``total``."""

    by_kind: Counter = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())


def _is_cpu_target(args, kwargs) -> bool:
    """Does a ``Tensor.to`` call move to the CPU?"""
    for a in list(args[1:]) + [kwargs.get("device")]:
        if isinstance(a, (str, torch.device)) and torch.device(a).type == "cpu":
            return True
    return False


class _HostReads(TorchFunctionMode):
    def __init__(self, counts: Counter):
        super().__init__()
        self.counts = counts
        # tensors a counted .cpu() produced, by id: their next read on the host is that copy's
        self.on_host: dict[int, weakref.ref] = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        out = func(*args, **kwargs)
        t = args[0] if args else None
        if name in _READS and isinstance(t, torch.Tensor):
            ref = self.on_host.pop(id(t), None)
            if ref is None or ref() is not t:
                self.counts["d2h"] += 1
        elif name == "cpu" or (name == "to" and isinstance(t, torch.Tensor) and _is_cpu_target(args, kwargs)):
            self.counts["d2h"] += 1
            if isinstance(out, torch.Tensor):
                self.on_host[id(out)] = weakref.ref(out)
        elif name in ("as_tensor", "tensor") and args and not isinstance(args[0], torch.Tensor):
            self.counts["h2d"] += 1
        return out


@contextmanager
def count_host_syncs():
    """Count the host syncs of the block (module docstring); yields a :class:`HostSyncs`, filled
    when the block ends."""
    syncs = HostSyncs()
    with profile(activities=[ProfilerActivity.CPU]) as prof, _HostReads(syncs.by_kind):
        yield syncs
    for event in prof.events():
        kind = _PROFILED.get(event.name)
        if kind is not None:
            syncs.by_kind[kind] += 1
