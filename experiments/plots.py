"""Plots from result tables (parquet / CSV / JSON files only), saved as PNG and SVG.

* :func:`plot_pareto` — Pareto frontier of a relevance metric (default Recall@k) against a
  diversity metric (default ILAD), one curve per method over theta (means over queries), with
  the non-dominated points of all methods joined;
* :func:`plot_latency` — latency against k per method, one panel per (n, d) pool, from the
  ``divopt-rag bench latency`` CSV/JSON (columns method, n, d, k, theta, seconds, ...);
* :func:`plot_gaps` — distributions of normalized optimality gaps per method, one panel per
  theta, from ``divopt-rag certify`` (upper-bound gaps of unproven solves are drawn hollow);
* :func:`plot_certified` — full-scale certificates: certified fraction per theta and the bound
  gap of the rest, from ``divopt-rag certify --full-scale`` (``*_fullscale.parquet``);
* :func:`plot_param_effect` — robust metrics against rho_vec / sparsity_penalty (or any grid
  column) per method, from ``divopt-rag sweep``.

Each function returns ``(figure, data)`` where ``data`` is the tidy table actually drawn, so
what a figure shows can be checked. :func:`save_figure` writes ``<name>.png`` and ``<name>.svg``.
``divopt-rag plot KIND --input FILE --out DIR`` is the command-line entry point.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Sequence

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from divopt_rag.experiments import harness

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
    "save_figure",
    "add_arguments",
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


def save_figure(fig: Figure, out_dir: str | Path, name: str) -> list[Path]:
    """Write ``name``.png (150 dpi) and ``name``.svg into ``out_dir``; returns both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.svg"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
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
    """Mean (x, y) over queries per (method, theta); one curve per method; Pareto front dashed."""
    df = _ok_rows(df)
    _need(df, [x, y, by, over], "the Pareto plot")
    if methods is not None:
        df = df[df[by].isin(methods)]
    data = df.groupby([by, over], sort=True)[[x, y]].mean().reset_index()
    fig, ax = _subplots(figsize=(6.4, 4.8))
    for i, (name, g) in enumerate(data.groupby(by, sort=True)):
        g = g.sort_values(over)
        ax.plot(g[x], g[y], marker=_MARKERS[i % len(_MARKERS)], ms=4, color=_color(i), label=str(name))
        ax.plot(g[x].iloc[-1:], g[y].iloc[-1:], marker="*", ms=8, color=_color(i))  # largest theta
    front = pareto_front(data[x].to_numpy(), data[y].to_numpy())
    data["pareto"] = False
    data.loc[data.index[front], "pareto"] = True
    if front.size:
        f = data.iloc[front]
        ax.plot(f[x], f[y], "k--", lw=1, alpha=0.6, label="Pareto front")
    ax.set_xlabel(x.upper() if x == "ilad" else x)
    ax.set_ylabel(y)
    ax.set_title(f"{y} vs {x} per {by} over {over} (star: largest {over})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return fig, data


# --------------------------------------------------------------------------------------------
# latency
# --------------------------------------------------------------------------------------------
def plot_latency(df: pd.DataFrame, value: str = "seconds", theta: float | None = None):
    """Latency (``value``: seconds or gemv_equivalents) against k per method, one panel per (n, d).

    Rows are averaged over theta unless one ``theta`` is chosen. Log-scale y.
    """
    _need(df, ["method", "n", "d", "k", value], "the latency plot")
    if theta is not None:
        _need(df, ["theta"], "a theta filter")
        df = df[np.isclose(df["theta"], theta)]
    data = df.groupby(["n", "d", "method", "k"], sort=True)[value].mean().reset_index()
    panels = list(data.groupby(["n", "d"], sort=True))
    fig, axes = _subplots(1, max(1, len(panels)), figsize=(5 * max(1, len(panels)), 4), squeeze=False)
    for ax, ((n, d), g) in zip(axes[0], panels):
        for i, (m, gm) in enumerate(g.groupby("method", sort=True)):
            ax.plot(gm["k"], gm[value], marker=_MARKERS[i % len(_MARKERS)], ms=4, color=_color(i), label=str(m))
        ax.set_yscale("log")
        ax.set_xlabel("k")
        ax.set_ylabel(value)
        ax.set_title(f"n={n:,} d={d}")
        ax.grid(alpha=0.3, which="both")
    axes[0][0].legend(fontsize=7)
    return fig, data


# --------------------------------------------------------------------------------------------
# optimality gaps
# --------------------------------------------------------------------------------------------
def plot_gaps(df: pd.DataFrame, gap: str = "gap"):
    """Box plots of the normalized gap (OPT - f)/(k(k-1)) per method, one panel per theta.

    Points whose gap is only an upper bound (exact solve not proven: ``gap_kind == "upper_bound"``)
    are drawn hollow, proven gaps filled. The returned table is
    :func:`divopt_rag.experiments.harness.quality_summary` per (theta, method).
    """
    df = _ok_rows(df)
    _need(df, ["method", "theta", gap], "the gap plot")
    df = df[df["method"] != "exact"]
    kind = df["gap_kind"] if "gap_kind" in df else pd.Series("exact", index=df.index)
    thetas = sorted(df["theta"].unique())
    methods = sorted(df["method"].unique())
    fig, axes = _subplots(1, max(1, len(thetas)), figsize=(max(4, 0.45 * len(methods)) * max(1, len(thetas)), 4),
                             squeeze=False, sharey=True)
    for ax, th in zip(axes[0], thetas):
        sub = df[df["theta"] == th]
        vals = [sub.loc[sub["method"] == m, gap].dropna().to_numpy() for m in methods]
        ax.boxplot(vals, showfliers=False)
        ax.set_xticks(range(1, len(methods) + 1), methods, rotation=60, fontsize=7)
        for i, m in enumerate(methods, start=1):
            sm = sub[sub["method"] == m]
            proven = kind.loc[sm.index] == "exact"
            jitter = np.random.default_rng(i).uniform(-0.15, 0.15, len(sm))  # fixed seed: same figure every time
            ax.scatter(i + jitter[proven.to_numpy()], sm.loc[proven, gap], s=8, color="C0", alpha=0.6)
            ax.scatter(i + jitter[~proven.to_numpy()], sm.loc[~proven, gap], s=8, facecolors="none",
                       edgecolors="C3", alpha=0.8)
        ax.set_title(f"theta={th:g}")
        ax.grid(alpha=0.3, axis="y")
    axes[0][0].set_ylabel("(OPT - f) / (k(k-1))")
    fig.suptitle("normalized optimality gaps (hollow: upper bound, exact solve not proven)", fontsize=9)
    table = df.assign(gap=df[gap], gap_kind=kind,
                      exact_hit=df["exact_hit"] if "exact_hit" in df else pd.Series(pd.NA, index=df.index, dtype="boolean"))
    return fig, harness.quality_summary(table, ["theta", "method"])


def plot_certified(df: pd.DataFrame):
    """Full-scale certificates per theta: the certified fraction (bars) and, for the queries not
    certified, the normalized bound gap (upper_bound - incumbent)/(k(k-1)) (points)."""
    _need(df, ["theta", "certified", "bound_gap"], "the certificate plot")
    g = df.groupby("theta", sort=True)
    data = pd.DataFrame({
        "queries": g.size(),
        "certified_fraction": g["certified"].mean(),
        "median_survivors": g["n_survivors"].median() if "n_survivors" in df else np.nan,
        "mean_bound_gap_uncertified": g.apply(
            lambda x: x.loc[~x["certified"].astype(bool), "bound_gap"].mean(), include_groups=False),
    }).reset_index()
    fig, (a1, a2) = _subplots(1, 2, figsize=(9, 3.6))
    pos = np.arange(len(data))
    a1.bar(pos, data["certified_fraction"], color="C2")
    a1.set_xticks(pos, [f"{t:g}" for t in data["theta"]])
    a1.set_ylim(0, 1.05)
    a1.set_xlabel("theta")
    a1.set_ylabel("certified optimal at full scale")
    for i, th in enumerate(data["theta"]):
        rest = df[(df["theta"] == th) & ~df["certified"].astype(bool)]["bound_gap"]
        a2.scatter(np.full(len(rest), i) + np.random.default_rng(i).uniform(-0.1, 0.1, len(rest)), rest, s=10)
    a2.set_xticks(pos, [f"{t:g}" for t in data["theta"]])
    a2.set_xlabel("theta")
    a2.set_ylabel("bound gap (UB - f)/(k(k-1)), uncertified")
    for ax in (a1, a2):
        ax.grid(alpha=0.3, axis="y")
    return fig, data


# --------------------------------------------------------------------------------------------
# robust sweeps
# --------------------------------------------------------------------------------------------
def plot_param_effect(df: pd.DataFrame, param: str = "rho_vec",
                      metrics: Sequence[str] = ("recall", "ilad", "objective"), by: str = "method"):
    """Mean of each metric against ``param`` (rho_vec, sparsity_penalty, ...) per method.

    Only rows where ``param`` is set are used; metrics missing from the table are skipped.
    """
    df = _ok_rows(df)
    _need(df, [param, by], f"the {param} plot")
    df = df[df[param].notna()]
    metrics = [m for m in metrics if m in df.columns]
    if not metrics:
        raise ValueError(f"none of the metrics is in the table (columns: {sorted(df.columns)})")
    if df.empty:
        raise ValueError(f"no row of the table sets {param}")
    data = df.groupby([by, param], sort=True)[metrics].mean().reset_index()
    fig, axes = _subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), squeeze=False)
    for ax, m in zip(axes[0], metrics):
        for i, (name, g) in enumerate(data.groupby(by, sort=True)):
            ax.plot(g[param], g[m], marker=_MARKERS[i % len(_MARKERS)], ms=4, color=_color(i), label=str(name))
        ax.set_xlabel(param)
        ax.set_ylabel(m)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"metrics against {param}", fontsize=9)
    return fig, data


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=KINDS, help="pareto | latency | gaps | certified | robust | all")
    p.add_argument("--input", "-i", nargs="+", required=True,
                   help="result file(s) or folder(s): parquet/CSV/JSON (all: certify, sweep and latency outputs)")
    p.add_argument("--out", default="results/plots", help="output folder for PNG and SVG files")
    p.add_argument("--x", default="ilad", help="Pareto x metric (diversity)")
    p.add_argument("--y", default="recall", help="Pareto y metric (relevance)")
    p.add_argument("--param", nargs="+", default=["rho_vec", "sparsity_penalty"], help="robust plot parameters")
    p.add_argument("--metrics", nargs="+", default=["recall", "ilad", "objective"], help="robust plot metrics")
    p.add_argument("--value", default="seconds", help="latency column: seconds | gemv_equivalents")


def _plots_for(kind: str, df: pd.DataFrame, args: argparse.Namespace, tag: str) -> list[tuple[str, Any]]:
    figs = []
    if kind == "pareto":
        figs.append((f"pareto_{args.y}_vs_{args.x}{tag}", plot_pareto(df, args.x, args.y)[0]))
    elif kind == "latency":
        figs.append((f"latency_vs_k{tag}", plot_latency(df, args.value)[0]))
    elif kind == "gaps":
        figs.append((f"gaps{tag}", plot_gaps(df)[0]))
    elif kind == "certified":
        figs.append((f"certified{tag}", plot_certified(df)[0]))
    elif kind == "robust":
        present = [p for p in args.param if p in df.columns and df[p].notna().any()]
        if not present:
            raise ValueError(f"none of {args.param} is set in the table")
        for p in present:
            figs.append((f"robust_{p}{tag}", plot_param_effect(df, p, args.metrics)[0]))
    return figs


def main(args: argparse.Namespace) -> int:
    written: list[Path] = []
    for i, path in enumerate(args.input):
        df = read_table(path)
        tag = "" if len(args.input) == 1 else f"_{i}"
        if args.kind == "all":
            kinds = []
            if {"gemv_seconds", "k", "n", "d"} <= set(df.columns):
                kinds.append("latency")
            if "gap" in df.columns:
                kinds.append("gaps")
            if {"certified", "bound_gap"} <= set(df.columns):
                kinds.append("certified")
            if {args.x, args.y, "theta"} <= set(df.columns):
                kinds.append("pareto")
            if any(p in df.columns and df[p].notna().any() for p in args.param):
                kinds.append("robust")
            if not kinds:
                raise ValueError(f"{path}: nothing to plot (columns: {sorted(df.columns)})")
        else:
            kinds = [args.kind]
        for kind in kinds:
            for name, fig in _plots_for(kind, df, args, tag):
                written += save_figure(fig, args.out, name)
    for w in written:
        print(w)
    return 0
