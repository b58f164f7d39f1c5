"""Plots from result tables (parquet / CSV / JSON files only), saved as PNG and SVG.

* :func:`plot_pareto` — Pareto frontier of a relevance metric (default Recall@k) against a
  diversity metric (default ILAD), one curve per method over theta (means over queries), with
  the non-dominated points of all methods joined;
* :func:`plot_latency` — latency (seconds) against k per method, from the ``divopt-rag bench
  latency`` table (columns method, n, d, k, theta, seconds, ...);
* :func:`plot_gaps` — distributions of normalized optimality gaps per method, from
  ``divopt-rag certify`` (upper-bound gaps of unproven solves are drawn hollow);
* :func:`plot_certified` — full-scale certificates: certified fraction per theta and the bound
  gap of the rest, from the ``full_scale`` rows of ``divopt-rag certify --full-scale``;
* :func:`plot_param_effect` — robust metrics against rho_vec / sparsity_penalty (or any grid
  column) per method, from ``divopt-rag sweep``.

**A plot never averages over a setting that varies.** Every setting of the table that takes
several values (:func:`divopt_rag.experiments.measures.tables.varying_settings`: dataset, k, n, pool,
theta, method parameters, ...) and is not an axis or the curve variable of the plot gets a
panel of its own (a facet); each panel's title names its values and the figure's title says
which settings are faceted. A ranking metric is named without its cutoff (``recall``) and read
at each row's k (``recall@<k>``, :func:`divopt_rag.experiments.measures.tables.at_cutoff`); since k is then
a faceted setting, a panel never mixes two cutoffs.

Each function returns ``(figure, data)`` where ``data`` is the tidy table actually drawn (with
one column per faceted setting), so what a figure shows can be checked. :func:`save_figure`
writes ``<name>.png`` and ``<name>.svg`` atomically. ``divopt-rag plot KIND --input FILE --out
DIR`` is the command-line entry point.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from divopt_rag.experiments.cli import arguments
from divopt_rag.experiments.cli.arguments import flag_defaults
from divopt_rag.experiments.engine import limits, store
from divopt_rag.experiments.engine.store import inside, safe_name
from divopt_rag.experiments.measures import quality
from divopt_rag.experiments.measures.tables import at_cutoff, metric_columns, varying_settings
from divopt_rag.experiments.plots import robust
from divopt_rag.models.extras import require

matplotlib = require("matplotlib", "divopt_rag.experiments.plots.figures")  # one line naming the extra when missing
from matplotlib.figure import Figure  # noqa: E402

# Figures are built with the object-oriented API (no pyplot): saving renders through Agg and no
# global backend or figure registry is touched, so plotting works headless, in threads and in
# Jupyter (where a returned Figure displays inline).

__all__ = [
    "read_table",
    "pareto_front",
    "plot_pareto",
    "plot_latency",
    "plot_gaps",
    "plot_param_effect",
    "plot_certified",
    "facets",
    "facet_title",
    "save_figure",
    "main",
]

_MARKERS = "os^vD<>pXh"


def _color(i: int):
    return matplotlib.colormaps["tab20"](i % 20)


def _subplots(nrows: int = 1, ncols: int = 1, *, figsize=None, **kw):
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(nrows, ncols, **kw)


KINDS = ("pareto", "latency", "gaps", "certified", "robust", "all")


# --------------------------------------------------------------------------------------------
# input
# --------------------------------------------------------------------------------------------
def read_table(path: str | Path) -> pd.DataFrame:
    """A result table from a .parquet, .csv or .json file (JSON: a list of rows, or {"rows": [...]}),
    or from a folder: its results.parquet / latency.csv / certify*.parquet, else every *.parquet in it."""
    p = Path(path)
    if p.is_dir():
        for name in ("results.parquet", "latency.csv", "certify.parquet"):
            if (p / name).exists():
                return read_table(p / name)
        files = sorted(f for f in p.glob("*.parquet") if not f.name.startswith("."))
        if not files:
            raise FileNotFoundError(f"no results.parquet, latency.csv or *.parquet in folder {p}")
        return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    if not p.exists():
        raise FileNotFoundError(f"result file {p} does not exist")
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        return pd.read_parquet(p)
    if suffix == ".csv":
        return pd.read_csv(p)
    if suffix == ".json":
        obj = json.loads(p.read_text())
        rows = obj.get("rows") if isinstance(obj, dict) else obj
        if not isinstance(rows, list):
            raise ValueError(f"{p}: expected a list of rows or an object with a 'rows' list")
        return pd.DataFrame(rows)
    raise ValueError(f"{p}: expected a .parquet, .csv or .json file, got {suffix or 'no suffix'!r}")


def _ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    # sweep tables mark failed runs with status "error"; certify tables may carry an error column
    if "status" in df and df["status"].isin(["ok", "error"]).all():
        df = df[df["status"] == "ok"]
    if "error" in df:
        df = df[df["error"].isna() | (df["error"] == "")]
    return df


def _need(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} needs column(s) {missing}; the table has {sorted(df.columns)}")


def _metric(df: pd.DataFrame, name: str) -> tuple[pd.Series, str]:
    """The values of metric ``name`` on every row and its label: a column as it is, or a ranking
    metric at each row's cutoff (``recall`` -> ``recall@10``, or ``recall@k`` over several k)."""
    values = at_cutoff(df, name)
    if name in df.columns:
        return values, name
    cols = metric_columns(df, name)
    return values, cols[0] if len(cols) == 1 else f"{name}@k"


def _fmt(v: Any) -> str:
    return f"{v:g}" if isinstance(v, (float, np.floating)) else str(v)


def facets(df: pd.DataFrame, exclude: Sequence[str] = ()) -> tuple[list[str], list[tuple[dict[str, Any], pd.DataFrame]]]:
    """(the settings that vary in ``df`` apart from ``exclude``, [(their values, rows), ...]): one
    facet per combination, in sorted order; one facet of every row when nothing else varies."""
    dims = varying_settings(df, exclude=exclude)
    if not dims:
        return [], [({}, df)]
    groups = []
    for _, g in df.groupby([df[d].astype(str) for d in dims], sort=False):
        groups.append(({d: g[d].iloc[0] for d in dims}, g))
    groups.sort(key=lambda t: tuple((0, v) if isinstance(v, (int, float, np.number)) and not pd.isna(v) else (1, str(v))
                                    for v in t[0].values()))
    return dims, groups


def facet_title(values: dict[str, Any]) -> str:
    """``"k=5, pool=20"``: the settings of one facet."""
    return ", ".join(f"{k}={_fmt(v)}" for k, v in values.items())


def _faceted(title: str, dims: Sequence[str]) -> str:
    return title + (f"; one panel per {', '.join(dims)} (never averaged over)" if dims else "")


def save_figure(fig: Figure, out_dir: str | Path, name: str) -> list[Path]:
    """Write ``name``.png (150 dpi) and ``name``.svg into ``out_dir`` atomically; returns both paths."""
    out = Path(out_dir)
    paths = [inside(out, f"{name}.png"), inside(out, f"{name}.svg")]
    store.write_figure(fig, paths[0], dpi=150, bbox_inches="tight")
    store.write_figure(fig, paths[1], bbox_inches="tight")
    return paths


# --------------------------------------------------------------------------------------------
# Pareto frontier
# --------------------------------------------------------------------------------------------
def pareto_front(x: Sequence[float], y: Sequence[float]) -> np.ndarray:
    """Indices of the points not dominated when both x and y are maximized, sorted by x.

    Point i is dominated if some j has x_j >= x_i and y_j >= y_i with one strict inequality.
    NaN points are never on the front.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    ok = np.flatnonzero(~(np.isnan(x) | np.isnan(y)))
    front = []
    for i in ok:
        dominated = np.any((x[ok] >= x[i]) & (y[ok] >= y[i]) & ((x[ok] > x[i]) | (y[ok] > y[i])))
        if not dominated:
            front.append(i)
    front = np.asarray(front, dtype=np.int64)
    return front[np.argsort(x[front], kind="stable")] if front.size else front


def plot_pareto(df: pd.DataFrame, x: str = "ilad", y: str = "recall", by: str = "method",
                over: str = "theta", methods: Sequence[str] | None = None):
    """Mean (x, y) over queries per (method, theta); one curve per method, the Pareto front dashed;
    one panel per combination of the other settings that vary (k, pool, dataset, ...)."""
    df = _ok_rows(df)
    _need(df, [by, over], "the Pareto plot")
    if methods is not None:
        df = df[df[by].isin(methods)]
    xs, x_label = _metric(df, x)
    ys, y_label = _metric(df, y)
    df = df.assign(**{x_label: xs, y_label: ys})
    dims, groups = facets(df, exclude=(by, over))
    fig, axes = _subplots(1, len(groups), figsize=(6.4 * len(groups), 4.8), squeeze=False)
    drawn = []
    for ax, (values, sub) in zip(axes[0], groups):
        data = sub.groupby([by, over], sort=True)[[x_label, y_label]].mean().reset_index()
        for i, (name, g) in enumerate(data.groupby(by, sort=True)):
            g = g.sort_values(over)
            ax.plot(g[x_label], g[y_label], marker=_MARKERS[i % len(_MARKERS)], ms=4, color=_color(i), label=str(name))
            ax.plot(g[x_label].iloc[-1:], g[y_label].iloc[-1:], marker="*", ms=8, color=_color(i))  # largest theta
        front = pareto_front(data[x_label].to_numpy(), data[y_label].to_numpy())
        data["pareto"] = False
        data.loc[data.index[front], "pareto"] = True
        if front.size:
            f = data.iloc[front]
            ax.plot(f[x_label], f[y_label], "k--", lw=1, alpha=0.6, label="Pareto front")
        ax.set_xlabel(x_label.upper() if x_label == "ilad" else x_label)
        ax.set_ylabel(y_label)
        ax.set_title(facet_title(values) or f"{y_label} vs {x_label}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        drawn.append(data.assign(**values)[[*dims, *data.columns]])
    fig.suptitle(_faceted(f"{y_label} vs {x_label} per {by} over {over} (star: largest {over})", dims), fontsize=9)
    return fig, pd.concat(drawn, ignore_index=True)


# --------------------------------------------------------------------------------------------
# latency
# --------------------------------------------------------------------------------------------
def plot_latency(df: pd.DataFrame, value: str = "seconds", theta: float | None = None):
    """Latency (``value``: seconds or gemv_equivalents) against k per method, log-scale y; one
    panel per combination of the settings that vary besides k (pool size n, dimension d, theta,
    ...). ``theta`` keeps one theta."""
    _need(df, ["method", "k", value], "the latency plot")
    if theta is not None:
        _need(df, ["theta"], "a theta filter")
        df = df[np.isclose(df["theta"], theta)]
    dims, groups = facets(df, exclude=("method", "k"))
    fig, axes = _subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
    drawn = []
    for ax, (values, sub) in zip(axes[0], groups):
        data = sub.groupby(["method", "k"], sort=True)[value].mean().reset_index()  # one row per cell already
        for i, (m, gm) in enumerate(data.groupby("method", sort=True)):
            ax.plot(gm["k"], gm[value], marker=_MARKERS[i % len(_MARKERS)], ms=4, color=_color(i), label=str(m))
        ax.set_yscale("log")
        ax.set_xlabel("k")
        ax.set_ylabel(value)
        ax.set_title(facet_title(values) or f"{value} against k", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        drawn.append(data.assign(**values)[[*dims, *data.columns]])
    axes[0][0].legend(fontsize=7)
    fig.suptitle(_faceted(f"{value} against k per method", dims), fontsize=9)
    return fig, pd.concat(drawn, ignore_index=True)


# --------------------------------------------------------------------------------------------
# optimality gaps
# --------------------------------------------------------------------------------------------
def plot_gaps(df: pd.DataFrame, gap: str = "gap"):
    """Box plots of the normalized gap (OPT - f)/(k(k-1)) per method, one panel per combination
    of the settings that vary (theta, k, pool, dataset, ...).

    Points whose gap is only an upper bound (exact solve not proven: ``gap_kind == "upper_bound"``)
    are drawn hollow, proven gaps filled. The returned table is
    :func:`divopt_rag.experiments.measures.quality.quality_summary` per (faceted settings, method).
    """
    df = _ok_rows(df)
    _need(df, ["method", gap], "the gap plot")
    df = df[~df["method"].isin(("exact", "full_scale"))]
    df = df.assign(gap_kind=df["gap_kind"] if "gap_kind" in df else "exact",
                   exact_hit=df["exact_hit"] if "exact_hit" in df else pd.Series(pd.NA, index=df.index, dtype="boolean"))
    dims, groups = facets(df, exclude=("method",))
    methods = sorted(df["method"].unique())
    fig, axes = _subplots(1, len(groups), figsize=(max(4, 0.45 * len(methods)) * len(groups), 4), squeeze=False,
                          sharey=True)
    for ax, (values, sub) in zip(axes[0], groups):
        vals = [sub.loc[sub["method"] == m, gap].dropna().to_numpy() for m in methods]
        ax.boxplot(vals, showfliers=False)
        ax.set_xticks(range(1, len(methods) + 1), methods, rotation=60, fontsize=7)
        for i, m in enumerate(methods, start=1):
            sm = sub[sub["method"] == m]
            proven = (sm["gap_kind"] == "exact").to_numpy()
            jitter = np.random.default_rng(i).uniform(-0.15, 0.15, len(sm))  # fixed seed: same figure every time
            ax.scatter(i + jitter[proven], sm.loc[proven, gap], s=8, color="C0", alpha=0.6)
            ax.scatter(i + jitter[~proven], sm.loc[~proven, gap], s=8, facecolors="none", edgecolors="C3", alpha=0.8)
        ax.set_title(facet_title(values), fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("(OPT - f) / (k(k-1))")
    fig.suptitle(_faceted("normalized optimality gaps (hollow: upper bound, exact solve not proven)", dims), fontsize=9)
    return fig, quality.quality_summary(df.assign(gap=df[gap]), [*dims, "method"])


def plot_certified(df: pd.DataFrame):
    """Full-scale certificates per setting (theta, and every other setting that varies): the
    certified fraction (bars) and, for the queries not certified, the normalized bound gap
    (upper_bound - incumbent)/(k(k-1)) (points). Reads the ``full_scale`` rows of a certify table
    (or a table of certificates only)."""
    if "method" in df and (df["method"] == "full_scale").any():
        df = df[df["method"] == "full_scale"]
    _need(df, ["theta", "certified", "bound_gap"], "the certificate plot")
    dims, groups = facets(df, exclude=())
    rows, labels, rests = [], [], []
    for values, g in groups:
        certified = g["certified"].astype(bool)
        rows.append({**values, "queries": len(g), "certified_fraction": float(certified.mean()),
                     "median_survivors": float(g["n_survivors"].median()) if "n_survivors" in g else np.nan,
                     "mean_bound_gap_uncertified": float(g.loc[~certified, "bound_gap"].mean())
                     if (~certified).any() else np.nan})
        labels.append(facet_title(values).replace(", ", "\n") or "all")
        rests.append(g.loc[~certified, "bound_gap"])
    data = pd.DataFrame(rows)
    fig, (a1, a2) = _subplots(1, 2, figsize=(9, 3.6))
    pos = np.arange(len(data))
    a1.bar(pos, data["certified_fraction"], color="C2")
    a1.set_xticks(pos, labels, fontsize=7)
    a1.set_ylim(0, 1.05)
    a1.set_ylabel("certified optimal at full scale")
    for i, rest in enumerate(rests):
        a2.scatter(np.full(len(rest), i) + np.random.default_rng(i).uniform(-0.1, 0.1, len(rest)), rest, s=10)
    a2.set_xticks(pos, labels, fontsize=7)
    a2.set_ylabel("bound gap (UB - f)/(k(k-1)), uncertified")
    for ax in (a1, a2):
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(_faceted("full-scale certificates", [d for d in dims if d != "theta"]) + " (bars: one per setting)",
                 fontsize=9)
    return fig, data


# --------------------------------------------------------------------------------------------
# robust sweeps
# --------------------------------------------------------------------------------------------
def plot_param_effect(df: pd.DataFrame, param: str = "rho_vec",
                      metrics: Sequence[str] = ("recall", "ilad", "objective"), by: str = "method"):
    """Mean of each metric against ``param`` (rho_vec, sparsity_penalty, ...) per method; one row of
    panels per combination of the other settings that vary (k, theta, the other parameters, ...).

    Only rows where ``param`` is set are used; metrics missing from the table are skipped. A
    metric undefined on some rows (ILAD or ILS of a set of fewer than two items) is averaged over
    the rows where it is defined, and the panel's title counts the others.
    """
    df = _ok_rows(df)
    _need(df, [param, by], f"the {param} plot")
    df = df[df[param].notna()]
    found = {}
    for m in metrics:
        try:
            found[m] = _metric(df, m)
        except ValueError:
            continue
    if not found:
        raise ValueError(f"none of the metrics is in the table (columns: {sorted(df.columns)})")
    if df.empty:
        raise ValueError(f"no row of the table sets {param}")
    labels = [label for _, label in found.values()]
    df = df.assign(**{label: values for values, label in found.values()})
    dims, groups = facets(df, exclude=(param, by))
    fig, axes = _subplots(len(groups), len(labels), figsize=(4.2 * len(labels), 3.6 * len(groups)), squeeze=False)
    drawn = []
    for row, (values, sub) in zip(axes, groups):
        data = sub.groupby([by, param], sort=True)[labels].mean().reset_index()
        for ax, m in zip(row, labels):
            for i, (name, g) in enumerate(data.groupby(by, sort=True)):
                ax.plot(g[param], g[m], marker=_MARKERS[i % len(_MARKERS)], ms=4, color=_color(i), label=str(name))
            ax.set_xlabel(param)
            ax.set_ylabel(m)
            # a value that is undefined (ILAD of a one-item set) is left out of the mean: say how many
            undefined = int(sub[m].isna().sum())
            note = f"{m} undefined on {undefined} of {len(sub)} rows (e.g. |S| < 2)" if undefined else ""
            ax.set_title("\n".join(t for t in (facet_title(values), note) if t), fontsize=8)
            ax.grid(alpha=0.3)
        drawn.append(data.assign(**values)[[*dims, *data.columns]])
    axes[0][0].legend(fontsize=7)
    fig.suptitle(_faceted(f"metrics against {param}", dims), fontsize=9)
    return fig, pd.concat(drawn, ignore_index=True)


# --------------------------------------------------------------------------------------------
# The command (its flags: :func:`divopt_rag.experiments.cli.arguments.plot`)
# --------------------------------------------------------------------------------------------

def _has(df: pd.DataFrame, name: str, flag: str, path: str) -> None:
    """``name`` is a column or a metric (``recall`` -> ``recall@k``) of ``df``; else one line
    naming ``flag``."""
    if not metric_columns(df, name):
        raise limits.UsageError(flag, f"a column or metric of {path} ({', '.join(sorted(map(str, df.columns)))})",
                                repr(name))


def _plots_for(kind: str, df: pd.DataFrame, args, tag: str, path: str) -> list[tuple[str, Any]]:
    figs = []
    if kind == "pareto":
        _has(df, args.x, "--x", path)
        _has(df, args.y, "--y", path)
        figs.append((safe_name(f"pareto_{args.y}_vs_{args.x}{tag}"), plot_pareto(df, args.x, args.y)[0]))
    elif kind == "latency":
        _has(df, args.value, "--value", path)
        figs.append((f"latency_vs_k{tag}", plot_latency(df, args.value, getattr(args, "theta", None))[0]))
    elif kind == "gaps":
        figs.append((f"gaps{tag}", plot_gaps(df)[0]))
    elif kind == "certified":
        figs.append((f"certified{tag}", plot_certified(df)[0]))
    elif kind == "robust":
        present = [p for p in args.param if p in df.columns and df[p].notna().any()]
        if not present:
            raise limits.UsageError("--param", f"parameters set in {path}", repr(",".join(args.param)))
        if robust.has_robust_measures(df):
            rows = robust.robust_rows(df)
            # an axis with one value among the robust rows is a setting, not an axis to draw against
            axes_ = [p for p in present if p in rows and rows[p].dropna().nunique() > 1] or present[:1]
            for p in axes_:
                figs.append((safe_name(f"robust_vs_{p}{tag}"), robust.plot_robust(df, p)[0]))
            if any(p in rows and rows[p].dropna().nunique() > 1 for p in present):
                figs.append((f"robust_stability{tag}", robust.plot_stability(df, present)[0]))
            if args.metrics == _default("metrics"):  # else also those metrics against each parameter
                return figs
        for p in present:
            figs.append((safe_name(f"robust_{p}{tag}"), plot_param_effect(df, p, args.metrics)[0]))
    return figs


#: The flags each kind of plot reads (``all`` reads every one).
_FLAGS_OF = {"x": ("pareto",), "y": ("pareto",), "value": ("latency",), "theta": ("latency",), "param": ("robust",),
             "metrics": ("robust",)}


def _default(dest: str) -> Any:
    return flag_defaults(arguments.plot)[dest]


def _check_flags(args, tables: list[pd.DataFrame]) -> None:
    """A flag given a value must be read by the plot asked for, and (for ``all``) name a column
    of some input: a flag that would be silently ignored is refused, naming it."""
    defaults = flag_defaults(arguments.plot)
    for dest, kinds in _FLAGS_OF.items():
        value = getattr(args, dest)
        if value == defaults[dest]:
            continue
        shown = repr(",".join(map(str, value))) if isinstance(value, list) else repr(value)
        if args.kind not in (*kinds, "all"):
            raise limits.UsageError(f"--{dest}", f"no --{dest} with the {args.kind} plot (the {kinds[0]} plot reads it)",
                                    shown)
        if args.kind == "all" and dest in ("x", "y", "value"):
            if not any(metric_columns(df, value) for df in tables):
                raise limits.UsageError(f"--{dest}", "a column or metric of the inputs", shown)
        if args.kind == "all" and dest in ("param", "metrics"):
            missing = [v for v in value if not any(metric_columns(df, v) for df in tables)]
            if missing:
                raise limits.UsageError(f"--{dest}", "columns or metrics of the inputs", repr(",".join(missing)))


def main(args) -> int:
    """Every figure is drawn before the first is written: an input that cannot be plotted leaves
    no figure behind. File names come from the flags' values through
    :func:`~divopt_rag.experiments.engine.store.safe_name`, so none leaves ``--out``."""
    tables = [read_table(path) for path in args.input]
    _check_flags(args, tables)
    figures: list[tuple[str, Any]] = []
    for i, (path, df) in enumerate(zip(args.input, tables)):
        tag = "" if len(args.input) == 1 else f"_{i}"
        if args.kind == "all":
            kinds = []
            if {"gemv_seconds", "k", "n", "d"} <= set(df.columns):
                kinds.append("latency")
            if "gap" in df.columns and df["gap"].notna().any():
                kinds.append("gaps")
            if {"certified", "bound_gap"} <= set(df.columns) and df["certified"].notna().any():
                kinds.append("certified")
            if "theta" in df.columns and all(metric_columns(df, m) for m in (args.x, args.y)):
                kinds.append("pareto")
            if any(p in df.columns and df[p].notna().any() for p in args.param):
                kinds.append("robust")
            if not kinds:
                raise ValueError(f"{path}: nothing to plot (columns: {sorted(df.columns)})")
        else:
            kinds = [args.kind]
        for kind in kinds:
            figures += _plots_for(kind, df, args, tag, str(path))
    written: list[Path] = []
    for name, fig in figures:
        written += save_figure(fig, args.out, name)
    for w in written:
        print(w)
    print(f"wrote {len(written)} files in {args.out}")
    return 0
