"""Plain float64 transcriptions of the Dartboard paper (Pickett et al. 2024, arXiv 2407.12101).

Written from the paper's definitions, not from divopt's code: the set score (or its marginal
gain) is recomputed from scratch for every candidate (no running maxima), Gaussian log-densities come from
scipy.stats.norm and log-sum-exp / log-softmax from scipy.special. Everything is float64.

    s(G, q, A, sigma) = sum_{t in A} P(T = t | q, sigma) max_{g in G} P(T = t | g, sigma)
    A = the top-100 passages by KNN cosine; greedy: first the passage closest to the query, then
    the passage that maximizes s of the enlarged set.
"""
import numpy as np
from scipy.special import log_softmax, logsumexp
from scipy.stats import norm

TRIAGE = 100
CE_LO, CE_HI = -11.6, 11.4  # logit range of ms-marco-MiniLM-L-6-v2 used to rescale cross-encoder scores


def triage(E, q, K=TRIAGE):
    """A: the top-K rows by cosine to q (unit rows: the inner product), ties to the lower index."""
    cos = np.asarray(E, np.float64) @ np.asarray(q, np.float64)
    return np.argsort(-cos, kind="stable")[: min(K, cos.size)]


def cosine_distance(X, Y):
    """D = 1 - (cos + 1)/2, clipped to [0, 1]."""
    return np.clip(1.0 - (np.asarray(X, np.float64) @ np.asarray(Y, np.float64).T + 1.0) / 2.0, 0.0, 1.0)


def ce_distance(s):
    """Cross-encoder score -> distance in [0, 1] over the model's logit range."""
    return (CE_HI - np.asarray(s, np.float64)) / (CE_HI - CE_LO)


def log_set_score(log_p_q, log_p_pair, G):
    """log s(G) = log sum_t P(t | q) max_{g in G} P(t | g), in log space."""
    return logsumexp(log_p_q + np.max(log_p_pair[list(G), :], axis=0))


def log_gains(log_p_q, log_p_pair, G):
    """log (s(G + g) - s(G)) for every g: log sum_t P(t | q) (P(t | g) - max_{h in G} P(t | h))_+ .

    The greedy's argmax_g s(G + g) is the argmax of this gain. Comparing log s(G + g) itself
    is float noise once s(G) holds nearly all the mass (every candidate rounds to log s(G)),
    so the gain, a sum of non-negative terms, is what is compared.
    """
    cover = np.max(log_p_pair[list(G), :], axis=0)[None, :]
    up = log_p_pair > cover
    with np.errstate(divide="ignore", invalid="ignore"):
        excess = log_p_pair + np.log(-np.expm1(np.where(up, cover - log_p_pair, -1.0)))  # log (P - C)
        return logsumexp(np.where(up, log_p_q[None, :] + excess, -np.inf), axis=1)


def greedy(log_p_q, log_p_pair, k, *, by="gain"):
    """The paper's greedy: first the passage closest to the query (argmax P(t | q)), then
    argmax_g s(G + g) (``by="gain"``: via the marginal gain; ``by="score"``: log s(G + g)
    compared directly). Ties to the lower position. Positions in A."""
    G = [int(np.argmax(log_p_q))]
    while len(G) < k:
        if by == "gain":
            vals = log_gains(log_p_q, log_p_pair, G)
        else:
            vals = np.array([log_set_score(log_p_q, log_p_pair, G + [g]) for g in range(len(log_p_q))])
        vals[G] = -np.inf
        free = [g for g in range(len(log_p_q)) if g not in G]
        G.append(int(np.argmax(vals)) if np.isfinite(vals).any() else free[0])
    return G


def dartboard_cosine(E, q, k, sigma, K=TRIAGE):
    """Dartboard with cosine distances: P(t | x) = N(D(x, t); 0, sigma^2) for x = q and x = g."""
    A = triage(E, q, K)
    F = np.asarray(E, np.float64)[A]
    log_p_q = norm.logpdf(cosine_distance(F, np.asarray(q, np.float64)[None, :])[:, 0], 0.0, sigma)
    log_p_pair = norm.logpdf(cosine_distance(F, F), 0.0, sigma)
    return A[greedy(log_p_q, log_p_pair, k)].tolist()


def dartboard_hybrid(E, q, ce_q, k, sigma, K=TRIAGE):
    """Hybrid: P(t | q) = softmax_t(CE(q, t) / sigma) over A; P(t | g) = 1 - D(g, t) (cosine)."""
    A = triage(E, q, K)
    F = np.asarray(E, np.float64)[A]
    log_p_q = log_softmax(np.asarray(ce_q, np.float64)[A] / sigma)
    with np.errstate(divide="ignore"):
        log_p_pair = np.log(1.0 - cosine_distance(F, F))
    return A[greedy(log_p_q, log_p_pair, k)].tolist()


def dartboard_cc(E, q, ce_q, ce_pair, k, sigma, K=TRIAGE):
    """D-CC: Gaussians on rescaled cross-encoder distances for the query and (symmetrized) pairs."""
    A = triage(E, q, K)
    P = np.asarray(ce_pair, np.float64)[np.ix_(A, A)]
    log_p_q = norm.logpdf(ce_distance(np.asarray(ce_q, np.float64)[A]), 0.0, sigma)
    log_p_pair = norm.logpdf(ce_distance((P + P.T) / 2.0), 0.0, sigma)
    return A[greedy(log_p_q, log_p_pair, k)].tolist()


def knn_cc(E, q, ce_q, k, K=TRIAGE):
    """KNN-CC: A sorted by the cross-encoder score, best first (ties keep the cosine order)."""
    A = triage(E, q, K)
    return A[np.argsort(-np.asarray(ce_q, np.float64)[A], kind="stable")[:k]].tolist()


def mmr_cc(E, q, ce_q, ce_pair, k, diversity, K=TRIAGE):
    """The paper's MMR on cross-encoder distances: minimize, over the enlarged set S,
    (1 - diversity) * mean_{i in S} d(q, i) - diversity * sum_{i < j in S} d(i, j) / |S|^2."""
    A = triage(E, q, K)
    P = np.asarray(ce_pair, np.float64)[np.ix_(A, A)]
    dq, D = ce_distance(np.asarray(ce_q, np.float64)[A]), ce_distance((P + P.T) / 2.0)

    def cost(S):
        pairs = sum(D[S[a], S[b]] for a in range(len(S)) for b in range(a + 1, len(S)))
        return (1 - diversity) * np.mean(dq[S]) - diversity * pairs / len(S) ** 2

    S = [int(np.argmin(dq))]
    while len(S) < k:
        best, arg = np.inf, None
        for g in range(len(A)):
            if g in S:
                continue
            v = cost(S + [g])
            if v < best:
                best, arg = v, g
        S.append(arg)
    return A[S].tolist()


def normalized_set_score(E, q, S, sigma):
    """log s(S) of the cosine Dartboard with P(t | q) normalized over the rows of E (A = all rows)."""
    E = np.asarray(E, np.float64)
    log_p_q = norm.logpdf(cosine_distance(E, np.asarray(q, np.float64)[None, :])[:, 0], 0.0, sigma)
    log_p_pair = norm.logpdf(cosine_distance(E, E), 0.0, sigma)
    return log_set_score(log_p_q - logsumexp(log_p_q), log_p_pair, S)
