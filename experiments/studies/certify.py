"""``divopt-rag certify``: every fast selector against exact CCBQP optima, per query and theta.

A certify run is a sweep (:class:`~divopt_rag.experiments.studies.sweep.SweepSpec`) whose grid is fixed
by :class:`CertifyConfig`: for each query the pool is the top-``n`` passages by relevance
(c = E q, the ``pool`` setting); for each theta every selector of
:func:`divopt_rag.solvers.instance_methods` (or ``methods``) runs on it, and so does the method
``exact`` (:func:`divopt_rag.experiments.methods.exact`: enumeration for small pools, else
:func:`divopt_rag.solvers.exact.solve_exact` within ``time_limit``, warm-started from divopt's
default method). The one executor checkpoints every row, resumes after a kill and consolidates
``OUT/results.parquet``: one tidy row per (query, theta, method), the ``exact`` row included,
with the columns of every sweep (``objective``, ``seconds``, ``iterations``, ``n``,
``selected``, the metrics ``recall@k``, ``ndcg@k``, ``ilad``, ...) and, from the post-step over
the consolidated table (:func:`divopt_rag.experiments.measures.quality.exact_gaps`, the one rule):

* ``optimum`` (the best value known: the exact incumbent, or a selector's value if one beats
  it), the exact row's ``bound`` and ``proven_optimal``, its ``exact_status`` / ``exact_solver``;
* ``gap``, ``gap_kind``, ``bound_gap`` and ``exact_hit``: (OPT - f) / (k (k-1)) when the exact
  solve is proven optimal (``gap_kind == "exact"``; a hit when <= EXACT_HIT_TOL = 1e-9),
  otherwise (time limit) measured against the bound, an upper bound on the true gap
  (``gap_kind == "upper_bound"``, hit unknown unless f meets the bound), never called exact.

With ``--full-scale`` each (query, theta) is also certified on the query's WHOLE pool by the
method ``full_scale`` (:func:`divopt_rag.solvers.certificates.certify_full_scale`: safe screening,
upper bounds, an exact solve of a small screened pool): rows with ``method == "full_scale"``
(``certified``, ``certificate``, ``bound``, ``bound_gap``, ``n_survivors``, ...) and, from this
command's post-step, ``pool_optimum`` (the top-n pool's optimum, a lower bound on the whole
pool's).

Datasets come from :func:`divopt_rag.data.load`: "synthetic" (query i is the planted query of its
own narrow-cone corpus of ``--corpus-size`` rows, seed + i) or any registered dataset as NAME or
NAME:ARG (toy, wordnet[:N_WORDS], beir:PATH, mini-wikipedia:PATH, rgb:PATH, npz:PATH, ...),
embedded with ``--model`` (default: the offline all-MiniLM-L6-v2).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from divopt_rag.data import parse_spec
from divopt_rag.experiments.cli import flag_checks
from divopt_rag.experiments.cli.arguments import run_options
from divopt_rag.experiments.engine import consolidate, executor, limits, store
from divopt_rag.experiments.engine.options import RunOptions
from divopt_rag.experiments.engine.plan import RunResult
from divopt_rag.experiments.measures import quality, tables
from divopt_rag.experiments.studies.grid import SweepConfig
from divopt_rag.experiments.studies.sweep import SweepSpec
from divopt_rag.models.solve_config import DEFAULT_TIME_LIMIT
from divopt_rag.models.validation import check_scalar, check_theta
from divopt_rag.solvers import instance_methods

__all__ = ["CertifyConfig", "CertifySpec", "check_exact_solver", "dataset_spec", "run_certify", "summarize", "summarize_full_scale",
           "main", "NOT_SELECTORS"]

#: Rows of a certify table that are not fast selectors (left out of the selector summary).
NOT_SELECTORS = ("exact", "full_scale")


@dataclass
class CertifyConfig:
    """Everything that defines a certification run (its hash is the run id).

    dataset : "synthetic", a registered dataset as NAME or NAME:ARG, or a
    :func:`divopt_rag.data.load` spec mapping. queries : the first N queries, or a list of query
    ids (None: all; synthetic: the number of corpora). solver, time_limit, mip_gap, threads :
    the exact solve's. The rest as the command line's flags.
    """

    dataset: str | dict = "synthetic"
    n: int = 20
    k: int = 5
    thetas: tuple[float, ...] = (0.3, 0.5, 0.7, 0.9)
    methods: tuple[str, ...] | None = None  # None: every selector that runs on an Instance alone; (): none
    solver: str = "auto"
    time_limit: float | None = DEFAULT_TIME_LIMIT
    queries: int | list[str] | None = 5
    corpus_size: int = 2000  # synthetic corpora
    dim: int = 64  # synthetic corpora
    seed: int = 0
    model: str | None = None
    cache_dir: str | None = None
    full_scale: bool = False
    max_exact: int = 1000  # full scale: Gurobi within its licence, else divopt's bnb (no size limit)
    fw_max_iter: int = 500  # full scale: iterations of the concave FW bound
    sigma: float | None = None  # Dartboard score metric (O(n k d) per row); None: skipped
    mip_gap: float | None = None  # exact solve: relative MIP gap (None: the solver's)
    threads: int | None = None  # exact solve: solver threads (None: the solver's)

    def __post_init__(self) -> None:
        # up front, naming the option: `queries=0` read as "all" (1 synthetic corpus) and a
        # negative max_exact / fw_max_iter passed silently until a full-scale run used them
        for name, low in (("n", 1), ("k", 1), ("corpus_size", 1), ("dim", 1), ("max_exact", 1),
                          ("fw_max_iter", 1), ("seed", 0)):
            setattr(self, name, check_scalar(getattr(self, name), name, int, min_val=low))
        if not isinstance(self.queries, (list, tuple)):
            self.queries = check_scalar(self.queries, "queries", int, min_val=1, allow_none=True)
        else:
            self.queries = [str(q) for q in self.queries]
        if self.time_limit is not None:
            self.time_limit = check_scalar(self.time_limit, "time_limit", float, min_val=0)
        if self.k > self.n:
            raise ValueError(f"k must be <= n (the pool size), got k = {self.k} > n = {self.n}")
        if not self.thetas:
            raise ValueError("thetas must hold at least one value in [0, 1]")
        self.thetas = tuple(check_theta(t) for t in self.thetas)
        if self.methods is not None and not self.methods and not self.full_scale:
            raise ValueError("nothing to certify: no method and no --full-scale")

    def to_dict(self) -> dict[str, Any]:
        """The configuration that determines the rows (the embedding cache folder aside)."""
        d = dataclasses.asdict(self)
        d.pop("cache_dir")
        return d

    def run_id(self) -> str:
        """:func:`divopt_rag.experiments.engine.store.run_id` of the configuration."""
        return store.run_id(self.to_dict())


def dataset_spec(cfg: CertifyConfig) -> dict[str, Any]:
    """The :func:`divopt_rag.data.load` spec of ``cfg.dataset``: "synthetic" is one narrow-cone corpus
    of ``corpus_size`` x ``dim`` per query (seed + i, every passage labelled by its cluster);
    anything else is a registered dataset (NAME, NAME:ARG or a spec mapping) embedded with ``model``."""
    if cfg.dataset == "synthetic":
        n_queries = cfg.queries if isinstance(cfg.queries, int) else 1
        return {"name": "synthetic", "n": cfg.corpus_size, "d": cfg.dim, "n_queries": n_queries,
                "seed": cfg.seed, "subtopics": "all"}
    spec = parse_spec(cfg.dataset)
    spec.update({k: v for k, v in (("model", cfg.model), ("embed_cache", cfg.cache_dir)) if v is not None})
    return spec


def sweep_config(cfg: CertifyConfig) -> SweepConfig:
    """The sweep a certify run is: selectors and ``exact`` (and ``full_scale`` on the whole
    pool) at k, every theta and pool = n."""
    exact = {"solver": [cfg.solver], "time_limit": [cfg.time_limit]}
    exact.update({p: [v] for p, v in (("mip_gap", cfg.mip_gap), ("threads", cfg.threads)) if v is not None})
    selectors = instance_methods() if cfg.methods is None else list(cfg.methods)
    methods: dict[str, dict[str, list]] = {m: {} for m in selectors}
    if selectors:  # the reference of the selectors' gaps
        methods["exact"] = exact
    if cfg.full_scale:
        methods["full_scale"] = {"pool": [None], "max_exact": [cfg.max_exact], "solver": [cfg.solver],
                                 "time_limit": [cfg.time_limit], "fw_max_iter": [cfg.fw_max_iter]}
    return SweepConfig(dataset=dataset_spec(cfg), methods=methods,
                       grid={"k": [cfg.k], "theta": list(cfg.thetas), "pool": [cfg.n]},
                       queries=None if cfg.dataset == "synthetic" and not isinstance(cfg.queries, list) else cfg.queries,
                       seed=cfg.seed, metrics={"sigma": cfg.sigma})


@dataclass
class CertifySpec(SweepSpec):
    """The run spec of ``divopt-rag certify``: the sweep of :func:`sweep_config`, recorded as
    its :class:`CertifyConfig`, plus the ``pool_optimum`` of the full-scale rows."""

    certify: CertifyConfig | None = None
    command: ClassVar[str] = "certify"
    backends: ClassVar[tuple[str, ...]] = ("inline", "local", "ray")

    @classmethod
    def of(cls, cfg: CertifyConfig) -> "CertifySpec":
        return cls(sweep=sweep_config(cfg), certify=cfg)

    def config(self) -> dict[str, Any]:
        return self.certify.to_dict()

    def check(self) -> None:
        unknown = [m for m in (self.certify.methods or ()) if m in NOT_SELECTORS]
        if unknown:
            raise ValueError(f"--methods {unknown}: certify adds the exact solve (and --full-scale) itself; "
                             f"name fast selectors only")
        check_exact_solver(self.certify)
        super().check()

    def finish(self, table: pd.DataFrame, out: Path) -> pd.DataFrame:
        table = super().finish(table, out)
        full = table["method"].eq("full_scale") if "method" in table else pd.Series(dtype=bool)
        if not full.any():
            return table
        # the top-n pool's optimum is a lower bound on the whole pool's (a check of the certificate)
        pool = table[~full & table["method"].eq("exact")].set_index(["query_id", "k", "theta"])["optimum"]
        table["pool_optimum"] = [pool.get((q, k, t), float("nan")) if f else float("nan")
                                 for q, k, t, f in zip(table["query_id"], table["k"], table["theta"], full)]
        return table


def check_exact_solver(cfg: CertifyConfig) -> None:
    """The exact rows' solver must take the top-n pool's model at every theta: a refusal known
    from sizes alone (the size-limited Gurobi licence, HiGHS without MIQP:
    :func:`divopt_rag.solvers.exact.licence_refusal`, the rule ``solve_exact`` applies) is a
    :class:`~divopt_rag.experiments.engine.limits.UsageError` naming ``--solver``, before any work."""
    from divopt_rag.models.domains import SOLVERS

    selectors = instance_methods() if cfg.methods is None else list(cfg.methods)
    if cfg.solver not in SOLVERS or not selectors or cfg.k == 1:  # no exact row, or no MIP solver
        return
    from divopt_rag.solvers.exact import licence_refusal  # loads Pyomo, as the exact rows will

    for theta in cfg.thetas:
        why = licence_refusal(cfg.solver, cfg.n, theta)
        if why is not None:
            raise limits.UsageError("--solver", f"a solver that takes the exact model of the top-{cfg.n} pool",
                                    repr(cfg.solver), f"at theta {theta:g}: {why}; use --solver auto or bnb, "
                                    f"or a smaller --n")


def run_certify(cfg: CertifyConfig, out: str | Path, options: RunOptions | None = None, **fields: Any) -> RunResult:
    """Certify every selector on ``cfg`` into the folder ``out`` (resumable; ``options`` /
    ``fields``: the run's :class:`~divopt_rag.experiments.engine.options.RunOptions`, as
    :func:`divopt_rag.experiments.engine.executor.run` takes them). Default backend: this process."""
    return executor.run(CertifySpec.of(cfg), out, options, **fields)


def selector_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The fast selectors' rows of a certify table (the exact and full-scale rows aside)."""
    return df[~df["method"].isin(NOT_SELECTORS)]


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per method and every setting that varies (theta, k, pool, dataset, ...), the exact and
    full-scale rows aside: :func:`divopt_rag.experiments.measures.quality.quality_summary` (rows,
    unproven, hit rate, mean / p95 / max gap, seconds)."""
    rows = selector_rows(df)
    return quality.quality_summary(rows, [*tables.varying_settings(rows), "method"])


def summarize_full_scale(df: pd.DataFrame) -> pd.DataFrame:
    """Per theta (and every other setting that varies): fraction certified optimal at full
    scale, median survivors, mean bound gap of the queries not certified. Reads the
    ``full_scale`` rows (or a table of them)."""
    full = df[df["method"] == "full_scale"] if "method" in df else df
    keys = [*tables.varying_settings(full, exclude=("theta",)), "theta"]
    rows = []
    for values, g in full.groupby(keys, sort=True):
        certified = g["certified"].astype(bool)
        rest = g.loc[~certified, "bound_gap"]
        rows.append({**dict(zip(keys, values if isinstance(values, tuple) else (values,))), "queries": len(g),
                     "certified_fraction": float(certified.mean()), "median_survivors": float(g["n_survivors"].median()),
                     "mean_bound_gap_uncertified": float(rest.mean()) if len(rest) else 0.0})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def check_model(model: str | None, flag: str = "--model") -> None:
    """A ``--model`` must be one this machine has: the default (None or its alias), a local
    sentence-transformers folder, or a name in the local Hugging Face cache (no download
    happens offline). :class:`~divopt_rag.experiments.engine.limits.UsageError` naming the flag otherwise."""
    if model is None or os.path.isdir(os.path.expanduser(model)):
        return
    from divopt_rag.data.embed import DEFAULT_MODEL_ID

    if model in (DEFAULT_MODEL_ID, DEFAULT_MODEL_ID.split("/")[-1], "default"):
        return
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = isinstance(try_to_load_from_cache(model, "config.json"), str)
    except Exception:  # noqa: BLE001  (not a repository name at all, or no hub client)
        cached = False
    if not cached:
        raise limits.UsageError(flag, "a local sentence-transformers folder or a model in the local Hugging Face "
                                "cache", repr(model), "no such folder, and no such model in the cache")


def config_from_args(args) -> CertifyConfig:
    return CertifyConfig(
        dataset=args.dataset, n=args.n, k=args.k, thetas=tuple(args.theta),
        methods=tuple(args.methods) if args.methods else None, solver=args.solver,
        time_limit=DEFAULT_TIME_LIMIT if args.time_limit is None else args.time_limit,
        queries=args.queries, corpus_size=args.corpus_size, dim=args.dim, seed=args.seed, model=args.model,
        cache_dir=args.cache_dir, full_scale=args.full_scale, max_exact=args.max_exact, sigma=args.sigma,
        fw_max_iter=args.fw_max_iter,
    )


def main(args) -> int:
    """Bad input raises (the CLI entry point prints one line, exit code 2), an exact solver that
    cannot take the pool's model included (:func:`check_exact_solver`); any row that failed (a
    selector, the exact solve, a full-scale certificate) gives exit code 1 with the most frequent
    reasons on stderr."""
    check_model(args.model)
    cfg = config_from_args(args)
    if cfg.methods:
        flag_checks.check_methods(cfg.methods, "--methods")
    if cfg.dataset != "synthetic":
        with limits.naming("--dataset"):
            spec = dataset_spec(cfg)
        flag_checks.check_dataset(spec, "--dataset")
    opts = run_options(args)  # n_workers None: in this process, as every command (RunOptions)
    res = run_certify(cfg, args.out, opts)
    df = res.table
    for note in res.notes:
        print(f"note: {note}")
    print(f"certify {res.run_id}: {df['query_id'].nunique()} queries, {res.n_runs} runs ({res.n_skipped} already "
          f"done, {res.n_executed} run now) -> {res.path}")
    exact = df[(df.method == "exact") & df.status.eq("ok")]
    unproven = int((~exact["proven_optimal"].astype(bool)).sum())
    if unproven:
        print(f"WARNING: {unproven} exact solve(s) not proven optimal: their gaps are upper bounds (gap_kind=upper_bound)")
    print(quality.format_table(summarize(df)))
    if (df["method"] == "full_scale").any():
        print("\nfull-scale certificates:")
        print(quality.format_table(summarize_full_scale(df)))
    print(f"wrote {res.path}")  # the last line: where the results are (issue 49)
    # every row counts: a failed exact solve leaves its selectors' gaps unknown (NaN), never a clean table
    return consolidate.report_errors("divopt-rag certify", df, len(df), what="runs")
