"""The flags of every ``divopt-rag`` command and the checks across them: argparse and the
standard library only, so building a parser imports nothing heavy (no torch, pandas, Pyomo, Ray,
sentence-transformers or matplotlib: each command imports those when it runs), ``divopt-rag
COMMAND --help`` is fast, and a bad flag is refused before the command's module is imported.

Three modules, by concept:

* :mod:`divopt_rag.experiments.cli.flag_types`: the value types (one list syntax, typed values
  that refuse a word with "expected X, got 'Y'") and the one-line errors (:class:`Parser`);
* :mod:`divopt_rag.experiments.cli.flag_checks`: the checks that need the file system or the
  registries (output paths, method and dataset names), called before any work; the memory
  estimates are :mod:`divopt_rag.experiments.engine.limits`';
* this module: each command's flags and its **checks across flags** (:data:`COMMAND_FLAGS`:
  ``--k`` larger than ``--n``, a flag that would be ignored, a run too large for this machine's
  memory), run after parsing, before the command's module is imported; and the run options the
  flags of every run command give the engine (:func:`run_options`: a
  :class:`~divopt_rag.experiments.engine.options.RunOptions`).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Callable, Iterable

from divopt_rag.experiments.cli.flag_types import (CORPUS, COUNT, CPUS, DATASET, DATASET_NAMES, EXACT_N, EXACT_SOLVER,
                                                   KEY_VALUES, METHOD, MODEL, MODULE, OUTPUT, REPEATS, SECONDS, SEED,
                                                   SOLVER_THREADS, THETA, THREADS, WORKERS, Choice, ExistingPath, Integer, KeyValues, Name, OutputPath,
                                                   Real, Text, _paths_split, add_list)
from divopt_rag.experiments.cli.library_flags import LIBRARY_FLAGS
from divopt_rag.experiments.engine.limits import BASE_BYTES, UsageError, check_memory
from divopt_rag.experiments.engine.options import RunOptions

__all__ = ["add_run_arguments", "run_options", "COMMAND_FLAGS", "flag_defaults", "iter_value_actions"]


# =============================================================================================
# Flags every run command shares (the executor's)
# =============================================================================================
def add_run_arguments(parser: argparse.ArgumentParser, *, parallel: bool = False) -> None:
    """The executor's flags: ``--new-grid``, ``--retry-errors``, ``--no-progress`` and, for specs
    that run on pools (``parallel``), ``--backend``, ``--n-workers``, ``--address``, ``--chunk-size``."""
    if parallel:
        parser.add_argument("--backend", type=Choice(("local", "ray")), default="local", help="local | ray (default local)")
        parser.add_argument("--n-workers", type=WORKERS, default=None,
                            help=f"worker processes (local) or a local Ray's CPUs (ray); default: none, the same "
                                 f"in every command: in this process with --backend local, this machine's "
                                 f"{CPUS} CPUs with --backend ray; 0 = in this process")
        parser.add_argument("--address", type=Text("a Ray cluster address (host:port or ray://host:port)",
                                                   bad=("",), pattern=r"^\S+$"),
                            help="Ray cluster address (with --backend ray), e.g. ray://host:10001; it must "
                                 "be a cluster on a trusted network (anyone who reaches a Ray cluster can run "
                                 "code on it). Default: a local Ray bound to 127.0.0.1")
        parser.add_argument("--chunk-size", type=COUNT, default=None, help="runs per worker call")
    parser.add_argument("--retry-errors", action="store_true", help="run again the runs that ended in an error")
    parser.add_argument("--new-grid", action="store_true",
                        help="run a configuration other than the one OUT holds; the previous config.json and "
                             "results.parquet are kept beside as config.<id>.json and results.<id>.parquet")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _check_run_arguments(args: argparse.Namespace) -> None:
    if getattr(args, "address", None) and getattr(args, "backend", None) != "ray":
        raise UsageError("--address", "--backend ray (a Ray address is used by the Ray backend only)",
                         f"--backend {args.backend}")
    workers = getattr(args, "n_workers", None)
    if workers == 0 and getattr(args, "backend", None) == "ray":
        raise UsageError("--n-workers", "an integer >= 1 with --backend ray (its CPUs; none: this machine's)", "0")
    if workers is not None and workers > CPUS and not getattr(args, "address", None):
        # processes (or a local Ray's CPUs) beyond this machine's only oversubscribe it
        raise UsageError("--n-workers", f"at most this machine's {CPUS} CPUs (more with --backend ray --address "
                                        f"of a larger cluster)", str(workers))


def run_options(args: argparse.Namespace) -> RunOptions:
    """The engine's :class:`~divopt_rag.experiments.engine.options.RunOptions` from the flags of
    :func:`add_run_arguments`."""
    opts = {"retry_errors": args.retry_errors, "new_grid": args.new_grid, "progress": not args.no_progress}
    if hasattr(args, "backend"):
        opts.update(backend=args.backend, n_workers=args.n_workers, address=args.address, chunk_size=args.chunk_size)
    return RunOptions(**opts)


# =============================================================================================
# The commands' flags
# =============================================================================================
def demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=COUNT, default=20_000, help="pool size (default 20000)")
    p.add_argument("--d", type=COUNT, default=384, help="embedding dimension (default 384)")
    p.add_argument("--k", type=COUNT, default=10,
                   help="selection size (default 10). The demo bounds its work: every selector runs while "
                        "n k^2 <= 2e8 (e.g. n 20000 with k 100); above it only topk, fw, fw_ws and fw_topk run, "
                        "and one printed line names the selectors skipped")
    p.add_argument("--theta", type=THETA, default=0.7, help="relevance-diversity trade-off in [0,1] (default 0.7)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--out", type=OUTPUT, default=Path("divopt-demo"), help="output folder (demo.parquet, demo.png, demo.svg)")
    p.add_argument("--no-plot", action="store_true", help="skip the plot")


#: Bytes per pool element (n x d) the demo needs at its peak: E (float32), the float64 pass of
#: the random-set reference and the selectors' working set. Measured (peak RSS of ``divopt-rag
#: demo --no-plot``): 686 MB at n x d = 1e5 x 256, 1028 MB at 2e5 x 256, 1586 MB at 1e5 x 1024,
#: i.e. 11.7-13.3 bytes per element above a base of about 345 MB; 16 keeps a margin.
DEMO_BYTES_PER_ELEMENT = 16


def check_demo(args: argparse.Namespace) -> None:
    if args.k > args.n:
        raise UsageError("--k", f"an integer <= --n ({args.n})", str(args.k))
    check_memory(BASE_BYTES + DEMO_BYTES_PER_ELEMENT * args.n * args.d, "pool (n x d)", "--n/--d",
                 "use a smaller --n or --d")


def bench_latency(p: argparse.ArgumentParser) -> None:
    add_list(p, "--n", item=COUNT, default=[100_000], help="pool sizes (default 100000; 1000000 for the paper scale)")
    add_list(p, "--d", item=COUNT, default=[384, 1024], help="embedding dimensions (default 384 1024)")
    add_list(p, "--k", item=COUNT, default=[10, 50, 100], help="selection sizes (default 10 50 100)")
    add_list(p, "--theta", item=THETA, default=[0.3, 0.5, 0.7, 0.9], help="trade-offs (default 0.3 0.5 0.7 0.9)")
    add_list(p, "--methods", item=METHOD, default=None,
             help="selectors (default: every selector that runs on an Instance alone)")
    p.add_argument("--default-method", type=METHOD, default=None,
                   help="the method whose targets are checked (default: DEFAULT_METHOD)")
    p.add_argument("--repeats", type=REPEATS, default=2, help="timed repeats per cell; the median is reported (default 2)")
    p.add_argument("--dtype", type=Choice(("float32", "float16", "bfloat16")), default="float32",
                   help="float32 | float16 | bfloat16 (default float32)")
    p.add_argument("--device", type=Text("a torch device: auto, cpu, cuda, cuda:N or mps", bad=("nosuch", "cuda:x"),
                                         pattern=r"^(auto|cpu|cuda|mps|xpu)(:\d+)?$"),
                   default="auto", help="auto (cuda when available, else cpu) | cpu | cuda[:N] | mps")
    add_list(p, "--langchain", item=COUNT, empty="skip the comparison", default=[10_000, 50], metavar="N,K",
             help="compare MMR with LangChain's at n,k (d = first --d); '' to skip")
    p.add_argument("--threads", type=THREADS, default=None,
                   help=f"torch intra-op threads, at most this machine's {CPUS} CPUs (default or 0: torch's choice)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--out", type=OUTPUT, default=Path("results/latency"),
                   help="output folder (latency.csv, latency.json, results.parquet)")
    add_run_arguments(p)


_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def check_bench_latency(args: argparse.Namespace) -> None:
    if max(args.k) > min(args.n):
        raise UsageError("--k", f"sizes <= the smallest --n ({min(args.n)})", str(max(args.k)))
    if args.langchain:
        if len(args.langchain) != 2:
            raise UsageError("--langchain", "two integers N,K (or '' to skip)", ",".join(map(str, args.langchain)))
        if args.langchain[1] > args.langchain[0]:
            raise UsageError("--langchain", f"K <= N ({args.langchain[0]})", str(args.langchain[1]))
    # E in the timed dtype, its float32 block while generated, and the selectors' extra (<= 1.3 |E|)
    elements = max(args.n) * max(args.d)
    need = BASE_BYTES + elements * (2.3 * _DTYPE_BYTES[args.dtype] + 4)
    check_memory(need, "largest pool (n x d)", "--n/--d", "use a smaller --n or --d")


def bench_exact(p: argparse.ArgumentParser) -> None:
    add_list(p, "--n", item=EXACT_N, default=[50, 100], help="pool sizes (top-n of relevance; default 50 100)")
    add_list(p, "--k", item=COUNT, default=[10], help="selection sizes (default 10; pairs with k >= n are skipped)")
    add_list(p, "--theta", item=THETA, default=[0.5, 0.9], help="relevance-diversity trade-offs (default 0.5 0.9)")
    p.add_argument("--full", action="store_true", help="the full grid n={50,100,200}, k={5,10,20}, theta={.3,.5,.7,.9}")
    p.add_argument("--queries", type=COUNT, default=2, help="number of query words (from the ambiguity benchmark)")
    p.add_argument("--query-offset", type=Integer(min=0), default=0,
                   help="skip this many query words first (held-out words for reported runs)")
    add_list(p, "--solvers", item=Name("a solver (gurobi, scip, highs, bnb), optionally solver/formulation",
                                       "solvers", bad=("cplex",), pattern=r"^[A-Za-z0-9_]+(/[A-Za-z0-9_]+)?$"),
             default=None, help="solvers to time, optionally as solver/formulation (e.g. gurobi/qcr); default: every "
                                "installed one and divopt's bnb")
    p.add_argument("--formulation", type=Name("a formulation name", bad=("nosuch",)), default="auto",
                   help="CCBQP formulation for every solver (default: each solver's own)")
    p.add_argument("--time-limit", type=SECONDS, default=30.0, help="seconds per solve")
    p.add_argument("--threads", type=SOLVER_THREADS, default=None,
                   help=f"solver threads, at most this machine's {CPUS} CPUs (default: solver's own)")
    p.add_argument("--warm-start", type=Choice(("none", "fw")), default="none", help="warm start every solver from FW")
    p.add_argument("--extra-glosses", type=Integer(min=0), default=1500,
                   help="random WordNet noun glosses added as distractors")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--cache-dir", type=OutputPath("a folder", as_path=False),
                   default=os.path.join(os.path.expanduser("~"), ".cache", "divopt", "embeddings"),
                   help="embedding cache (default: the user's cache folder, ~/.cache/divopt-rag/embeddings on Linux, or DIVOPT_RAG_CACHE_DIR)")
    p.add_argument("--out", type=OUTPUT, default=Path("results/exact"), help="output folder (results.parquet, results.csv)")
    p.add_argument("--log-dir", type=OutputPath("a folder", as_path=False), default=None,
                   help="directory for solver logs (default: none)")
    add_run_arguments(p)


def check_bench_exact(args: argparse.Namespace) -> None:
    if args.full:
        for flag, default in (("n", [50, 100]), ("k", [10]), ("theta", [0.5, 0.9])):
            if getattr(args, flag) != default:
                raise UsageError("--full", f"no --{flag} (--full sets n, k and theta)", f"--{flag} given too")
        return
    fits = [k for k in args.k if k < max(args.n)]
    unfit = sorted(set(args.k) - set(fits))
    if unfit:
        raise UsageError("--k", f"sizes < the largest --n ({max(args.n)})", ",".join(map(str, unfit)))


def bench_quality(p: argparse.ArgumentParser) -> None:
    add_list(p, "--parts", item=Choice(("small", "large", "batch")), default=["small", "large", "batch"],
             help="small large batch (default all)")
    add_list(p, "--methods", item=METHOD, default=None,
             help="selectors of the small pools (default: every selector that runs on an Instance alone)")
    p.add_argument("--default-method", type=METHOD, default=None,
                   help="the method whose targets are checked (default: divopt_rag.solvers.DEFAULT_METHOD)")
    # small pools
    p.add_argument("--dataset", type=DATASET, default="wordnet_glosses",
                   help="dataset of the small part: wordnet_glosses (seeded polysemous WordNet nouns, their senses "
                        "as subtopics; --corpus-size, --exclude-seeds) or any dataset with qrels, "
                        f"{DATASET_NAMES}; with qrels the run also writes OUT/quality_ir.csv and OUT/quality_ir.md "
                        "(alpha-nDCG, nDCG and S-recall at --k per method and theta)")
    p.add_argument("--queries", type=COUNT, default=25,
                   help="query words of wordnet_glosses, the first N queries of another --dataset (default 25)")
    add_list(p, "--theta", item=THETA, default=[0.3, 0.5, 0.7, 0.9], help="thetas of the small-pool set")
    p.add_argument("--pool", type=EXACT_N, default=100, help="pool size per query, each certified exactly (default 100)")
    p.add_argument("--k", type=COUNT, default=10)
    p.add_argument("--corpus-size", type=CORPUS, default=3000, help="WordNet glosses embedded (default 3000)")
    add_list(p, "--exclude-seeds", item=SEED, default=[], empty="no held-out seeds",
             help="held-out evaluation: leave out every query word that these seeds draw (--exclude-queries words "
                  "each), e.g. the seeds a method was tuned on (default none)")
    p.add_argument("--exclude-queries", type=COUNT, default=25,
                   help="query words per excluded seed (default 25, the size of the tuning runs)")
    p.add_argument("--solver", type=EXACT_SOLVER, default="auto",
                   help="exact solver (default auto: Gurobi if the license allows)")
    p.add_argument("--time-limit", type=SECONDS, default=120.0, help="exact solver time limit per instance (s)")
    p.add_argument("--exact-threads", type=SOLVER_THREADS, default=None,
                   help=f"exact solver threads, at most this machine's {CPUS} CPUs (default: the solver's)")
    p.add_argument("--mip-gap", type=Real(0.0), default=1e-7, help="relative MIP gap asked of the exact solver")
    p.add_argument("--cache-dir", type=OutputPath("a folder"), default=Path("results/cache"), help="embedding cache")
    # large pools
    p.add_argument("--large-n", type=COUNT, default=100_000, help="rows of each synthetic pool of the large part")
    p.add_argument("--large-d", type=COUNT, default=384, help="embedding dimension of the large and batch parts")
    add_list(p, "--large-k", item=COUNT, default=[10], help="selection sizes of the large part (default 10)")
    p.add_argument("--large-queries", type=COUNT, default=2, help="query vectors (pools) of the large part")
    add_list(p, "--large-theta", item=THETA, default=[0.3, 0.5, 0.7, 0.9], help="thetas of the large part")
    add_list(p, "--large-methods", item=METHOD, default=None,
             help="methods timed on the large pools (default: every selector that runs on an Instance alone); "
                  "fw = the paper's Algorithm 1, the ratios are to it")
    p.add_argument("--repeats", type=REPEATS, default=3, help="timed repeats per large-pool cell (median)")
    # batch
    p.add_argument("--batch-n", type=COUNT, default=100_000, help="rows of the pool of the batch part")
    p.add_argument("--batch-queries", type=COUNT, default=16, help="queries solved in one batch")
    add_list(p, "--batch-thetas", item=THETA, default=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
             help="thetas solved in one batch")
    p.add_argument("--threads", type=THREADS, default=1,
                   help="torch intra-op threads (default 1: on a loaded 2-core machine small kernels are 10x slower "
                        "with 2; 0 = torch's choice)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--out", type=OUTPUT, default=Path("results/quality"),
                   help="output folder (quality.json; each part's results.parquet and results.csv in a folder of "
                        "its own)")
    add_run_arguments(p)


def check_bench_quality(args: argparse.Namespace) -> None:
    if "small" in args.parts:
        if args.k > args.pool:
            raise UsageError("--k", f"an integer <= --pool ({args.pool})", str(args.k))
        if args.dataset != "wordnet_glosses":
            defaults = flag_defaults(bench_quality)
            for flag in ("corpus_size", "exclude_seeds", "exclude_queries"):
                if getattr(args, flag) != defaults[flag]:
                    raise UsageError(f"--{flag.replace('_', '-')}", "--dataset wordnet_glosses (it sets the WordNet "
                                     "corpus; another dataset is read as it is)", f"--dataset {args.dataset}")
        elif args.pool > args.corpus_size:
            raise UsageError("--pool", f"an integer <= --corpus-size ({args.corpus_size})", str(args.pool))
    if "large" in args.parts:
        if max(args.large_k) > args.large_n:
            raise UsageError("--large-k", f"sizes <= --large-n ({args.large_n})", str(max(args.large_k)))
        check_memory(BASE_BYTES + 2.3 * 4 * args.large_n * args.large_d, "large pool (n x d)",
                     "--large-n/--large-d", "use a smaller --large-n or --large-d")
    if "batch" in args.parts:
        if args.large_k[0] > args.batch_n:
            raise UsageError("--large-k", f"a first size <= --batch-n ({args.batch_n})", str(args.large_k[0]))
        # the batched sweeps keep a (queries x thetas) x n relevance and working set beside E
        per_row = 4 * args.large_d * 2.3 + 8 * 3 * args.batch_queries * len(args.batch_thetas)
        check_memory(BASE_BYTES + per_row * args.batch_n, "batch pool (n x d) and batched sweeps",
                     "--batch-n/--large-d/--batch-queries", "use a smaller --batch-n or fewer --batch-queries")


def certify(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", type=DATASET, default="synthetic",
                   help=f"synthetic (--corpus-size, --dim) or a divopt_rag.data dataset: {DATASET_NAMES}")
    p.add_argument("--model", type=MODEL, default=None,
                   help="sentence-transformers model of a text dataset: a local folder or a model in the local "
                        "Hugging Face cache (default: the offline all-MiniLM-L6-v2)")
    p.add_argument("--cache-dir", type=OutputPath("a folder", as_path=False), default=None,
                   help="embedding cache (default: the user's cache folder, ~/.cache/divopt-rag/embeddings on Linux, or DIVOPT_RAG_CACHE_DIR)")
    p.add_argument("--n", type=COUNT, default=20, help="pool size: top-n passages by relevance per query")
    p.add_argument("--k", type=COUNT, default=5, help="selection size")
    add_list(p, "--theta", item=THETA, default=[0.3, 0.5, 0.7, 0.9], help="theta grid")
    add_list(p, "--methods", item=METHOD, default=None, help="selectors (default: every registered one)")
    p.add_argument("--solver", type=EXACT_SOLVER, default="auto",
                   help="exact solver (auto: enumeration for small pools, else the first MIP solver that fits)")
    p.add_argument("--time-limit", type=SECONDS, default=None,
                   help="seconds per exact solve (default: divopt's DEFAULT_TIME_LIMIT, 60)")
    p.add_argument("--queries", type=COUNT, default=5, help="number of queries (synthetic: corpora)")
    p.add_argument("--corpus-size", type=COUNT, default=2000, help="synthetic corpus size")
    p.add_argument("--dim", type=COUNT, default=64, help="synthetic embedding dimension")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--full-scale", action="store_true", help="also certify each query on its whole pool")
    p.add_argument("--max-exact", type=COUNT, default=1000,
                   help="full scale: solve the survivors exactly (Gurobi within its licence, else divopt's bnb) "
                        "when <= this many survive")
    p.add_argument("--fw-max-iter", type=COUNT, default=500, help="full scale: iterations of the concave FW bound")
    p.add_argument("--sigma", type=Real(0.0, min_open=True), default=None,
                   help="also compute the Dartboard score with this sigma")
    p.add_argument("--out", type=OUTPUT, default=Path("results/certify"),
                   help="output folder (results.parquet; resumable)")
    add_run_arguments(p, parallel=True)


def check_certify(args: argparse.Namespace) -> None:
    _check_run_arguments(args)
    if args.k > args.n:
        raise UsageError("--k", f"an integer <= --n ({args.n}, the pool size)", str(args.k))
    if args.dataset == "synthetic":
        if args.model is not None:
            raise UsageError("--model", "no model with --dataset synthetic (its vectors are generated, not embedded)",
                             repr(args.model))
        if args.n > args.corpus_size:
            raise UsageError("--n", f"an integer <= --corpus-size ({args.corpus_size})", str(args.n))
        check_memory(BASE_BYTES + 4 * 3 * args.queries * args.corpus_size * args.dim, "synthetic corpora",
                     "--queries/--corpus-size/--dim", "use a smaller --corpus-size or --dim")


def sweep(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Run a grid of methods x parameters x queries; every finished run is written atomically to "
        "OUT/parts, so re-running the same command after a kill resumes where it stopped. "
        "The tidy table is OUT/results.parquet."
    )
    p.add_argument("--config", type=ExistingPath("file", "an existing sweep config file (.json, .toml, .yaml)"),
                   help="sweep config (.json, .toml, or .yaml); flags below override it")
    p.add_argument("--out", type=OUTPUT, default=Path("results/sweep"), help="output folder (results.parquet; resumable: OUT/parts)")
    p.add_argument("--dataset", type=DATASET, help=f"dataset NAME or NAME:ARG: {DATASET_NAMES} (default synthetic)")
    p.add_argument("--dataset-opt", action="append", default=[], metavar="NAME=VALUE", type=KeyValues(many=False),
                   help="dataset option, e.g. n=400 (repeatable)")
    add_list(p, "--methods", item=METHOD, help="methods (fast selectors, robust models, registered extras)")
    add_list(p, "--theta", item=THETA, help="theta grid")
    add_list(p, "--k", item=COUNT, help="k grid")
    add_list(p, "--pool", item=Integer(min=1, allow_none=True),
             help="pool sizes (top-n by relevance per query; none = all)")
    p.add_argument("--param", action="append", default=[], type=KEY_VALUES, metavar="NAME=V1,V2",
                   help="common grid axis for the methods that accept it, e.g. sigma=0.05,0.1 (repeatable)")
    p.add_argument("--method-param", action="append", default=[], metavar="METHOD.NAME=V1,V2",
                   type=KeyValues(dotted=True), help="grid axis of one method, e.g. dartboard.sigma=0.1,0.2 (repeatable)")
    p.add_argument("--queries", type=COUNT, help="use the first N queries")
    p.add_argument("--seed", type=SEED, help="base seed (default 0)")
    add_list(p, "--plugin", item=MODULE, default=[], help="modules to import in driver and workers")
    p.add_argument("--evaluator", type=Text("coverage or metric:NAME", bad=("nosuch", "metric:nosuch")),
                   help="score each selection: coverage | metric:<name> (openai: via --config)")
    p.add_argument("--consolidate-only", action="store_true", help="only rebuild OUT/results.parquet from the parts")
    p.add_argument("--adaptive-metric", type=Name("a metric name", bad=("nosuch",)),
                   help="also write OUT/adaptive.parquet: per-query Oracle/gated theta by this metric (a ranking "
                        "metric without cutoff, e.g. s_recall: at each k)")
    add_run_arguments(p, parallel=True)


def check_sweep(args: argparse.Namespace) -> None:
    _check_run_arguments(args)


def plot(p: argparse.ArgumentParser) -> None:
    kinds = ("pareto", "latency", "gaps", "certified", "robust", "all")
    p.add_argument("kind", type=Choice(kinds), help=" | ".join(kinds))
    add_list(p, "--input", "-i", item=ExistingPath("any", "an existing result file or folder"), split=_paths_split,
             required=True, help="result file(s) or folder(s): parquet/CSV/JSON (all: certify, sweep and latency outputs)")
    p.add_argument("--out", type=OUTPUT, default=Path("results/plots"), help="output folder for PNG and SVG files")
    column = Name("a column or metric name", "column or metric names", bad=("nosuch",))
    p.add_argument("--x", type=column, default="ilad", help="Pareto x metric (diversity)")
    p.add_argument("--y", type=column, default="recall",
                   help="Pareto y metric (relevance; a ranking metric is read at each row's k: recall means recall@k)")
    add_list(p, "--param", item=column, default=["rho_vec", "sparsity_penalty"], help="robust plot parameters")
    add_list(p, "--metrics", item=column, default=["recall", "ilad", "objective"], help="robust plot metrics")
    p.add_argument("--value", type=column, default="seconds", help="latency column: seconds | gemv_equivalents")
    p.add_argument("--theta", type=THETA, default=None, help="latency plot: keep one theta (default: one panel each)")


def reproduce(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Reproduce a seed paper's headline table: runs the paper's protocol with the published methods, "
        "writes one tidy parquet row per query x method x setting (resumable: re-run the same command after a "
        "kill) and prints the table beside the published numbers. --list shows every recipe and what it needs."
    )
    p.add_argument("recipe", nargs="?", type=Name("a recipe name (see --list)", bad=("nosuch",)),
                   help="recipe name (see --list)")
    p.add_argument("--list", action="store_true", help="list the recipes: paper, table, what each needs")
    p.add_argument("--out", type=OUTPUT, help="output folder (results.parquet; resumable) (default: "
                                              "results/reproduce/RECIPE, in the current folder)")
    p.add_argument("--data-dir", type=Path, default=Path("datasets"),
                   help="where the datasets are, in divopt_rag.data.download.fetch's layout (default datasets/)")
    p.add_argument("--limit", type=COUNT, help="first N queries of each dataset (a quick run)")
    p.add_argument("--analogue", type=Choice(("wordnet", "synthetic")),
                   help="run on an offline analogue instead of the paper's data (labelled as such)")
    p.add_argument("--retrieval-only", action="store_true",
                   help="skip every LLM step (answer columns and LLM-chosen rows)")
    local_model = ExistingPath("dir", "a local model directory")
    p.add_argument("--model", type=local_model, help="embedding model: a local sentence-transformers directory "
                                                     "(default: the offline all-MiniLM-L6-v2)")
    add_list(p, "--encoder", item=local_model, default=[], split=_paths_split, metavar="PATH",
             help="embedding models to compare (recipes over several encoders)")
    p.add_argument("--cross-encoder", type=local_model, metavar="PATH",
                   help="a local sentence-transformers CrossEncoder directory")
    p.add_argument("--corpus", type=ExistingPath("file"), help="external passage corpus (e.g. DPR psgs_w100.tsv) for the QA pools")
    p.add_argument("--set", action="append", default=[], type=KEY_VALUES, dest="overrides", metavar="NAME=V1,V2",
                   help="replace a grid axis or recipe parameter, e.g. k=25 or theta=0.3,0.7 (repeatable)")
    p.add_argument("--cache-dir", type=OutputPath("a folder"), help="embedding cache (default: the user's cache folder, ~/.cache/divopt-rag/embeddings on Linux, or DIVOPT_RAG_CACHE_DIR)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--new-grid", action="store_true",
                   help="run another configuration in an output folder that holds one; its config.json and "
                        "results.parquet are kept beside as config.<id>.json and results.<id>.parquet")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def check_reproduce(args: argparse.Namespace) -> None:
    if not args.list and not args.recipe:
        raise UsageError("recipe", "a recipe name (divopt-rag reproduce --list shows them)", "none")


#: Command path -> (the function that adds its flags, its checks across flags or None: run after
#: parsing, before the command's module is imported).
COMMAND_FLAGS: dict[tuple[str, ...], tuple[Callable[[argparse.ArgumentParser], None],
                                           Callable[[argparse.Namespace], None] | None]] = {
    ("demo",): (demo, check_demo),
    ("bench", "latency"): (bench_latency, check_bench_latency),
    ("bench", "exact"): (bench_exact, check_bench_exact),
    ("bench", "quality"): (bench_quality, check_bench_quality),
    ("certify",): (certify, check_certify),
    ("sweep",): (sweep, check_sweep),
    ("plot",): (plot, None),
    ("reproduce",): (reproduce, check_reproduce),
    **LIBRARY_FLAGS,
}


def iter_value_actions(parser: argparse.ArgumentParser) -> Iterable[argparse.Action]:
    """The flags of ``parser`` that take a value (for the tests' table of bad input)."""
    for action in parser._actions:  # argparse keeps no public list
        if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._HelpAction):
            yield action


def flag_defaults(add_flags: Callable[[argparse.ArgumentParser], None]) -> dict[str, object]:
    """The default of every flag ``add_flags`` adds (a command's flags, e.g. :func:`plot`), by dest:
    what a command compares its parsed flags with to tell a flag given from one left alone."""
    parser = argparse.ArgumentParser()
    add_flags(parser)
    return {a.dest: parser.get_default(a.dest) for a in parser._actions}
