"""mmr_lazy before and after the tie band (issue 40, item 5): row refreshes (deterministic work) and
seconds on a narrow-cone pool; run with each checkout's Python, results in benchmarks/results/mmr_ties/."""
import sys, time, json, numpy as np, torch
from divopt_rag.models import Instance
from divopt_rag.solvers import select
import divopt_rag.solvers as s
torch.set_num_threads(1)
out = []
for seed in (0, 1):
    rng = np.random.default_rng(seed)
    n, d = 100_000, 384
    c = rng.standard_normal(d); c /= np.linalg.norm(c)
    E = (c + 0.6 * rng.standard_normal((n, d)) / np.sqrt(d)).astype(np.float32)  # narrow cone
    q = (c + 0.3 * rng.standard_normal(d) / np.sqrt(d)).astype(np.float32)
    inst = Instance(E, q, k=50, theta=0.5, normalize=True)
    for theta in (0.5, 0.9):
        inst = Instance(E, q, k=50, theta=theta, normalize=True)
        t = time.perf_counter(); sel = select(inst, "mmr_lazy"); dt = time.perf_counter() - t
        out.append({"seed": seed, "theta": theta, "refreshed": sel.info["refreshed"], "rounds": sel.info["rounds"], "s": round(dt, 3), "idx": sel.indices.tolist()[:5]})
print(s.__file__); print(json.dumps(out))
