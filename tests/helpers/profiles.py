"""Score profiles for DF-RAG's lambda search, shared by tests/experiments/rag/test_dfrag.py and
benchmarks/dfrag_tie_rules.py (the generator is checked against brute force in the tests)."""
import numpy as np


def weakly_unimodal(n: int, top: int) -> np.ndarray:
    """Every weakly unimodal profile (non-decreasing, then non-increasing; plateaus allowed) of n
    integer scores in 0..top, as rows of an array: a non-decreasing run, then a non-increasing one."""
    out = []

    def grow(seq, falling):
        if len(seq) == n:
            out.append(seq)
            return
        for v in range(top + 1):
            if not (falling and v > seq[-1]):  # no rise after a fall
                grow(seq + [v], falling or v < seq[-1])

    for v in range(top + 1):
        grow([v], False)
    return np.array(out)
