"""Full-scale certificates per theta: the certified fraction of queries on a whole corpus.

``python -m divopt_rag.experiments.studies.bench_fullscale --distractors 0 --queries 20 --theta 0.5 0.6 0.7 0.8 0.9``

A certify run (:class:`divopt_rag.experiments.studies.certify.CertifySpec`) with the ``full_scale``
method alone: for each query of the ``wordnet`` dataset of :func:`divopt_rag.data.load` (the
ambiguity benchmark's passages, 502 of them, plus ``--distractors`` random WordNet noun glosses,
seeded) and each theta, :func:`divopt_rag.solvers.certificates.certify_full_scale` screens the
WHOLE corpus, bounds it and solves the survivors exactly (Gurobi within its licence, else
divopt's branch-and-bound) when at most ``--max-exact`` survive, within ``--time-limit`` seconds.
One tidy row per (query, theta) in ``OUT/results.parquet`` (and ``results.csv``); the summary
printed is the certified fraction per theta.
"""
from __future__ import annotations

import sys

from divopt_rag.data import load_wordnet
from divopt_rag.experiments.cli.arguments import run_options
from divopt_rag.experiments.cli.scripts import bench_fullscale_parser
from divopt_rag.experiments.engine import executor, store
from divopt_rag.experiments.measures import quality
from divopt_rag.experiments.studies.certify import CertifyConfig, CertifySpec, summarize_full_scale

__all__ = ["config_from_args", "main"]


def config_from_args(args) -> CertifyConfig:
    """The certify configuration of the parsed flags (:func:`~divopt_rag.experiments.cli.scripts.bench_fullscale_parser`)."""
    if args.queries < 1 or args.query_offset < 0 or args.k < 2 or args.time_limit <= 0:
        raise ValueError(f"need --queries >= 1, --query-offset >= 0, --k >= 2, --time-limit > 0; got "
                         f"{args.queries}, {args.query_offset}, {args.k}, {args.time_limit}")
    words = load_wordnet().query_ids  # the texts only: which words the offset skips
    stop = args.query_offset + args.queries
    if stop > len(words):
        raise ValueError(f"--queries + --query-offset must be <= {len(words)}, got {stop}")
    dataset = {"name": "wordnet", "distractors": args.distractors, "seed": args.seed}
    return CertifyConfig(dataset=dataset, n=args.k, k=args.k, thetas=tuple(args.theta), methods=(),
                         solver=args.exact_solver, time_limit=args.time_limit, queries=list(words[args.query_offset:stop]),
                         seed=args.seed, cache_dir=args.cache_dir, full_scale=True, max_exact=args.max_exact)


def main(argv: list[str] | None = None) -> int:
    args = bench_fullscale_parser(__doc__.split("\n")[0]).parse_args(argv)
    try:
        cfg = config_from_args(args)
        res = executor.run(CertifySpec.of(cfg), args.out, run_options(args))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    store.write_csv(res.table, res.path.with_suffix(".csv"))
    print(quality.format_table(summarize_full_scale(res.table)))
    print(f"wrote {res.path} ({len(res.table)} rows, run {res.run_id})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
