"""The CCBQP paper's Algorithm 1 in plain float64 numpy: the truth "fw" is checked against."""
import numpy as np


def algorithm1_transcription(E, q, k, theta, lam=2.0, max_iter=200, tol=None):
    """The CCBQP paper's Algorithm 1, transcribed in plain float64 numpy from the paper (not from
    divopt): x0 = (k/n) 1; repeat <= 200 times: gradient of f_lambda, top-k linear oracle,
    FW gap, exact line search on the quadratic; return the top-k of x (as a set)."""
    E, q = np.asarray(E, dtype=np.float64), np.asarray(q, dtype=np.float64)
    n = E.shape[0]
    W, c = E @ E.T, E @ q
    tol = 1e-6 * k * (k - 1) if tol is None else tol
    x = np.full(n, k / n)
    for _ in range(max_iter):
        g = theta * (k - 1) * c + 2 * (1 - theta) * (lam * x - W @ x)
        s = np.zeros(n)
        s[np.argsort(-g, kind="stable")[:k]] = 1.0
        d = s - x
        gap = g @ d
        if gap <= tol:
            break
        C = 2 * (1 - theta) * (lam * d @ d - d @ W @ d)
        gamma = 1.0 if C >= 0 else min(1.0, -gap / C)
        x = x + gamma * d
    return set(np.argsort(-x, kind="stable")[:k].tolist()), x
