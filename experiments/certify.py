"""``divopt-rag certify``: every fast selector against exact CCBQP optima, per query and theta.

For each query: the pool is the top-n passages by relevance (c = E q); for each theta of the
grid, every selector of :func:`divopt_rag.solvers.instance_methods` (or ``methods``) runs on the pool and the exact optimum
is computed (enumeration for small pools, else :func:`divopt_rag.solvers.exact.solve_exact`,
warm-started from the best fast selection). One tidy row per (query, theta, method), plus one
``method == "exact"`` row, with

* ``objective`` f of the selection, ``optimum`` (the best value known: the exact incumbent, or a
  selector's value if one beats it), ``bound`` (proven upper bound), ``proven_optimal`` and
  ``exact_status`` of the exact solve;
* ``gap``, ``gap_kind``, ``gap_to_bound`` and ``exact_hit`` by the one rule of
  :mod:`divopt_rag.experiments.harness`: (OPT - f) / (k (k-1)) when the exact solve is proven
  optimal (``gap_kind == "exact"``; hit when <= 1e-9), otherwise (time limit) measured against
  the bound, an upper bound on the true gap (``gap_kind == "upper_bound"``, hit unknown unless f
  meets the bound), never called exact;
* ``seconds``, ``iterations``, ``selected_ids`` (passage ids, in the selector's order), the
  metrics of :func:`divopt_rag.experiments.metrics.selection_metrics` (recall, ndcg, ilad, ...),
  and ``run_id``.

With ``--full-scale`` each (query, theta) is also certified on the WHOLE corpus by
:func:`divopt_rag.solvers.certificates.certify_full_scale` (safe screening, upper bounds, exact
solve of a small screened pool), written to ``<out>_fullscale.parquet``.

Datasets come from :func:`divopt_rag.data.load`: "synthetic" (query i is the planted query of its own
narrow-cone corpus of ``--corpus-size`` rows, seed + i) or any registered dataset as NAME or
NAME:ARG (toy, wordnet[:N_WORDS], beir:PATH, mini-wikipedia:PATH, rgb:PATH, npz:PATH, ...),
embedded with ``--model`` (default: the offline all-MiniLM-L6-v2).

Finished queries are checkpointed atomically under ``<out>.parts/<run_id>/``: re-running the
same command (same run id, a hash of the configuration unless ``--run-id`` is given) skips
them and loses no finished work.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pandas as pd

from divopt_rag.data import load as load_dataset
from divopt_rag.data import parse_spec, stable_hash
from divopt_rag.experiments import harness
from divopt_rag.models import Instance
from divopt_rag.models.runner import DEFAULT_TIME_LIMIT
from divopt_rag.models.validation import check_k, check_scalar, check_theta

__all__ = ["CertifyConfig", "QueryData", "dataset_spec", "load_queries", "certify_query", "run_certify", "summarize",
           "summarize_full_scale", "add_arguments", "main"]


@dataclass
class CertifyConfig:
    """Everything that defines a certification run (its hash is the default run id)."""

    dataset: str = "synthetic"
    n: int = 20
    k: int = 5
    thetas: tuple[float, ...] = (0.3, 0.5, 0.7, 0.9)
    methods: tuple[str, ...] | None = None  # None: every registered selector
    solver: str = "auto"
    time_limit: float | None = DEFAULT_TIME_LIMIT
    queries: int | None = 5
    corpus_size: int = 2000  # synthetic corpora
    dim: int = 64  # synthetic corpora
    seed: int = 0
    model: str | None = None
    cache_dir: str | None = None
    full_scale: bool = False
    max_exact: int = 1000  # full scale: Gurobi within its licence, else divopt's bnb (no size limit)
    fw_max_iter: int = 500  # full scale: iterations of the concave FW bound
    sigma: float | None = None  # Dartboard score metric (O(n k d) per row); None: skipped

    def __post_init__(self) -> None:
        # up front, naming the option: `queries=0` read as "all" (1 synthetic corpus) and a
        # negative max_exact / fw_max_iter passed silently until a full-scale run used them
        for name, low in (("n", 1), ("k", 1), ("queries", 1), ("corpus_size", 1), ("dim", 1), ("max_exact", 1),
                          ("fw_max_iter", 1), ("seed", 0)):
            setattr(self, name, check_scalar(getattr(self, name), name, int, min_val=low,
                                             allow_none=name == "queries"))
        if self.time_limit is not None:
            self.time_limit = check_scalar(self.time_limit, "time_limit", float, min_val=0)

    def run_id(self) -> str:
        """:func:`divopt_rag.experiments.harness.run_id` of the configuration (the cache folder aside)."""
        return harness.run_id(dataclasses.asdict(self), exclude=("cache_dir",))


@dataclass
class QueryData:
    """One query over the whole corpus: its instance (relevance = E q), qrels and subtopics."""

    query_id: str
    instance: Instance
    qrels: dict | None = None
    subtopics: dict | None = None
    dataset: str = ""


# --------------------------------------------------------------------------------------------
# data sources
# --------------------------------------------------------------------------------------------
def dataset_spec(cfg: CertifyConfig) -> dict[str, Any]:
    """The :func:`divopt_rag.data.load` spec of ``cfg.dataset``: "synthetic" is one narrow-cone corpus
    of ``corpus_size`` x ``dim`` per query (seed + i, every passage labelled by its cluster);
    anything else is a registered dataset (NAME or NAME:ARG) embedded with ``model``."""
    if cfg.dataset == "synthetic":
        return {"name": "synthetic", "n": cfg.corpus_size, "d": cfg.dim, "n_queries": cfg.queries or 1,
                "seed": cfg.seed, "subtopics": "all"}
    spec = parse_spec(cfg.dataset)
    spec.update({k: v for k, v in (("model", cfg.model), ("embed_cache", cfg.cache_dir)) if v is not None})
    return spec


def load_queries(cfg: CertifyConfig) -> Iterator[QueryData]:
    """Yield the queries of ``cfg.dataset`` (at most ``cfg.queries``), each over its whole pool
    (see :func:`dataset_spec`); qrels keep the relevant passages (grade >= 1)."""
    data = load_dataset(dataset_spec(cfg))
    n_queries = data.n_queries if not cfg.queries else min(cfg.queries, data.n_queries)
    for i in range(n_queries):
        inst, _ = harness.query_instance(data, i)
        qid = data.query_ids[i]
        relevant = {d: g for d, g in (data.qrels or {}).get(qid, {}).items() if g >= 1}
        yield QueryData(qid, inst.replace(k=min(cfg.k, inst.n), theta=cfg.thetas[0]), relevant or None,
                        (data.subtopics or {}).get(qid) or None, data.name)


# --------------------------------------------------------------------------------------------
# one query
# --------------------------------------------------------------------------------------------
def certify_query(qd: QueryData, cfg: CertifyConfig, run_id: str, methods: list[str]) -> tuple[list[dict], list[dict]]:
    """Rows for one query: (pool rows per (theta, method), full-scale rows per theta)."""
    from divopt_rag.experiments.metrics import selection_metrics
    from divopt_rag.solvers.certificates import certify_full_scale
    from divopt_rag.solvers.exact import exact_optimum
    from divopt_rag.solvers import select

    full = qd.instance
    n = min(cfg.n, full.n)
    pool, orig = full.top_n(n)
    k = check_k(cfg.k, n)
    pool = pool.replace(k=k)
    ids = pool.ids
    rows: list[dict] = []
    full_rows: list[dict] = []
    for theta in cfg.thetas:
        inst = pool.replace(theta=check_theta(theta))
        base = {"run_id": run_id, "dataset": qd.dataset, "query_id": qd.query_id, "theta": float(theta),
                "k": k, "n": n, "corpus_size": full.n}
        sels = []
        for m in methods:
            try:
                s = select(inst, m)
                sels.append((m, s, None))
            except Exception as exc:  # a failing selector is a row that says so, not a lost run
                sels.append((m, None, f"{type(exc).__name__}: {exc}"))
        ok = [s for _, s, e in sels if e is None]
        warm = max(ok, key=lambda s: s.objective).indices if ok else None
        ex = exact_optimum(inst, cfg.solver, time_limit=cfg.time_limit, warm_start=warm)
        bound = math.inf if ex.bound is None else ex.bound  # proven solves always carry a bound
        proven = ex.proven_optimal
        opt = harness.best_known(ex.objective, [s.objective for s in ok])

        def row(method, idx, f, seconds, iterations, error=None):
            r = dict(base, method=method, objective=f, optimum=opt, bound=bound, proven_optimal=proven,
                     exact_status=ex.status, exact_solver=ex.solver, seconds=seconds, iterations=iterations,
                     error=error)
            r.update(harness.gap_record(f, optimum=opt, bound=bound, proven=proven, k=k))
            if f is None:
                r["selected_ids"] = []
                return r
            r["selected_ids"] = [str(ids[i]) for i in idx]
            r.update(selection_metrics(inst, idx, qrels=qd.qrels, subtopics=qd.subtopics, sigma=cfg.sigma,
                                       ids=ids))
            return r

        for m, s, err in sels:
            if err is not None:
                rows.append(row(m, None, None, math.nan, 0, err))
            else:
                rows.append(row(m, s.indices, s.objective, s.seconds, s.iterations))
        if ex.indices.size:
            rows.append(row("exact", ex.indices, ex.objective, ex.seconds, 0))
        if cfg.full_scale:
            cert = certify_full_scale(full.replace(theta=float(theta), k=k), max_exact=cfg.max_exact,
                                      exact_solver=cfg.solver, time_limit=cfg.time_limit,
                                      fw_max_iter=cfg.fw_max_iter)
            fr = dict(base, **cert.as_row())
            fr["incumbent_ids"] = [str(full.ids[i]) for i in cert.incumbent]
            # the pool optimum is a lower bound on the full-scale optimum
            fr["pool_optimum"] = opt
            full_rows.append(fr)
    return rows, full_rows


# --------------------------------------------------------------------------------------------
# the run (checkpointed per query)
# --------------------------------------------------------------------------------------------
def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if "exact_hit" in df:
        df["exact_hit"] = df["exact_hit"].astype("boolean")
    return df


def _safe_name(qid: str) -> str:
    return stable_hash(qid, 16)


def run_certify(cfg: CertifyConfig, out: str | os.PathLike, *, run_id: str | None = None,
                progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Certify every selector on ``cfg`` and write ``out`` (and ``<out>_fullscale.parquet``).

    Resumable: finished queries live in ``<out>.parts/<run_id>/`` and are skipped on a re-run.
    One run at a time per output: the run holds the lock of ``<out>.parts``
    (:func:`divopt_rag.experiments.harness.output_lock`; a second one gets OutputLocked naming it),
    and a table of another run already at ``out`` is kept beside as ``<stem>.<run id>.parquet``.
    Returns (pool table, full-scale table or None).
    """
    from divopt_rag.solvers import METHODS, instance_methods

    methods = list(cfg.methods) if cfg.methods else instance_methods()  # no cross-encoder methods by default
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; expected names from {sorted(METHODS)}")
    if not cfg.thetas:
        raise ValueError("thetas must hold at least one value in [0, 1]")
    for t in cfg.thetas:
        check_theta(t)
    run_id = run_id or cfg.run_id()
    out = Path(out)
    with harness.output_lock(out.with_name(out.name + ".parts")):  # one certify run per output at a time
        return _run_locked(cfg, out, run_id, methods, progress)


def _keep_previous(path: Path, run_id: str) -> None:
    """A table of another run at ``path`` is kept beside as ``<stem>.<its run id><suffix>``
    (with a warning), never silently replaced."""
    if not path.exists():
        return
    try:
        old = pd.read_parquet(path, columns=["run_id"])["run_id"]
    except Exception:  # noqa: BLE001  (unreadable or foreign: keep it too)
        old = pd.Series(["unknown"])
    old_id = str(old.iloc[0]) if len(old) else "empty"
    if old_id != run_id:
        kept = path.with_name(f"{path.stem}.{old_id}{path.suffix}")
        os.replace(path, kept)
        warnings.warn(f"{path} held run {old_id}: kept as {kept}", UserWarning, stacklevel=3)


def _run_locked(cfg: CertifyConfig, out: Path, run_id: str, methods: list[str],
                progress: bool) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    from tqdm.auto import tqdm

    parts = out.with_name(out.name + ".parts") / run_id
    parts.mkdir(parents=True, exist_ok=True)
    harness.write_text(json.dumps(dataclasses.asdict(cfg), default=str, indent=1), parts / "config.json")
    bar = tqdm(desc=f"certify {cfg.dataset}", unit="query", total=cfg.queries, disable=not progress)
    done_files = []
    for qd in load_queries(cfg):
        main_part = parts / f"{_safe_name(qd.query_id)}.parquet"
        if not main_part.exists():
            rows, full_rows = certify_query(qd, cfg, run_id, methods)
            if full_rows:
                harness.write_parquet(_frame(full_rows), parts / f"{_safe_name(qd.query_id)}.full.parquet")
            harness.write_parquet(_frame(rows), main_part)  # written last: its presence marks the query done
        done_files.append(main_part)
        bar.update(1)
    bar.close()
    if not done_files:
        raise ValueError(f"nothing to certify: dataset {cfg.dataset!r} gave no query")
    df = pd.concat([pd.read_parquet(p) for p in done_files], ignore_index=True)
    _keep_previous(out, run_id)
    harness.write_parquet(df, out)
    full_df = None
    if cfg.full_scale:
        fparts = [p.with_name(p.name.replace(".parquet", ".full.parquet")) for p in done_files]
        full_df = pd.concat([pd.read_parquet(p) for p in fparts if p.exists()], ignore_index=True)
        _keep_previous(out.with_name(out.stem + "_fullscale.parquet"), run_id)
        harness.write_parquet(full_df, out.with_name(out.stem + "_fullscale.parquet"))
    return df, full_df


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per (theta, method), the exact rows aside: :func:`divopt_rag.experiments.harness.quality_summary`
    (rows, unproven, hit rate, mean / p95 / max gap, seconds)."""
    return harness.quality_summary(df[df["method"] != "exact"], ["theta", "method"])


def summarize_full_scale(full_df: pd.DataFrame) -> pd.DataFrame:
    """Per theta: fraction certified optimal at full scale, survivors, bound gap of the rest."""
    g = full_df.groupby("theta", sort=True)
    return pd.DataFrame({
        "queries": g.size(),
        "certified_fraction": g["certified"].mean(),
        "median_survivors": g["n_survivors"].median(),
        "mean_bound_gap_uncertified": g.apply(
            lambda x: x.loc[~x["certified"], "bound_gap"].mean() if (~x["certified"]).any() else 0.0,
            include_groups=False),
    }).reset_index()


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default="synthetic",
                   help="synthetic (--corpus-size, --dim) or a divopt_rag.data dataset NAME[:ARG]: toy | wordnet[:N_WORDS] "
                        "| beir:PATH | mini-wikipedia:PATH | rgb:PATH | npz:PATH")
    p.add_argument("--model", default=None, help="sentence-transformers model (path or name); default offline MiniLM")
    p.add_argument("--cache-dir", default=None, help="embedding cache directory")
    p.add_argument("--n", type=int, default=20, help="pool size: top-n passages by relevance per query")
    p.add_argument("--k", type=int, default=5, help="selection size")
    p.add_argument("--theta", type=float, nargs="+", default=[0.3, 0.5, 0.7, 0.9], help="theta grid")
    p.add_argument("--methods", nargs="+", default=None, help="selectors (default: every registered one)")
    p.add_argument("--solver", default="auto", choices=["auto", "brute", "gurobi", "scip", "highs"],
                   help="exact solver (auto: enumeration for small pools, else the first MIP solver that fits)")
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, help="seconds per exact solve")
    p.add_argument("--queries", type=int, default=5, help="number of queries (synthetic: corpora)")
    p.add_argument("--corpus-size", type=int, default=2000, help="synthetic corpus size")
    p.add_argument("--dim", type=int, default=64, help="synthetic embedding dimension")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--full-scale", action="store_true", help="also certify each query on the whole corpus")
    p.add_argument("--max-exact", type=int, default=1000,
                   help="full scale: solve the survivors exactly (Gurobi within its licence, else divopt's bnb) "
                        "when <= this many survive")
    p.add_argument("--fw-max-iter", type=int, default=500, help="full scale: iterations of the concave FW bound")
    p.add_argument("--sigma", type=float, default=None, help="also compute the Dartboard score with this sigma")
    p.add_argument("--out", default="results/certify.parquet", help="output parquet")
    p.add_argument("--run-id", default=None, help="run id (default: hash of the configuration; reuse to resume)")
    p.add_argument("--no-progress", action="store_true")


def config_from_args(args: argparse.Namespace) -> CertifyConfig:
    return CertifyConfig(
        dataset=args.dataset, n=args.n, k=args.k, thetas=tuple(args.theta),
        methods=tuple(args.methods) if args.methods else None, solver=args.solver, time_limit=args.time_limit,
        queries=args.queries, corpus_size=args.corpus_size, dim=args.dim, seed=args.seed, model=args.model,
        cache_dir=args.cache_dir, full_scale=args.full_scale, max_exact=args.max_exact, sigma=args.sigma,
        fw_max_iter=args.fw_max_iter,
    )


def main(args: argparse.Namespace) -> int:
    """Bad input raises (the CLI entry point prints one line, exit code 2); selectors that
    failed on some rows give exit code 1 with their most frequent reasons on stderr."""
    cfg = config_from_args(args)
    df, full_df = run_certify(cfg, args.out, run_id=args.run_id, progress=not args.no_progress)
    pd.set_option("display.width", 160)
    print(f"run {df['run_id'].iloc[0]}: {df['query_id'].nunique()} queries, {len(df)} rows -> {args.out}")
    unproven = int((~df.loc[df.method == 'exact', 'proven_optimal'].astype(bool)).sum())
    if unproven:
        print(f"WARNING: {unproven} exact solve(s) not proven optimal: their gaps are upper bounds (gap_kind=upper_bound)")
    print(summarize(df).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if full_df is not None:
        print("\nfull-scale certificates:")
        print(summarize_full_scale(full_df).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    failed = df[df["error"].notna() & (df["error"] != "")] if "error" in df else df.iloc[:0]
    if len(failed):
        rows = int((df["method"] != "exact").sum())
        print(f"divopt-rag certify: {len(failed)} of {rows} selector runs failed; most frequent reasons:", file=sys.stderr)
        for text, count in failed["error"].astype(str).value_counts().head(3).items():
            print(f"  {count} x {text}", file=sys.stderr)
        return 1
    return 0
