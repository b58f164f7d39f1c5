"""xorshift64* (Vigna 2016) over a ``uint64`` state array passed in: the kernels draw from it and
advance it, so a seed gives the same draws at every call, in compiled and in plain Python code."""
from __future__ import annotations

import numpy as np

from .jit import kernel

__all__ = ["rng_state", "next_u64", "below"]

_MUL = 0x2545F4914F6CDD1D


def rng_state(seed: int) -> np.ndarray:
    """A fresh state (1,) uint64 from ``seed`` (splitmix64 of it, never 0)."""
    z = (int(seed) + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    z ^= z >> 31
    return np.array([z or 1], dtype=np.uint64)


@kernel("uint64(uint64[::1])")
def next_u64(state):
    """The next draw; advances ``state[0]``."""
    x = state[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    state[0] = x
    return x * np.uint64(_MUL)


@kernel("int64(uint64[::1], int64)", uses=(next_u64,))
def below(state, n):
    """A draw in [0, n) (n >= 1; the high bits, by multiply-shift)."""
    return np.int64((next_u64(state) >> np.uint64(33)) * np.uint64(n) >> np.uint64(31))
