"""``divopt-rag demo``: every selector on one embedded synthetic redundant corpus (no download).

Generates a narrow-cone pool with planted near-duplicate clusters, of which a few are relevant
to the query (the ``synthetic`` dataset of ``divopt_rag.data.load``, one query), runs every method of
``divopt_rag.solvers.instance_methods()`` (those needing no texts) on the same instance, prints a
table (mean relevance, ILAD, clusters covered, relevant clusters covered, CCBQP objective, time)
and writes ``demo.parquet`` and ``demo.png``/``demo.svg`` to ``--out``.

The picture has three panels that share one story: top-k picks near-duplicates of one or two
clusters; diverse methods cover more clusters at a small relevance cost.

* relevance vs diversity: mean relevance (cosine to the query) against ILAD (mean pairwise
  1 - cos), both axes from 0; methods that chose the same set share one point and one label,
  labels sit in a column with leader lines that neither overlap nor cross; a star marks the
  best CCBQP objective and an open marker the expected values of a random k-set of the pool;
* clusters covered by the k picks, split into the planted relevant clusters and the others,
  bars from 0 to k;
* the CCBQP objective as the normalized gap to the best set found, (f_best - f) / (k(k-1)),
  bars from 0 (the best set has gap 0).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from divopt_rag.data import load
from divopt_rag.experiments.engine import store
from divopt_rag.experiments.measures import quality
from divopt_rag.experiments.measures.metrics import ilad
from divopt_rag.models import Instance, normalized_gap
from divopt_rag.models.extras import require
from divopt_rag.solvers import instance_methods, select

__all__ = ["DEMO_WORK_MAX", "LIGHT", "demo_figure", "demo_methods", "main", "plot_demo", "random_set_reference", "run_demo"]



# the published methods (DESIGN.md: a plain name is the published method with its defaults);
# every other registered name is one of divopt's own variants
_PUBLISHED = frozenset({"topk", "fw", "mmr", "gmmr", "dpp", "dartboard", "dartboard_hybrid", "dartboard_cc", "vrsd"})


def _is_variant(method: str) -> bool:
    return method not in _PUBLISHED


#: The demo bounds its own work (issue 46): a selector outside :data:`LIGHT` runs only where
#: n k^2 <= DEMO_WORK_MAX. Their cost grows about as n k^2 (greedy re-scoring k times over the
#: pool, local-search swaps that each read the n x k swap table): at n = 2000, k = 1000 (n k^2 =
#: 2e9) the slowest took 25 to over 60 s each (benchmarks/results/speed/large_k_baseline.md), so
#: 2e8 (n = 20000 with k = 100, or n = 2000 with k = 316) keeps each to seconds.
DEMO_WORK_MAX = 2 * 10**8
#: Selectors whose cost is about linear in k (one sort, or FW's iterations over the pool): they
#: run at every size (n = 5000, k = 4000, d = 16: each well under a second).
LIGHT = frozenset({"topk", "fw", "fw_ws", "fw_topk"})


def demo_methods(n: int, k: int, work_max: int = DEMO_WORK_MAX) -> tuple[list[str], list[str]]:
    """(run, skipped): the selectors the demo runs at n, k by its size rule, and those it skips."""
    run, skipped = [], []
    for method in instance_methods():
        (run if method in LIGHT or n * k * k <= work_max else skipped).append(method)
    return run, skipped




def run_demo(n: int = 20_000, d: int = 384, k: int = 10, theta: float = 0.7, seed: int = 0,
             work_max: int = DEMO_WORK_MAX) -> pd.DataFrame:
    """One tidy row per method on the synthetic pool (same instance for every method).

    Every selector runs while n k^2 <= ``work_max`` (:data:`DEMO_WORK_MAX`); above it only the
    :data:`LIGHT` ones, and one printed line names those skipped.

    ``clusters`` counts the distinct clusters among the k picks; ``relevant_clusters`` those of
    the ``relevant_planted`` clusters the query was built from; ``random_ilad`` and
    ``random_relevance`` are what a uniformly random k-set gets on average (the same on every
    row: the plot's reference point).
    """
    data = load({"name": "synthetic", "n": n, "d": d, "n_queries": 1, "seed": seed, "subtopics": "all"})
    E, q, qid = np.asarray(data.E), np.asarray(data.Q[0]), data.query_ids[0]
    cluster = data.subtopics[qid]  # every passage labelled "c<id>" by its planted cluster
    labels = np.array([int(cluster[p][1:]) for p in data.doc_ids])
    relevant = {int(cluster[p][1:]) for p, grade in data.qrels[qid].items() if grade > 0}
    n_clusters = len(np.unique(labels))
    inst = Instance(E, q, k=k, theta=theta)
    c = inst.relevance.numpy()
    random_ilad, random_relevance = random_set_reference(E, q)
    run_id = store.run_id(dict(n=n, d=d, k=k, theta=theta, seed=seed))
    rows = []
    methods, skipped = demo_methods(n, k, work_max)
    if skipped:
        print(f"demo: skipped {', '.join(skipped)}: n k^2 = {n * k * k:.3g} > {work_max:.3g}, the demo's bound "
              f"(each runs with divopt_rag.solvers.select(instance, method))", flush=True)
    for method in tqdm(methods, desc="selectors", leave=False):  # those needing texts are skipped
        sel = select(inst, method)
        picked = set(labels[sel.indices].tolist())
        rows.append(
            {
                "run_id": run_id,
                "dataset": f"synthetic(n={n},d={d},seed={seed})",
                "n": n,
                "n_clusters": n_clusters,
                "method": method,
                "k": k,
                "theta": theta,
                "relevance": float(c[sel.indices].mean()),
                "ilad": ilad(inst.E, sel.indices),
                "clusters": len(picked),
                "relevant_clusters": len(picked & relevant),
                "relevant_planted": len(relevant),
                "random_ilad": random_ilad,
                "random_relevance": random_relevance,
                "objective": sel.objective,
                "seconds": sel.seconds,
                "iterations": sel.iterations,
                "selected": [str(data.doc_ids[i]) for i in sel.indices],
            }
        )
    return pd.DataFrame(rows).sort_values("objective", ascending=False, ignore_index=True)


def random_set_reference(E: np.ndarray, q: np.ndarray) -> tuple[float, float]:
    """(expected ILAD, expected mean relevance) of a uniformly random k-set of the pool.

    Both are exact pool averages: E[mean c] = mean_i c_i, and E[ILAD] = 1 - mean over pairs
    i != j of w_ij = 1 - (||sum_i e_i||^2 - n) / (n (n-1)) (unit rows), independent of k.
    """
    E64 = np.asarray(E, dtype=np.float64)
    n = E64.shape[0]
    s = E64.sum(axis=0)
    mean_w = (float(s @ s) - n) / (n * (n - 1)) if n > 1 else 1.0
    return 1.0 - mean_w, float((E64 @ np.asarray(q, dtype=np.float64)).mean())


def _spread(targets: np.ndarray, heights: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Centres for labels of the given heights, as close as possible (least squares) to
    ``targets`` (sorted descending) with no overlap and inside [lo, hi].

    Pool-adjacent-violators on blocks: labels that would overlap are merged into a block laid
    out contiguously, whose top is the mean of what each member wants; the column is then
    moved into [lo, hi] (if the labels are taller than hi - lo, the top ones stick out)."""
    offs = np.concatenate([[0.0], np.cumsum(heights)])  # offs[i]: height of labels above i
    blocks: list[list] = []  # [first index, last index, top]
    for i, t in enumerate(targets):
        blocks.append([i, i, t + heights[i] / 2])
        while len(blocks) > 1:
            (a0, a1, a_top), (_, b1, b_top) = blocks[-2], blocks[-1]
            if a_top - (offs[a1 + 1] - offs[a0]) >= b_top:
                break
            members = np.arange(a0, b1 + 1)
            # centre_j = top - (offs[j] - offs[a0]) - h_j / 2 ; least squares in top
            top = float(np.mean(targets[members] + offs[members] - offs[a0] + heights[members] / 2))
            blocks[-2:] = [[a0, b1, top]]
    y = np.empty_like(targets, dtype=float)
    for first, last, top in blocks:
        for j in range(int(first), int(last) + 1):
            y[j] = top - (offs[j] - offs[int(first)]) - heights[j] / 2
    # keep inside [lo, hi]: a pass down from the top, then a pass up from the bottom (which
    # stays below hi whenever the labels fit in hi - lo at all)
    for j in range(len(y)):
        cap = hi - heights[j] / 2 if j == 0 else y[j - 1] - (heights[j - 1] + heights[j]) / 2
        y[j] = min(y[j], cap)
    for j in range(len(y) - 1, -1, -1):
        floor = lo + heights[j] / 2 if j == len(y) - 1 else y[j + 1] + (heights[j + 1] + heights[j]) / 2
        y[j] = max(y[j], floor)
    return y


def _crosses(p1, q1, p2, q2) -> bool:
    """Whether segments p1-q1 and p2-q2 properly intersect (orientation test)."""
    def orient(a, b, c):
        return np.sign((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))

    return orient(p1, q1, p2) * orient(p1, q1, q2) < 0 and orient(p2, q2, p1) * orient(p2, q2, q1) < 0


def _label_column(xy: np.ndarray, heights: np.ndarray, x_text: float, lo: float, hi: float):
    """Order and heights of labels in a column at ``x_text`` (axes fractions) for points ``xy``:
    start from the points' heights, then swap neighbours whose leader lines cross."""
    order = list(np.argsort(-xy[:, 1], kind="stable"))
    place = lambda o: _spread(xy[o, 1], heights[o], lo, hi)
    ys = place(order)
    for _ in range(4 * len(order)):
        for j in range(len(order) - 1):
            a, b = order[j], order[j + 1]
            if _crosses(xy[a], (x_text, ys[j]), xy[b], (x_text, ys[j + 1])):
                order[j], order[j + 1] = b, a
                ys = place(order)
                break
        else:
            break
    return order, ys


def _group_label(methods: list[str]) -> str:
    """One label for methods that chose the same set ("a = b"), at most three names per line."""
    ms = sorted(methods, key=lambda m: (m.endswith("_ls"), m))
    return "\n= ".join(" = ".join(ms[i:i + 3]) for i in range(0, len(ms), 3))


def _relevance_diversity(ax, df: pd.DataFrame) -> None:
    groups = (
        df.assign(key=df["selected"].map(lambda ids: tuple(sorted(ids))))
        .groupby("key", sort=False)
        .agg(methods=("method", list), ilad=("ilad", "first"), relevance=("relevance", "first"))
        .reset_index(drop=True)
    )
    best = set(df.loc[df["objective"] == df["objective"].max(), "method"])
    xy = groups[["ilad", "relevance"]].to_numpy(dtype=float)
    reference = None
    if {"random_ilad", "random_relevance"} <= set(df.columns):
        reference = (float(df["random_ilad"].iat[0]), float(df["random_relevance"].iat[0]))
    x_max = max(1.0, 1.1 * max(xy[:, 0].max(), reference[0] if reference else 0.0))
    ax.set_xlim(0, x_max)
    ax.set_ylim(0, 1)
    # the label column, in axes fractions, right of every marker
    x_text = max(xy[:, 0].max(), reference[0] if reference else 0.0) / x_max + 0.06
    top_rel = float(df.loc[df["method"] == "topk", "relevance"].max())
    ax.axhline(top_rel, xmax=x_text - 0.02, color="0.75", lw=0.8, ls=":", zorder=0)
    ax.text(0.01, top_rel + 0.012, "top-k relevance", fontsize=7, color="0.5")
    for (x, y), methods in zip(xy, groups["methods"]):
        if best & set(methods):
            ax.scatter([x], [y], s=150, marker="*", color="C1", zorder=3, label="best CCBQP objective")
        else:  # drawn above the star: a near-identical set stays visible
            ax.scatter([x], [y], s=36, color="C0", edgecolors="white", linewidths=0.6, zorder=4)
    if reference is not None:
        ax.scatter(*reference, s=40, facecolors="none", edgecolors="0.5", linewidths=1.4, zorder=3,
                   label="random k-set (expected)")
    ax.plot([], [], " ", label='"a = b": the same k picks')
    # labels in a column right of every point: no overlaps by construction, no crossing lines
    labels = [_group_label(m) for m in groups["methods"]]
    heights = np.array([0.042 * (t.count("\n") + 1) + 0.014 for t in labels])
    order, ys = _label_column(np.column_stack([xy[:, 0] / x_max, xy[:, 1]]), heights, x_text, lo=0.02, hi=0.98)
    for i, y_text in zip(order, ys):
        ax.annotate(
            labels[i], tuple(xy[i]), xytext=(x_text, y_text), textcoords="axes fraction", fontsize=7.5,
            va="center", ha="left", arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.6, "shrinkA": 2, "shrinkB": 3, "relpos": (0, 0.5)},
        )
    ax.set_xlabel("diversity: ILAD, mean pairwise (1 − cos)  →")
    ax.set_ylabel("relevance: mean cos(query, pick)  →")
    ax.set_title("Relevance vs diversity of the k picks", fontsize=10)
    ax.legend(loc="lower left", fontsize=7.5, frameon=False)


def _clusters(ax, df: pd.DataFrame) -> None:
    y = np.arange(len(df))
    k = int(df["k"].iat[0])
    rel, other = df["relevant_clusters"].to_numpy(), (df["clusters"] - df["relevant_clusters"]).to_numpy()
    ax.barh(y, rel, color="C2", label="relevant clusters (planted)")
    ax.barh(y, other, left=rel, color="C2", alpha=0.3, label="other clusters")
    planted = int(df["relevant_planted"].iat[0])
    ax.axvline(planted, color="C2", ls="--", lw=0.9)
    x_max = max(k, planted) + 0.8
    left = planted <= x_max / 2  # write the note on the side of the line with room for it
    ax.text(planted, -0.7, f" {planted} relevant clusters planted ", fontsize=7, color="C2", va="bottom",
            ha="left" if left else "right")
    for yi, tot in zip(y, df["clusters"]):
        ax.text(tot + 0.1, yi, str(int(tot)), va="center", fontsize=7)
    ax.set_xlim(0, x_max)
    ax.set_yticks(y, df["method"])
    for tick, m in zip(ax.get_yticklabels(), df["method"]):
        tick.set_color("C1" if _is_variant(m) else "0.1")
    ax.set_ylim(len(df) - 0.5, -1.2)  # best method on top, room for the note
    ax.set_xlabel(f"distinct clusters among the k = {k} picks")
    ax.set_title("Clusters covered (near-duplicates cover one)", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=7.5, frameon=False)


def _objective_gap(ax, df: pd.DataFrame) -> None:
    y = np.arange(len(df))
    k = int(df["k"].iat[0])
    gap = np.array([normalized_gap(df["objective"].max(), f, k) for f in df["objective"]])
    variant = df["method"].map(_is_variant).to_numpy()
    ax.barh(y[~variant], gap[~variant], color="C0", label="published method")
    ax.barh(y[variant], gap[variant], color="C1", label="divopt variant")
    top = float(gap.max()) or 1.0
    for yi, g, v in zip(y, gap, variant):
        if g == 0:
            ax.plot([0], [yi], marker="*", ms=9, color="C1" if v else "C0", clip_on=False, zorder=3)
        ax.text(g + 0.015 * top, yi, "0 (best)" if g == 0 else f"{g:.4f}", va="center", fontsize=7)
    ax.set_xlim(0, 1.25 * top)
    ax.set_yticks(y)
    ax.tick_params(labelleft=False)
    ax.set_ylim(len(df) - 0.5, -1.2)
    ax.set_xlabel("(f_best − f) / (k(k−1)),  0 = best set found")
    ax.set_title("CCBQP objective: gap to the best set", fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=7.5, frameon=False)


def demo_figure(df: pd.DataFrame):
    """The three panels drawn from the table of :func:`run_demo` (or its parquet file), a
    matplotlib ``Figure`` (``pip install "divopt-rag[plots]"``)."""
    require("matplotlib", "the demo's figure (or --no-plot)")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(14, 5.6))
    # column 1 is an empty spacer that holds the method names of the bar panels
    grid = fig.add_gridspec(1, 4, width_ratios=[1.45, 0.2, 1, 1], wspace=0.06,
                            left=0.045, right=0.99, top=0.86, bottom=0.17)
    ax_a, ax_b, ax_c = (fig.add_subplot(grid[i]) for i in (0, 2, 3))
    _relevance_diversity(ax_a, df)
    _clusters(ax_b, df)
    _objective_gap(ax_c, df)
    k, theta = int(df["k"].iat[0]), float(df["theta"].iat[0])
    fig.suptitle(
        f"divopt-rag demo: every method picks k = {k} of {int(df['n'].iat[0]):,} synthetic passages "
        f"({int(df['n_clusters'].iat[0]):,} clusters of near-duplicates, "
        f"{int(df['relevant_planted'].iat[0])} relevant to the query), theta = {theta:g}",
        fontsize=11,
    )
    return fig


def plot_demo(df: pd.DataFrame, path: Path) -> list[Path]:
    """Write :func:`demo_figure` to ``path``.png and ``path``.svg; returns both paths."""
    from divopt_rag.experiments.plots.figures import save_figure

    return save_figure(demo_figure(df), path.parent, path.name)


def main(args) -> int:
    t0 = time.perf_counter()
    if not args.no_plot:  # before the work: a missing extra is one line, not a lost run
        require("matplotlib", "the demo's figure (or --no-plot)")
    df = run_demo(args.n, args.d, args.k, args.theta, args.seed)
    store.write_parquet(df, args.out / "demo.parquet")
    cols = ["method", "relevance", "ilad", "clusters", "relevant_clusters", "objective", "seconds", "iterations"]
    print(quality.format_table(df[cols]))
    written = [args.out / "demo.parquet"]
    if not args.no_plot:
        written += plot_demo(df, args.out / "demo")
    print(f"\nwrote {', '.join(str(p) for p in written)} in {time.perf_counter() - t0:.1f} s")
    return 0
