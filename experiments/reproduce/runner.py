"""Run a recipe: check what it needs, plan its runs, execute the missing ones with per-run
checkpoints, consolidate the tidy rows, build the paper's table and print it beside the
published numbers.

Resume works like ``divopt-rag sweep``: every run has a key (a hash of recipe, dataset, query,
method, setting and the options that change rows, :func:`~divopt_rag.experiments.reproduce.spec.run_key`);
a finished run is written to ``OUT/parts/<key>.parquet`` (``<key>.error.parquet`` if it raised)
atomically by :func:`divopt_rag.experiments.harness.write_parquet`; a restart skips the keys already
there. ``--limit N`` keeps the first N queries of each dataset: their keys are those of the
full run, which later reuses them (datasets whose pool depends on the limit put it in their key).

Files in ``OUT``: ``results.parquet`` (one row per query x method x setting, ordered as
planned, with ``run_id``, the hash of the recipe's configuration), ``table.parquet`` and
``table.csv`` (the paper's table in long form with the published value beside ours),
``config.json``.
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
import pyarrow.parquet as pq
from tqdm.auto import tqdm

from divopt_rag.experiments import harness
from divopt_rag.experiments.rag.llm import OpenAIChat

from .data import Prepared
from .published import missing, published
from .spec import MissingData, Options, Recipe, ReproduceError, Run, expand_settings, run_key
from .steps import Env

__all__ = ["ReproduceResult", "check_needs", "plan", "run_recipe", "paper_table", "format_table", "TABLE_COLUMNS"]

#: Columns of a recipe's paper table (long form), before the published values are joined.
TABLE_COLUMNS = ("table", "dataset", "setting", "method", "metric", "value")


@dataclass
class ReproduceResult:
    recipe: str
    run_id: str
    rows: pd.DataFrame            # the tidy rows (results.parquet)
    table: pd.DataFrame           # the paper's table, long form: value (ours) and published side by side
    out: Path
    n_runs: int
    n_skipped: int
    n_executed: int
    n_errors: int
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# needs and plan
# ---------------------------------------------------------------------------------------------
def check_needs(recipe: Recipe, options: Options) -> tuple[Env, list[str]]:
    """The environment of a run, or one clear error: an analogue the recipe lacks, a data file
    not on this machine (:class:`MissingData`), no LLM configured
    (:class:`~divopt_rag.experiments.rag.llm.LLMNotConfigured`), no cross-encoder for a recipe that
    cannot run without one. Returns the notes to print (rows skipped and why)."""
    notes: list[str] = []
    if options.analogue is not None and options.analogue not in recipe.analogues:
        have = ", ".join(recipe.analogues) or "none"
        raise ReproduceError(f"recipe {recipe.name!r} has no {options.analogue!r} analogue (available: {have})")
    if options.analogue is None:
        needed = [d for d in recipe.needs.data if not d.optional]
        found = [d for d in needed if d.find(options.data_dir) is not None]
        if needed and not found:
            raise MissingData(needed[0].how_to_get(options.data_dir))
        for d in needed:
            if d not in found:
                notes.append(f"skipped dataset: {d.how_to_get(options.data_dir)}")
    llm = options.llm
    wants_llm = recipe.needs.llm and not options.retrieval_only
    if recipe.needs.llm == "required" and options.retrieval_only:
        raise ReproduceError(f"recipe {recipe.name!r} reports LLM answers only: --retrieval-only leaves nothing to run")
    if wants_llm and llm is None:
        llm = OpenAIChat.from_env(cache=options.out / "llm_cache.sqlite")  # LLMNotConfigured names the variables
    if options.retrieval_only and recipe.llm_methods:
        notes.append(f"--retrieval-only: rows of {', '.join(recipe.llm_methods)} and every answer column skipped")
    if recipe.needs.cross_encoder == "required" and options.cross_encoder is None:
        raise ReproduceError(f"recipe {recipe.name!r} needs a cross-encoder: pass --cross-encoder PATH "
                             "(a local sentence-transformers CrossEncoder directory)")
    if recipe.ce_methods and options.cross_encoder is None:
        notes.append(f"no --cross-encoder: rows of {', '.join(recipe.ce_methods)} skipped")
    return Env(options=options, llm=llm if wants_llm else None, cross_encoder=options.cross_encoder), notes


def _config(recipe: Recipe, options: Options, env: Env) -> dict[str, Any]:
    cfg = {**{p: recipe.param(options, p) for p in recipe.params}, **recipe.config(options),
           "retrieval_only": bool(options.retrieval_only)}
    if env.llm is not None:
        cfg["llm"] = getattr(env.llm, "model", str(env.llm))
    if env.cross_encoder is not None and recipe.ce_methods:
        # a callable's model_id names the model (the CLI sets the directory); else its type
        cfg["cross_encoder"] = str(getattr(env.cross_encoder, "model_id", None)
                                   or getattr(env.cross_encoder, "__qualname__", None) or type(env.cross_encoder).__qualname__)
    return cfg


def plan(recipe: Recipe, options: Options, env: Env, notes: list[str] | None = None
         ) -> tuple[list[Prepared], list[Run], dict[str, Any]]:
    """Build the recipe's datasets and expand its runs (query-major, then method, then setting).
    A dataset whose data is missing is skipped (its reason appended to ``notes``)."""
    methods = {m: g for m, g in recipe.methods.items()
               if not (options.retrieval_only and m in recipe.llm_methods)
               and not (env.cross_encoder is None and m in recipe.ce_methods)}
    if not methods:
        raise ReproduceError(f"recipe {recipe.name!r}: no method left to run with these options")
    settings = expand_settings(methods, recipe.grid, options.overrides, tuple(recipe.params))
    config = _config(recipe, options, env)
    prepared: list[Prepared] = []
    first_missing: MissingData | None = None
    for ds_plan in recipe.datasets(options):
        try:
            prepared.append(ds_plan.build(options))
        except MissingData as exc:
            if options.analogue is not None:
                raise
            first_missing = first_missing or exc
            if notes is not None and not any(str(exc) in n for n in notes):
                notes.append(f"skipped dataset: {exc}")
    if not prepared:
        if first_missing is not None:
            raise first_missing
        raise ReproduceError(f"recipe {recipe.name!r}: no dataset to run")
    runs: list[Run] = []
    for prep in prepared:
        for qi in prep.queries:
            qid = prep.data.query_ids[qi]
            for method, setting in settings:
                key = run_key(recipe.name, prep.key, qid, method, setting, config)
                runs.append(Run(index=len(runs), dataset=prep.label, dataset_key=prep.key, query_index=qi,
                                query_id=qid, method=method, setting=tuple(setting.items()), key=key))
    return prepared, runs, config


# ---------------------------------------------------------------------------------------------
# execution
# ---------------------------------------------------------------------------------------------
def _finished(parts: Path) -> set[str]:
    """Keys with a finished part (``<key>.parquet``; error parts are run again)."""
    return {p.name[: -len(".parquet")] for p in parts.glob("*.parquet")
            if not p.name.startswith(".") and not p.name.endswith(".error.parquet")}


def _execute(recipe: Recipe, prep: Prepared, run: Run, env: Env, run_id: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": run_id, "run_key": run.key, "run_index": run.index, "recipe": recipe.name,
        "dataset": run.dataset, "analogue": prep.analogue, "query_index": run.query_index, "query_id": run.query_id,
        "method": run.method, "setting": json.dumps(run.params, sort_keys=True), **run.params,
    }
    try:
        out = recipe.execute(prep, run, env)
    except (ReproduceError, MissingData, KeyboardInterrupt):
        raise
    except Exception as exc:  # a failed run is a row too: visible in the table, run again on resume
        row.update(status="error", error=f"{type(exc).__name__}: {exc}")
        return row
    row.update(status="ok", error="", **out)
    return row


def _consolidate(out: Path, runs: list[Run]) -> pd.DataFrame:
    parts = out / "parts"
    frames = []
    for run in runs:
        for name in (f"{run.key}.parquet", f"{run.key}.error.parquet"):
            p = parts / name
            if p.exists():
                frames.append(pq.read_table(p).to_pandas().assign(run_index=run.index))
                break
    table = pd.concat(frames, ignore_index=True, sort=False) if frames else pd.DataFrame()
    harness.write_parquet(table, out / "results.parquet")
    return pq.read_table(out / "results.parquet").to_pandas()


def run_recipe(recipe: Recipe, options: Options) -> ReproduceResult:
    """Run (or resume) ``recipe`` with ``options`` into ``options.out``; see the module docstring.
    One run per output folder at a time (:func:`divopt_rag.experiments.harness.output_lock`)."""
    with harness.output_lock(options.out):
        return _run_recipe(recipe, options)


def _run_recipe(recipe: Recipe, options: Options) -> ReproduceResult:
    env, notes = check_needs(recipe, options)
    prepared, runs, config = plan(recipe, options, env, notes)
    run_id = harness.run_id({"recipe": recipe.name, **config, "datasets": [p.key for p in prepared],
                             "overrides": {k: list(v) for k, v in options.overrides.items()}, "seed": options.seed})
    out = options.out
    parts = out / "parts"
    parts.mkdir(parents=True, exist_ok=True)
    harness.remove_stale_temporaries(parts)  # half-written parts of a killed run (never a live writer's)
    harness.write_text(json.dumps({"recipe": recipe.name, "run_id": run_id, "config": config, "n_runs": len(runs),
                                   "limit": options.limit, "analogue": options.analogue}, indent=2, default=str),
                       out / "config.json")
    by_key = {p.key: p for p in prepared}
    # a run whose previous attempt raised is run again; a finished one is skipped
    done = _finished(parts)
    todo = [r for r in runs if r.key not in done]
    n_errors = 0
    bar = tqdm(total=len(runs), initial=len(runs) - len(todo), desc=recipe.name, unit="run",
               disable=not options.progress)
    try:
        for run in todo:
            bar.set_postfix_str(f"{run.dataset} {run.query_id} {run.method}", refresh=False)
            row = _execute(recipe, by_key[run.dataset_key], run, env, run_id)
            ok = row["status"] == "ok"
            n_errors += not ok
            harness.write_parquet(pd.DataFrame([row]), parts / (f"{run.key}.parquet" if ok else f"{run.key}.error.parquet"))
            if ok:
                (parts / f"{run.key}.error.parquet").unlink(missing_ok=True)
            bar.update(1)
    finally:
        bar.close()
    rows = _consolidate(out, runs)
    table = paper_table(recipe, rows)
    harness.write_parquet(table, out / "table.parquet")
    harness.write_text(table.to_csv(index=False), out / "table.csv")
    ok = rows[rows["status"] == "ok"] if len(rows) and "status" in rows else rows.iloc[0:0]
    if recipe.plot is not None and len(ok):
        notes += [f"figure: {p}" for p in recipe.plot(ok, out, options) if str(p).endswith(".png")]
    return ReproduceResult(recipe=recipe.name, run_id=run_id, rows=rows, table=table, out=out, n_runs=len(runs),
                           n_skipped=len(runs) - len(todo), n_executed=len(todo), n_errors=n_errors, notes=notes)


# ---------------------------------------------------------------------------------------------
# the paper's table, side by side
# ---------------------------------------------------------------------------------------------
def paper_table(recipe: Recipe, rows: pd.DataFrame) -> pd.DataFrame:
    """``recipe.table`` of the finished rows (``value``), with the published value
    (``published``, its ``qualifier`` and ``source``) joined on (table, dataset, setting, method, metric); published cells the run did
    not reach are kept with ``value`` NaN, so the print shows them too."""
    ok = rows[rows["status"] == "ok"] if len(rows) and "status" in rows else rows.iloc[0:0]
    long = recipe.table(ok) if len(ok) else pd.DataFrame(columns=list(TABLE_COLUMNS))
    missing_cols = [c for c in TABLE_COLUMNS if c not in long.columns]
    if missing_cols:
        raise TypeError(f"recipe {recipe.name!r}: table() must return columns {list(TABLE_COLUMNS)}, lacks {missing_cols}")
    long = long[list(TABLE_COLUMNS)].astype({"value": float})
    pub = published(recipe.paper_key)
    tables = set(recipe.published_tables)
    pub = pub[pub["table"].isin(tables)] if tables else pub.iloc[0:0]
    pub = pub.rename(columns={"value": "published"})[["table", "dataset", "setting", "method", "metric", "published",
                                                        "qualifier", "source"]]
    keys = ["table", "dataset", "setting", "method", "metric"]
    merged = long.merge(pub, on=keys, how="left")  # the recipe's order, then the published cells not reached
    unreached = pub.merge(long[keys], on=keys, how="left", indicator=True)
    unreached = unreached[unreached["_merge"] == "left_only"].drop(columns="_merge").assign(value=float("nan"))
    merged = pd.concat([merged, unreached[merged.columns]], ignore_index=True) if len(unreached) else merged
    merged["delta"] = merged["value"] - merged["published"]
    return merged.reset_index(drop=True)


def _cell(v: float, p: float, q: Any) -> str:
    ours = "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return ours
    mark = {"up_to": "<=", "range_low": ">=", "range_high": "<="}.get(q, "")
    return f"{ours} | {mark}{p:.4g}"


def format_table(recipe: Recipe, table: pd.DataFrame) -> str:
    """The paper's table as text, one block per table id: rows and columns as ``recipe.layout``,
    each cell ``ours | paper`` (``ours`` alone where no number is published)."""
    if table.empty:
        return "(no finished rows)"
    index, columns = (list(x) for x in recipe.layout)
    t = table.copy()
    t["cell"] = [_cell(v, p, q) for v, p, q in zip(t["value"], t["published"], t["qualifier"])]
    for c in index + columns:  # keep the order of appearance (the recipe's), not the alphabet
        t[c] = pd.Categorical(t[c].fillna(""), categories=list(dict.fromkeys(t[c].fillna(""))), ordered=True)
    blocks = []
    for tid, part in t.groupby("table", sort=False):
        piv = part.pivot_table(index=index, columns=columns, values="cell", aggfunc="first", observed=True)
        with pd.option_context("display.width", 250, "display.max_columns", 60, "display.max_colwidth", 40):
            blocks.append(f"== {recipe.paper}, {tid} (cells: ours | published) ==\n{piv.fillna('').to_string()}")
    return "\n\n".join(blocks)


def print_report(recipe: Recipe, result: ReproduceResult, stream: TextIO | None = None) -> None:
    """The summary line, the notes, the table side by side and the published numbers known missing
    (to ``stream``, default standard output)."""
    stream = sys.stdout if stream is None else stream
    print(f"{recipe.name} {result.run_id}: {result.n_runs} runs ({result.n_skipped} already done, "
          f"{result.n_executed} run now, {result.n_errors} errors) -> {result.out / 'results.parquet'}", file=stream)
    for note in result.notes:
        print(f"note: {note}", file=stream)
    if len(result.rows) and "analogue" in result.rows and result.rows["analogue"].astype(bool).any():
        print("note: ANALOGUE data (offline stand-in), not the paper's experiment: published numbers are not "
              "comparable and are not joined", file=stream)
    print(format_table(recipe, result.table), file=stream)
    gaps = missing(recipe.paper_key)
    tables = set(recipe.published_tables)
    gaps = gaps[gaps["table"].isin(tables)] if tables else gaps.iloc[0:0]
    for _, g in gaps.iterrows():
        print(f"published number missing: {g['table']}: {g['what']} ({g['reason']})", file=stream)
