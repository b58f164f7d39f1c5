"""Run a recipe: check what it needs, plan its runs, hand them to the one executor, build the
paper's table and print it beside the published numbers.

A recipe becomes a run spec (:class:`RecipeSpec`) of :mod:`divopt_rag.experiments.engine.executor`, which
checkpoints every run (query x method x setting) as a part file, resumes after a kill without
redoing a finished run, locks the output folder and consolidates ``OUT/results.parquet``; error
rows are run again on every run. Run keys are the executor's
(:func:`~divopt_rag.experiments.engine.plan.run_key`): a hash of the recipe's row-changing options,
the content each query reads (:func:`content_key`: the passages it chooses from, its embedding,
labels and answers, so a changed file runs again exactly the rows that read what changed), the
query, the method and the setting. ``--limit N`` keeps the first N queries of each dataset: their keys are those of the
full run, which later reuses them in the same folder (datasets whose pool depends on the limit
have other content, hence other keys); the limit is not part of the run's configuration.

Files in ``OUT``: ``results.parquet`` (one row per query x method x setting, ordered as
planned, with ``run_id``, the hash of the recipe's configuration), ``table.parquet`` and
``table.csv`` (the paper's table in long form with the published value beside ours),
``config.json``, ``parts/``.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TextIO

import numpy as np
import pandas as pd

from divopt_rag.data.hashing import fingerprint
from divopt_rag.experiments.engine import executor, store
from divopt_rag.experiments.engine.limits import BASE_BYTES, check_memory
from divopt_rag.experiments.engine.plan import Plan, RunSpec, Task, make_task
from divopt_rag.experiments.rag.llm import LLMNotConfigured, OpenAIChat

from .data import Prepared
from .published import missing, published
from .spec import MissingData, Options, Recipe, ReproduceError, Run, expand_settings
from .steps import Env

__all__ = ["ReproduceResult", "RecipeSpec", "check_needs", "plan", "run_recipe", "paper_table", "format_table",
           "content_key", "TABLE_COLUMNS"]

#: Columns of a recipe's paper table (long form), before the published values are joined.
TABLE_COLUMNS = ("table", "dataset", "setting", "method", "metric", "value")
#: Columns a recipe's table may add: ``chosen``, the grid setting a "best over the grid" value was taken at.
OPTIONAL_COLUMNS = ("chosen",)


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
    # the flags before the data: a bad --set value is refused even where the data is missing
    expand_settings(recipe.methods, recipe.grid, options.overrides, tuple(recipe.params))
    for p in recipe.params:
        recipe.param(options, p)
    if recipe.memory is not None:  # the sizes --set asks for, before anything is built
        check_memory(BASE_BYTES + recipe.memory(options), f"recipe {recipe.name!r}", "--set", "use smaller sizes")
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


def _digest(*parts: Any) -> str:
    """16 hex of the parts' content: the project's one content hash
    (:func:`~divopt_rag.data.hashing.fingerprint`: arrays by dtype, shape and bytes)."""
    return fingerprint(list(parts))[:16]


def content_key(prep: Prepared, query_index: int | None = None, corpus: str | None = None) -> str:
    """A hash of what a recipe's rows read from a dataset: the spec key (model, options), the
    passages the query chooses from (its candidate pool's embeddings and ids, or the whole
    corpus's), the query's embedding, qrels, subtopic labels and answers. ``query_index=None``:
    of the whole dataset (every query). ``corpus``: the whole corpus's digest, when already known.

    Per query, so that a changed file runs again exactly the rows that read what changed: a
    query with its own passages (RGB, LongBench) is untouched by another query's change, and the
    first N queries of a limited run read what they read in the full run."""
    d, ds = prep.data, prep.dataset
    if query_index is None:
        return _digest(prep.key, np.asarray(d.Q, np.float32), [content_key(prep, i, corpus) for i in prep.queries])
    qid = d.query_ids[query_index]
    if d.pools is not None:
        rows = np.asarray(d.pools[query_index])
        passages = _digest(np.asarray(d.E[rows], np.float32), [str(x) for x in d.doc_ids[rows]])
    else:
        passages = corpus or _digest(np.asarray(d.E, np.float32), [str(x) for x in d.doc_ids])
    labels = {"qrels": (d.qrels or {}).get(qid), "subtopics": (d.subtopics or {}).get(qid),
              "answers": None if ds is None else (getattr(ds, "answers", None) or {}).get(qid),
              "groups": None if ds is None else (getattr(ds, "answer_groups", None) or {}).get(qid),
              "question": None if d.query_texts is None else d.query_texts[query_index]}
    return _digest(prep.key, passages, np.asarray(d.Q[query_index], np.float32), labels)


def plan(recipe: Recipe, options: Options, env: Env, notes: list[str] | None = None
         ) -> tuple[list[Prepared], list[tuple[Prepared, int, str, dict[str, Any]]]]:
    """Build the recipe's datasets and expand its runs, query-major, then method, then setting:
    (prepared dataset, query index, method, setting) each. A dataset whose data is missing is
    skipped (its reason appended to ``notes``)."""
    methods = {m: g for m, g in recipe.methods.items()
               if not (options.retrieval_only and m in recipe.llm_methods)
               and not (env.cross_encoder is None and m in recipe.ce_methods)}
    if not methods:
        raise ReproduceError(f"recipe {recipe.name!r}: no method left to run with these options")
    settings = expand_settings(methods, recipe.grid, options.overrides, tuple(recipe.params))
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
    runs = [(prep, qi, method, setting) for prep in prepared for qi in prep.queries for method, setting in settings]
    return prepared, runs


# ---------------------------------------------------------------------------------------------
# the run spec
# ---------------------------------------------------------------------------------------------
@dataclass
class RecipeSpec(RunSpec):
    """A recipe with its options as a run spec (module docstring). Runs in this process: recipes
    hold LLM clients, cross-encoders and closures."""

    recipe: Recipe
    options: Options
    command: ClassVar[str] = "reproduce"
    fatal: ClassVar[tuple[type[BaseException], ...]] = (ReproduceError, MissingData, LLMNotConfigured)
    always_retry_errors: ClassVar[bool] = True
    env: Env | None = field(default=None, repr=False)
    notes: list[str] = field(default_factory=list)
    table: pd.DataFrame | None = field(default=None, repr=False)

    def check(self) -> None:
        self.env, self.notes = check_needs(self.recipe, self.options)

    def row_config(self) -> dict[str, Any]:
        if self.env is None:
            self.check()
        return {"recipe": self.recipe.name, **_config(self.recipe, self.options, self.env)}

    def config(self) -> dict[str, Any]:
        """What the user chose (the limit aside: a limited run is the first queries of the same grid)."""
        o = self.options
        return {**self.row_config(), "overrides": {k: list(v) for k, v in o.overrides.items()}, "seed": o.seed,
                "analogue": o.analogue, "corpus": None if o.corpus is None else str(o.corpus)}

    def plan(self, out: Path) -> Plan:
        prepared, runs = plan(self.recipe, self.options, self.env, self.notes)
        keys, by_key = {}, {}
        for n, prep in enumerate(prepared):
            corpus = None if prep.data.pools is not None else _digest(np.asarray(prep.data.E, np.float32),
                                                                     [str(x) for x in prep.data.doc_ids])
            for qi in prep.queries:
                keys[n, qi] = content_key(prep, qi, corpus)
                by_key[keys[n, qi]] = prep
        index = {id(p): n for n, p in enumerate(prepared)}
        tasks = [make_task(i, config_hash=self.config_hash, data_key=keys[index[id(prep)], qi],
                           query_id=prep.data.query_ids[qi], method=method, params=setting, dataset=prep.label,
                           query_index=int(qi), recipe=self.recipe.name, analogue=bool(prep.analogue))
                 for i, (prep, qi, method, setting) in enumerate(runs)]
        data_keys = {f"{p.label} [{p.key}]": _digest([keys[n, qi] for qi in p.queries]) for n, p in enumerate(prepared)}
        return Plan(tasks=tasks, data=by_key, data_keys=data_keys, notes=self.notes)

    def execute(self, state: dict[str, Prepared], task: Task) -> dict[str, Any]:
        prep = state[task.data_key]
        run = Run(index=task.index, dataset=task.dataset, dataset_key=prep.key,
                  query_index=int(task.extra["query_index"]), query_id=task.query_id, method=task.method,
                  setting=tuple(task.params.items()), key=task.key)
        return self.recipe.execute(prep, run, self.env)

    def finish(self, rows: pd.DataFrame, out: Path) -> pd.DataFrame:
        self.table = paper_table(self.recipe, rows)
        store.write_parquet(self.table, out / "table.parquet")
        store.write_csv(self.table, out / "table.csv")
        ok = rows[rows["status"] == "ok"] if len(rows) and "status" in rows else rows.iloc[0:0]
        if self.recipe.plot is not None and len(ok):
            self.notes += [f"figure: {p}" for p in self.recipe.plot(ok, out, self.options) if str(p).endswith(".png")]
        return rows


def run_recipe(recipe: Recipe, options: Options) -> ReproduceResult:
    """Run (or resume) ``recipe`` with ``options`` into ``options.out``; see the module docstring.
    One run per output folder at a time (:func:`divopt_rag.experiments.engine.store.output_lock`)."""
    spec = RecipeSpec(recipe, options)
    res = executor.run(spec, options.out, progress=options.progress, new_grid=options.new_grid)
    return ReproduceResult(recipe=recipe.name, run_id=res.run_id, rows=res.table, table=spec.table, out=options.out,
                           n_runs=res.n_runs, n_skipped=res.n_skipped, n_executed=res.n_executed,
                           n_errors=res.n_errors, notes=[*spec.notes, *[n for n in res.notes if n not in spec.notes]])


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
    extra = [c for c in OPTIONAL_COLUMNS if c in long.columns]
    long = long[[*TABLE_COLUMNS, *extra]].astype({"value": float})
    pub = published(recipe.paper_key)
    tables = set(recipe.published_tables)
    pub = pub[pub["table"].isin(tables)] if tables else pub.iloc[0:0]
    pub = pub.rename(columns={"value": "published"})[["table", "dataset", "setting", "method", "metric", "published",
                                                        "qualifier", "source"]]
    keys = ["table", "dataset", "setting", "method", "metric"]
    merged = long.merge(pub, on=keys, how="left")  # the recipe's order, then the published cells not reached
    unreached = pub.merge(long[keys], on=keys, how="left", indicator=True)
    unreached = unreached[unreached["_merge"] == "left_only"].drop(columns="_merge").assign(value=float("nan"))
    unreached = unreached.assign(**{c: "" for c in extra})
    merged = pd.concat([merged, unreached[merged.columns]], ignore_index=True) if len(unreached) else merged
    merged["delta"] = merged["value"] - merged["published"]
    return merged.reset_index(drop=True)


def _cell(v: float, p: float, q: Any, chosen: Any = None) -> str:
    ours = "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"
    if isinstance(chosen, str) and chosen and ours != "-":
        ours = f"{ours} @{chosen}"  # the grid setting a best-over-the-grid value was taken at
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return ours
    mark = {"up_to": "<=", "range_low": ">=", "range_high": "<=", "approx": "~"}.get(q, "")
    return f"{ours} | {mark}{p:.4g}"


def format_table(recipe: Recipe, table: pd.DataFrame) -> str:
    """The paper's table as text, one block per table id: rows and columns as ``recipe.layout``,
    each cell ``ours | paper`` (``ours`` alone where no number is published; ``ours @setting`` where
    the value is the best of a grid, taken at that setting). A block whose layout keys do not
    tell its cells apart (a grid of settings under one method) carries the ``setting`` column in
    its rows; no cell is ever dropped for another."""
    if table.empty:
        return "(no finished rows)"
    index, columns = (list(x) for x in recipe.layout)
    t = table.copy()
    chosen = t["chosen"] if "chosen" in t.columns else pd.Series(None, index=t.index)
    t["cell"] = [_cell(v, p, q, c) for v, p, q, c in zip(t["value"], t["published"], t["qualifier"], chosen)]
    for c in {*index, *columns, "setting"}:  # keep the order of appearance (the recipe's), not the alphabet
        t[c] = pd.Categorical(t[c].fillna(""), categories=list(dict.fromkeys(t[c].fillna(""))), ordered=True)
    blocks = []
    for tid, part in t.groupby("table", sort=False):
        rows = index
        if part.duplicated(index + columns).any() and "setting" not in index + columns:
            rows = [*index, "setting"]
        if part.duplicated(rows + columns).any():
            dup = part[part.duplicated(rows + columns, keep=False)].iloc[0]
            raise ValueError(f"recipe {recipe.name!r}, {tid}: several cells share "
                             f"{ {c: dup[c] for c in rows + columns} }; the layout must tell them apart")
        piv = part.pivot_table(index=rows, columns=columns, values="cell", aggfunc="first", observed=True)
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
