#!/usr/bin/env bash
# The paper-scale latency row on one CUDA GPU: synthetic narrow cone 2*10^6 x 1024 stored in
# float16, k = 100, theta in {0.3, 0.5, 0.7, 0.9}; the paper's FW ("fw", every ratio is to it),
# divopt's default ("fw_ws_ms"), MMR (eager, the papers' baseline, and lazy) and DPP, as ratios
# from one run. Writes latency.csv, latency_ratios.csv and latency.json (environment: GPU name,
# memory, CUDA/cuDNN, torch) to OUT_DIR. Needs only torch, numpy, pandas, pyarrow and tqdm.
#
# Usage: benchmarks/gpu_paper_row.sh [OUT_DIR]   (default benchmarks/results/latency_gpu)
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-$here/benchmarks/results/latency_gpu}"
if ! python -c "import divopt_rag.solvers" 2>/dev/null; then
  # divopt-rag not installed here: a namespace package over the repository's folders
  shim="$(mktemp -d)"
  mkdir -p "$shim/divopt_rag"
  for d in models solvers robust experiments data integrations; do ln -s "$here/$d" "$shim/divopt_rag/$d"; done
  export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
fi
python -m divopt_rag.experiments.studies.bench_latency --device cuda --dtype float16 --n 2000000 --d 1024 --k 100 \
  --theta 0.3,0.5,0.7,0.9 --methods fw,fw_ws_ms,mmr,mmr_lazy,dpp --repeats 5 --langchain "" --out "$out"
