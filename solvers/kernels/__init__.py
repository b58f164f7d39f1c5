"""Compiled search kernels over a candidate pool's Gram matrix (numba, in pynndescent's manner).

Every kernel is a plain Python function compiled by :func:`~divopt_rag.solvers.kernels.jit.kernel`:
``numba.njit`` with an explicit signature, ``cache=True`` and ``nogil=True``, compiled (or loaded
from numba's on-disk cache) on its first call, never at import. The RNG state is a ``uint64``
array passed in (:mod:`~divopt_rag.solvers.kernels.rng`). The arrays a kernel takes are checked
before it runs (:func:`~divopt_rag.solvers.kernels.checks.check_pool`): a bad array is one clear
``ValueError``, never a crash inside compiled code.

The problem on a pool of p rows: G = E_P E_P^T (float64, C order), lin = theta (k-1) c_P
(:func:`divopt_rag.models.ccbqp.linear_term`), one = 1 - theta; a set S (k positions in the pool)
has f(S) = sum_S lin + one (k - sum_{S x S} G) (:func:`divopt_rag.models.ccbqp.set_value`), and
u = G[:, S] 1 is kept up to date in O(p) per swap, so a 1-swap gain is
Delta(i, j) = b_j + a_i + 2 one G_ij (:func:`divopt_rag.models.ccbqp.swap_terms`), read in O(1).

Modules: :mod:`.gains` (u, f, swap terms, applying a swap), :mod:`.moves` (greedy,
best-improvement 1-swap, tabu walk, 2-swap, perturbation), :mod:`.rng` (xorshift64*),
:mod:`.checks` (the input checks).
"""
