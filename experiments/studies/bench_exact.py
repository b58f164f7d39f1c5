"""``divopt-rag bench exact``: time to prove CCBQP optimality per solver on real-embedding pools.

Corpus: WordNet noun glosses (Debian wordnet-base), the ``wordnet`` dataset of
:func:`divopt_rag.data.load`: the passages of the WordNet ambiguity benchmark (glosses and
examples of every sense of ambiguous nouns such as "bank", "bass", "crane" and of their
hyponyms) plus ``--extra-glosses`` randomly drawn noun glosses (seeded) as distractors,
embedded with the offline all-MiniLM-L6-v2 (cached on disk under ``--cache-dir``). Queries are the ambiguous
words. For each (query, n, k, theta) the pool is the top-n of the query's relevance c = E q
and every solver proves (or fails to prove within ``--time-limit``) the CCBQP optimum with
its default formulation (``divopt_rag.solvers.exact.DEFAULT_FORMULATION``).

A run spec of the one executor (:class:`ExactBenchSpec`, inline and sequential: a timing
benchmark): one task per (query, n, k, theta, solver/formulation), method ``exact`` with the
solver and formulation as its parameters; one tidy row each with the solver's status
(``exact_status``: "optimal", "time_limit", ... or "skipped" when the solver refused the model,
with the reason in ``message``), ``proven_optimal``, ``objective``, ``bound``, ``relative_gap``
(the solver's (bound - f) / |f|), ``bound_gap`` ((bound - f) / (k (k-1))), times in seconds and
the model's size; the post-step cross-checks that every proven optimum of an instance equals the
best incumbent (``agrees``). The data key is a hash of the embeddings and queries themselves.
Writes ``results.parquet`` and ``results.csv`` to the ``--out`` folder. The default grid
finishes in a few minutes on 2 cores; the issue's full grid is ``--n 50 100 200 --k 5 10 20
--theta 0.3 0.5 0.7 0.9`` (or ``--full``).
"""
from __future__ import annotations

import os
import platform
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from divopt_rag.data import load as load_dataset
from divopt_rag.data.hashing import fingerprint
from divopt_rag.experiments.cli.arguments import run_options
from divopt_rag.experiments.engine import consolidate, executor, store
from divopt_rag.experiments.engine.plan import Plan, RunSpec, Task, make_task
from divopt_rag.experiments.measures import quality, tables
from divopt_rag.models import Instance, objective_scale
from divopt_rag.models.solver_limits import SolverRefused
from divopt_rag.solvers import available_solvers, select, solve_exact
from divopt_rag.solvers.exact import DEFAULT_FORMULATION

__all__ = ["load_corpus", "ExactBenchSpec", "run", "summarize", "main", "FULL_GRID"]

FULL_GRID = {"n": [50, 100, 200], "k": [5, 10, 20], "theta": [0.3, 0.5, 0.7, 0.9]}




def load_corpus(n_queries: int, extra: int, seed: int, cache_dir: str | None):
    """(passage embeddings P, query embeddings Q, query words, number of passages)."""
    data = load_dataset({"name": "wordnet", "distractors": extra, "seed": seed, "embed_cache": cache_dir})
    if n_queries > data.n_queries:
        raise ValueError(f"--queries (+ --query-offset) must be <= {data.n_queries} (the ambiguity benchmark's "
                         f"words), got {n_queries}")
    words = data.query_texts[:n_queries]
    return (np.asarray(data.E, dtype=np.float64), np.asarray(data.Q[:n_queries], dtype=np.float64), words,
            data.E.shape[0])


@dataclass
class ExactBenchSpec(RunSpec):
    """The exact-solver benchmark (module docstring): one task per (query, n, k, theta, engine)."""

    grid: dict[str, list]
    engines: list[tuple[str, str]]
    queries: int
    query_offset: int = 0
    time_limit: float = 30.0
    threads: int | None = None
    warm_start: str = "none"
    extra_glosses: int = 1500
    seed: int = 0
    cache_dir: str | None = field(default=None, metadata={"config": False})
    log_dir: str | None = field(default=None, metadata={"config": False})
    command: ClassVar[str] = "bench-exact"

    def row_config(self) -> dict[str, Any]:
        return {"time_limit": self.time_limit, "threads": self.threads, "warm_start": self.warm_start}

    def check(self) -> None:
        from divopt_rag.data.wordnet import DEFAULT_WORDS
        from divopt_rag.models.mip_ccbqp import FORMULATIONS
        from divopt_rag.models.mip_qcr import QCR_FORMULATIONS

        installed = available_solvers() + ["bnb"]  # divopt's own branch-and-bound needs no licence
        unknown = sorted({s for s, _ in self.engines} - set(installed))
        if unknown:
            from divopt_rag.models.names import did_you_mean

            hint = did_you_mean(unknown[0], installed)
            raise ValueError(f"--solvers {unknown} not installed; {hint}available: {installed}")
        known = sorted({"auto", "qcr_dnn", *FORMULATIONS, *QCR_FORMULATIONS})
        bad = sorted({f for _, f in self.engines} - set(known))
        if bad:
            raise ValueError(f"--formulation / --solvers SOLVER/FORMULATION: expected one of {known}, got {bad}")
        if self.time_limit <= 0:
            raise ValueError(f"--time-limit must be > 0, got {self.time_limit}")
        if self.query_offset < 0:
            raise ValueError(f"--query-offset must be >= 0, got {self.query_offset}")
        if self.queries < 1 or self.query_offset + self.queries > len(DEFAULT_WORDS):
            raise ValueError(f"--queries + --query-offset: expected 1 to {len(DEFAULT_WORDS)} (the ambiguity "
                             f"benchmark's words), got {self.queries} + {self.query_offset}")
        if not any(k < n for n in self.grid["n"] for k in self.grid["k"]):
            raise ValueError(f"--k: expected a size < some --n {self.grid['n']}, got {self.grid['k']}")

    def plan(self, out: Path) -> Plan:
        P, Q, words, n_pass = load_corpus(self.query_offset + self.queries, self.extra_glosses, self.seed,
                                          self.cache_dir)
        Q, words = Q[self.query_offset:], list(words[self.query_offset:])
        label, key = f"wordnet-glosses-{n_pass}", fingerprint([P, Q])[:16]
        # a pool larger than the corpus is capped to it, said in a note, and recorded at the size
        # it ran (n), beside the size asked for (n_requested); the same capped size runs once
        sizes = {n: min(int(n), n_pass) for n in self.grid["n"]}
        capped = sorted(n for n, m in sizes.items() if m < n)
        notes = [f"--n {', '.join(map(str, capped))}: larger than the {n_pass} passages of the pool, capped: "
                 f"runs at n = {n_pass} (column n_requested: the size asked for)"] if capped else []
        tasks = []
        for qi, word in enumerate(words):
            for n in dict.fromkeys(sizes.values()):
                asked = max(r for r, m in sizes.items() if m == n)
                for k in self.grid["k"]:
                    for th in self.grid["theta"]:
                        if k >= n:
                            continue
                        for solver, form in self.engines:
                            form = DEFAULT_FORMULATION[solver] if form == "auto" else form
                            tasks.append(make_task(len(tasks), config_hash=self.config_hash, data_key=key,
                                                   query_id=word, method="exact",
                                                   params={"n": n, "k": k, "theta": th, "solver": solver,
                                                           "formulation": form},
                                                   dataset=label, query_index=qi, n_requested=asked))
        return Plan(tasks=tasks, data=(P, Q), data_keys={label: key}, notes=notes)

    def execute(self, state: tuple[np.ndarray, np.ndarray], task: Task) -> dict[str, Any]:
        P, Q = state
        p, qi = task.params, int(task.extra["query_index"])
        full = Instance(P, Q[qi], k=int(p["k"]), theta=float(p["theta"]), normalize=True)
        inst, orig = full.top_n(min(int(p["n"]), full.n))
        row = dict(time_limit=self.time_limit, threads=self.threads, warm_start=self.warm_start,
                   machine=f"{platform.processor() or platform.machine()} x{os.cpu_count()} cores",
                   load_avg_1min=os.getloadavg()[0])
        warm = select(inst, "fw") if self.warm_start == "fw" else None
        log = None if self.log_dir is None else str(Path(self.log_dir) / f"{task.key}.log")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                r = solve_exact(inst, p["solver"], time_limit=self.time_limit, formulation=p["formulation"],
                                warm_start=warm, threads=self.threads, log_path=log)
        except SolverRefused as exc:  # measured on the built model (license size, MIQP for HiGHS)
            return {**row, "exact_status": "skipped", "message": exc.reason}
        has = r.bound is not None and r.objective is not None
        return {
            **row, "exact_status": r.status, "proven_optimal": r.proven_optimal, "objective": r.objective,
            "bound": r.bound, "relative_gap": r.gap,
            "bound_gap": (r.bound - r.objective) / objective_scale(int(p["k"])) if has else np.nan,
            "seconds": r.seconds, "wall_seconds": r.info.get("wall_seconds", r.seconds),
            "build_seconds": r.info.get("build_seconds"),
            "nodes": r.info.get("nodes"), "n_vars": r.info.get("n_vars"),
            "n_constraints": r.info.get("n_constraints"), "solver_version": r.info.get("solver_version"),
            "selected": [str(int(orig[i])) for i in r.indices], "message": r.message,
        }

    def finish(self, table: pd.DataFrame, out: Path) -> pd.DataFrame:
        """Cross-check: every proven optimum of an instance must agree with the best incumbent."""
        if table.empty or "objective" not in table:
            return table
        key = ["query_id", "n", "k", "theta"]
        best = table.groupby(key)["objective"].transform("max")
        table = table.assign(best_objective=best)
        proven = table["proven_optimal"].astype("boolean").fillna(False).astype(bool)
        table["agrees"] = pd.array([bool(np.isclose(o, b, rtol=1e-6, atol=1e-6)) if p else pd.NA
                                    for o, b, p in zip(table["objective"], best, proven)], dtype="boolean")
        return table


def spec_from_args(args) -> ExactBenchSpec:
    grid = FULL_GRID if args.full else {"n": list(args.n), "k": list(args.k), "theta": list(args.theta)}
    engines = available_solvers() + ["bnb"]
    pairs = [tuple(x.split("/", 1)) if "/" in x else (x, args.formulation) for x in (args.solvers or engines)]
    return ExactBenchSpec(grid=grid, engines=pairs, queries=args.queries,
                          query_offset=getattr(args, "query_offset", 0), time_limit=args.time_limit,
                          threads=args.threads, warm_start=args.warm_start, extra_glosses=args.extra_glosses,
                          seed=args.seed, cache_dir=args.cache_dir, log_dir=args.log_dir)


def run(args) -> pd.DataFrame:
    """The benchmark's table (run into ``args.out``)."""
    return executor.run(spec_from_args(args), args.out, run_options(args)).table


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Median wall seconds to proof (the whole call, model building and the QCR SDP included;
    censored at the time limit) and proof rate per engine (solver, formulation) and every
    setting that varies (n, k, theta)."""
    if "exact_status" not in df:  # every solve failed: nothing to summarize
        return pd.DataFrame()
    d = df[df["exact_status"].notna() & (df["exact_status"] != "skipped")].copy()
    proven = d["proven_optimal"].astype("boolean").fillna(False).astype(bool)
    wall = d["wall_seconds"] if "wall_seconds" in d else d["seconds"]
    d["seconds_censored"] = np.where(proven, wall, np.inf)
    d["_proven"] = proven
    keys = ["solver", "formulation", *[c for c in tables.varying_settings(d) if c not in ("solver", "formulation")]]
    rows = []
    for values, g in d.groupby(keys, sort=True):
        rows.append({**dict(zip(keys, values)), "instances": len(g), "proven": int(g["_proven"].sum()),
                     "median_seconds": float(g["seconds_censored"].median()),
                     "max_proven_seconds": float(g.loc[g["_proven"], "seconds_censored"].max()) if g["_proven"].any()
                     else np.nan,
                     "median_relative_gap_open": float(g.loc[~g["_proven"], "relative_gap"].median())
                     if (~g["_proven"]).any() else np.nan})
    return pd.DataFrame(rows)


def main(args) -> int:
    """Exit code 0; 1 when proven optima disagree or some solves failed (reasons on stderr)."""
    spec = spec_from_args(args)
    spec.check()  # names and sizes before the corpus is embedded
    res = executor.run(spec, args.out, run_options(args))
    for note in res.notes:
        print(f"note: {note}")
    df = res.table
    store.write_csv(df, res.path.with_suffix(".csv"))
    summary = summarize(df)
    if not summary.empty:
        print(quality.format_table(summary))
    print(f"wrote {res.path} and {res.path.with_suffix('.csv')} ({len(df)} rows, run {res.run_id})")
    if "agrees" in df and (df["agrees"] == False).any():  # noqa: E712
        print("WARNING: proven optima disagree between solvers; see the 'agrees' column")
        return 1
    return consolidate.report_errors("divopt-rag bench exact", df, res.n_runs, what="solves")
