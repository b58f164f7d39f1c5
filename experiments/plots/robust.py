"""Plots of a robust-retrieval sweep, as robust-optimization papers report one.

Reads the rows of robust models (``objective_kind`` robust_sparsity / nominal_sparsity: the
records of :data:`divopt_rag.robust.ROBUST_MODELS` as :func:`divopt_rag.experiments.studies.runs.execute_run`
writes them) and draws, against the uncertainty radius ``rho_vec`` and the sparsity penalty
``sparsity_penalty`` (the lambda of -lambda sum x):

* :func:`plot_robust` -- one column of panels per measure:

  - relevance of the selected set, nominal s_i (solid) and worst case r_i (dashed), means over
    the set and then over queries;
  - the price of robustness, nominal minus worst-case relevance (Bertsimas & Sim's "price"
    read on the set the model chose: what the guarantee costs);
  - the set size |S| (the sparsity penalty sizes it);
  - the worst-case average pairwise similarity, with the cap rho_div drawn as a line; a set of
    fewer than two items has no pairs, so the measure is undefined there, and each panel says
    how many rows that is instead of dropping them silently;
  - the proven status: the share of solves proven optimal (the solver's status, never a time
    limit called optimal) and, beside it, the median relative gap |bound - objective| / |objective|
    of the rest;

* :func:`plot_stability` -- the Jaccard distance 1 - |A n B| / |A u B| between the sets selected
  at neighbouring values of rho_vec (lambda fixed) and of lambda (rho_vec fixed), averaged over
  queries: the MIO report's consistency measure (Sec. 4.3, where it compares encoders; 0.79 for
  the l_inf model) applied along the grid. Two empty sets are at distance 0.

**Panels only for settings that vary.** The rows of each figure are the combinations of the
settings that vary among the robust rows (:func:`divopt_rag.experiments.measures.tables.varying_settings`,
which ignores a parameter on the rows whose method does not take it) apart from the x axis; a
setting with one value gets no panel row. Means are over queries only, never over a setting.
Each function returns ``(figure, data)`` with the table actually drawn.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from divopt_rag.experiments.measures import tables
from divopt_rag.experiments.measures.metrics import jaccard
from divopt_rag.models.extras import require

matplotlib = require("matplotlib", "divopt_rag.experiments.plots.robust")  # one line naming the extra when missing
from matplotlib.figure import Figure  # noqa: E402

__all__ = ["robust_rows", "ROBUST_AXES", "plot_robust", "plot_stability", "stability_table", "has_robust_measures"]

#: The axes robust sweeps are read against: the uncertainty radius and the sparsity penalty.
ROBUST_AXES = ("rho_vec", "sparsity_penalty")
_LABELS = {"rho_vec": "rho_vec (uncertainty radius)", "sparsity_penalty": "lambda (sparsity_penalty)"}
_MEASURES = ("nominal_relevance", "worst_case_relevance", "price_of_robustness", "set_size",
             "worst_case_avg_similarity", "model_proven_optimal", "model_gap")
_MARKERS = "os^vD<>pXh"


def _color(i: int):
    return matplotlib.colormaps["tab10"](i % 10)


def has_robust_measures(df: pd.DataFrame) -> bool:
    """Whether ``df`` holds robust rows with the measures of this module (tables of divopt
    before these columns existed are drawn by :func:`divopt_rag.experiments.plots.figures.plot_param_effect`)."""
    return {"worst_case_relevance", "nominal_relevance", "set_size"} <= set(df.columns) and not robust_rows(df).empty


def robust_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The finished rows of robust models: ``objective_kind`` robust_sparsity or nominal_sparsity."""
    if "objective_kind" not in df:
        return df.iloc[0:0]
    out = df[df["objective_kind"].isin(("robust_sparsity", "nominal_sparsity"))]
    if "status" in out:
        out = out[out["status"] == "ok"]
    return out


def _varying(df: pd.DataFrame, x: str) -> list[str]:
    return tables.varying_settings(df, exclude=(x, "method"))


def _facets(df: pd.DataFrame, dims: Sequence[str]) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    if not dims:
        return [({}, df)]
    groups = [({d: g[d].iloc[0] for d in dims}, g) for _, g in df.groupby([df[d].astype(str) for d in dims], sort=False)]
    return sorted(groups, key=lambda t: tuple(str(v) if not isinstance(v, (int, float, np.number)) else f"{v:020.10f}"
                                              for v in t[0].values()))


def _title(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, (float, np.floating)) else f"{k}={v}" for k, v in values.items())


def _proven(s: pd.Series) -> pd.Series:
    return s.map(lambda v: float(bool(v)) if v is not None and not (isinstance(v, float) and np.isnan(v)) else np.nan)


def _cell_table(df: pd.DataFrame, x: str) -> pd.DataFrame:
    """Per (method, x): means over queries of the robust measures, with the counts that make a
    mean readable (queries, rows with an undefined average similarity, proven solves)."""
    proven = _proven(df["model_proven_optimal"]) if "model_proven_optimal" in df else pd.Series(np.nan, df.index)
    gap = pd.to_numeric(df["model_gap"], errors="coerce") if "model_gap" in df else pd.Series(np.nan, df.index)
    d = df.assign(model_proven_optimal=proven, undefined_similarity=df["set_size"] < 2,
                  # the gap of the solves not proven optimal (an infinite gap: no bound known)
                  unproven_gap=gap.where(proven != 1.0).replace(np.inf, np.nan))
    g = d.groupby(["method", x], sort=True)
    out = g[[m for m in _MEASURES if m in d and m not in ("model_gap",)]].mean()
    out["unproven_gap_median"] = g["unproven_gap"].median()
    out["queries"] = g.size()
    out["undefined_similarity"] = g["undefined_similarity"].sum()
    if "rho_div" in d:
        out["rho_div"] = g["rho_div"].first()
    return out.reset_index()


def plot_robust(df: pd.DataFrame, x: str = "rho_vec"):
    """The robust measures against ``x`` (``rho_vec`` or ``sparsity_penalty``), one curve per
    robust model, one row of panels per combination of the other settings that vary (module
    docstring). ValueError when no robust row sets ``x``."""
    rows = robust_rows(df)
    if x not in rows or rows[x].isna().all():
        raise ValueError(f"no finished robust-model row sets {x!r} (columns: {sorted(map(str, df.columns))})")
    rows = rows[rows[x].notna()]
    dims = _varying(rows, x)
    facets = _facets(rows, dims)
    titles = ("relevance of the set\n(solid: nominal, dashed: worst case)", "price of robustness\n(nominal - worst case)",
              "set size |S|", "worst-case avg pairwise similarity\n(dotted: cap rho_div)",
              "share of solves proven optimal", "relative gap of unproven solves\n(median; 0 = none)")
    ncol = 3  # six panels per facet, in two rows of three
    fig = Figure(figsize=(4.2 * ncol, 3.1 * 2 * len(facets) + 0.6), layout="constrained")
    grid = fig.subplots(2 * len(facets), ncol, squeeze=False)
    axes = [list(grid[2 * f]) + list(grid[2 * f + 1]) for f in range(len(facets))]
    drawn = []
    methods = sorted(rows["method"].unique())
    for row_axes, (values, sub) in zip(axes, facets):
        data = _cell_table(sub, x)
        for i, m in enumerate(methods):
            g = data[data["method"] == m].sort_values(x)
            if g.empty:
                continue
            style = dict(color=_color(i), marker=_MARKERS[i % len(_MARKERS)], ms=4)
            row_axes[0].plot(g[x], g["nominal_relevance"], label=m, **style)
            row_axes[0].plot(g[x], g["worst_case_relevance"], ls="--", **style)
            row_axes[1].plot(g[x], g["price_of_robustness"], **style)
            row_axes[2].plot(g[x], g["set_size"], **style)
            row_axes[3].plot(g[x], g["worst_case_avg_similarity"], **style)
            # settings where every set had < 2 items: the measure is undefined, drawn as an x along
            # the panel's floor (one height per model, so two models' marks never hide each other)
            none = g[g["worst_case_avg_similarity"].isna()]
            row_axes[3].plot(none[x], np.full(len(none), 0.04 + 0.06 * i), ls="none", marker="x", ms=7,
                             color=_color(i), transform=row_axes[3].get_xaxis_transform())
            if "model_proven_optimal" in g:
                row_axes[4].plot(g[x], g["model_proven_optimal"], **style)
            row_axes[5].plot(g[x], g["unproven_gap_median"].fillna(0.0), **style)
        if "rho_div" in data and data["rho_div"].notna().any():
            for cap in sorted(data["rho_div"].dropna().unique()):
                row_axes[3].axhline(cap, color="k", ls=":", lw=1)
        undefined, total = int(data["undefined_similarity"].sum()), int(data["queries"].sum())
        row_titles = list(titles)
        if undefined:
            row_titles[3] += f"\nx: undefined, |S| < 2 ({undefined} of {total} solves)"
        row_axes[4].set_ylim(-0.05, 1.05)
        prefix = _title(values)
        for ax, t in zip(row_axes, row_titles):
            ax.set_title(f"{prefix}\n{t}" if prefix else t, fontsize=8)
            ax.set_xlabel(_LABELS.get(x, x), fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        drawn.append(data.assign(**values))
    axes[0][0].legend(fontsize=7)
    facet_note = f"; one row of panels per {', '.join(dims)}" if dims else ""
    fig.suptitle(f"robust models against {x}: means over queries{facet_note}", fontsize=9)
    return fig, pd.concat(drawn, ignore_index=True)


def stability_table(df: pd.DataFrame, along: str) -> pd.DataFrame:
    """Jaccard distance between the sets selected at neighbouring values of ``along`` (every
    other setting and the query fixed), one row per (method, other settings, query, pair)."""
    rows = robust_rows(df)
    rows = rows[rows[along].notna()] if along in rows else rows.iloc[0:0]
    others = [c for c in tables.varying_settings(rows, exclude=(along, "method")) if c in rows]
    keys = ["method", "query_id", *others]
    out = []
    for _, g in rows.groupby([rows[c].astype(str) for c in keys], sort=False):
        g = g.sort_values(along)
        vals, sets = g[along].to_numpy(), [set(s) for s in g["selected"]]
        for a in range(len(vals) - 1):
            out.append({**{c: g[c].iloc[0] for c in keys}, "from": vals[a], "to": vals[a + 1],
                        "jaccard_distance": 1.0 - jaccard(sets[a], sets[a + 1])})
    return pd.DataFrame(out, columns=[*keys, "from", "to", "jaccard_distance"])


def plot_stability(df: pd.DataFrame, axes_: Sequence[str] = ROBUST_AXES):
    """Jaccard distance between neighbouring settings (module docstring): one panel per axis of
    ``axes_`` that takes several values among the robust rows, one curve per robust model, the
    x tick of each pair labelled ``a->b``. ValueError when no axis varies."""
    rows = robust_rows(df)
    along = [a for a in axes_ if a in rows and rows[a].dropna().nunique() > 1]
    if not along:
        raise ValueError(f"no robust-model axis of {list(axes_)} takes two values: nothing to compare")
    fig = Figure(figsize=(5.2 * len(along), 4.8), layout="constrained")
    axs = np.atleast_1d(fig.subplots(1, len(along), squeeze=False)[0])
    drawn = []
    methods = sorted(rows["method"].unique())
    for ax, a in zip(axs, along):
        t = stability_table(rows, a)
        others = [c for c in t.columns if c not in ("method", "query_id", "from", "to", "jaccard_distance")]
        mean = t.groupby(["method", *others, "from", "to"], dropna=False)["jaccard_distance"].agg(["mean", "size"])
        mean = mean.reset_index().rename(columns={"mean": "jaccard_distance", "size": "queries"})
        pairs = sorted(set(zip(mean["from"], mean["to"])))
        pos = {p: i for i, p in enumerate(pairs)}
        curves = mean.groupby(["method", *others], dropna=False, sort=True)
        seen: dict[str, int] = {}
        dodge = 0.25 / max(1, curves.ngroups)  # equal curves side by side instead of on top of each other
        for c, (key, g) in enumerate(curves):
            key = key if isinstance(key, tuple) else (key,)
            label = key[0] + ("" if not others else " (" + _title(dict(zip(others, key[1:]))) + ")")
            i = methods.index(key[0])
            j = seen[key[0]] = seen.get(key[0], -1) + 1  # the method's j-th curve: its own line style
            g = g.sort_values("from")
            xs = np.array([pos[p] for p in zip(g["from"], g["to"])]) + (c - (curves.ngroups - 1) / 2) * dodge
            ax.plot(xs, g["jaccard_distance"], color=_color(i), marker=_MARKERS[i % len(_MARKERS)], ms=4,
                    ls=("-", "--", ":", "-.")[j % 4], label=label)
        ax.set_xticks(range(len(pairs)), [f"{p[0]:g}->{p[1]:g}" for p in pairs], fontsize=7, rotation=30)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel(f"neighbouring {_LABELS.get(a, a)}", fontsize=8)
        ax.set_ylabel("Jaccard distance of the selected sets", fontsize=8)
        ax.set_title(f"stability along {a}" + (f" (per {', '.join(others)})" if others else ""), fontsize=9)
        ax.grid(alpha=0.3)
        ax.set_xlim(-0.5, len(pairs) - 0.5)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=2, frameon=False)
        drawn.append(mean.assign(along=a))
    fig.suptitle("stability of the selected set between neighbouring settings (0 = same set), means over queries",
                 fontsize=9)
    return fig, pd.concat(drawn, ignore_index=True)
