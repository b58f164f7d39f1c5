"""divopt's mmr against LangChain's maximal_marginal_relevance on real MiniLM WordNet glosses
(issue 40, item 5): the calls whose picks differ, and whether every difference is between
bitwise-identical rows. Run it with a checkout's own Python to compare two versions:

    python benchmarks/mmr_ties_wordnet.py OUT.json      # writes the counts, prints them

Corpus: load_wordnet_glosses(n_queries=20, corpus_size=30000) embedded with the offline
all-MiniLM-L6-v2 (float32, cached in ~/.cache/divopt); per query word the top-1000 pool by
cosine, k = 10, theta 0.5 and 0.7 (the issue's setting); LangChain gets the same float32 rows.
"""
import json
import sys

import numpy as np
from langchain_core.vectorstores.utils import maximal_marginal_relevance

import divopt_rag.solvers as solvers
from divopt_rag.data.embed import embed, embed_queries
from divopt_rag.data.wordnet import load_wordnet_glosses
from divopt_rag.models import Instance
from divopt_rag.solvers import select

ds = load_wordnet_glosses(n_queries=20, corpus_size=30000, seed=0)
E = embed(ds.texts, cache_dir="~/.cache/divopt", show_progress=False)
Q = embed_queries(ds.queries, cache_dir="~/.cache/divopt", show_progress=False)
out = {"code": solvers.__file__, "calls": 0, "differ": {}, "differ_not_identical_rows": 0}
for theta in (0.5, 0.7):
    differ = 0
    for qi in range(len(Q)):
        q = Q[qi]
        pool = np.argsort(-(E @ q), kind="stable")[:1000]
        P = E[pool]
        ours = select(Instance(P, q, k=10, theta=theta, normalize=True), "mmr").indices.tolist()
        theirs = [int(i) for i in maximal_marginal_relevance(q, P, lambda_mult=theta, k=10)]
        out["calls"] += 1
        if ours != theirs:
            differ += 1
            a, b = next((a, b) for a, b in zip(ours, theirs) if a != b)
            out["differ_not_identical_rows"] += int(not np.array_equal(P[a], P[b]))
    out["differ"][str(theta)] = differ
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out))
