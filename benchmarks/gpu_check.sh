#!/usr/bin/env bash
# The GPU check of issue 42, in at most five minutes on one H100 or H200:
#   1. the CUDA tests (tests/solvers/test_gpu.py's CUDA cases, the CUDA cases of test_lazy_mmr.py,
#      test_ws_multistart.py and test_mmr_ties.py), as tests.csv;
#   2. the paper row (2*10^6 x 1024 narrow cone in float16, k in {25, 50, 100} x theta in
#      {0.3, 0.5, 0.7, 0.9}: fw, fw_ws_ms, mmr, mmr_lazy, dpp, ratios from one run), the RAG call
#      (n = 1000, k = 10: the default, mmr, fw) and the batched default sweep (32 queries x
#      9 thetas, n = 10^5, k = 10: ms per instance): benchmarks/gpu_check.py.
# Writes at most 8 files to OUT_DIR (tests.csv, paper_row.csv, paper_ratios.csv, rag_call.csv,
# batched_sweep.csv, environment.json, gpu_check.log) and prints the tables.
# Needs python3 with torch, numpy, pandas and pytest; pyomo, tqdm and ir-measures are not needed
# (the repository is imported through a namespace shim when divopt-rag is not installed, and a
# no-op tqdm is provided when tqdm is missing).
#
# Usage: benchmarks/gpu_check.sh [OUT_DIR]      (default $OUT, else benchmarks/results/gpu_check)
#   DEVICE=cpu SMALL=1 benchmarks/gpu_check.sh DIR   a dry run at tiny sizes on the CPU (CI)
#   GPU_CHECK_TESTS=0                                skip step 1
#   GPU_CHECK_SHIM=1                                 import the checkout through the shim even if installed
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-${OUT:-$here/benchmarks/results/gpu_check}}"
device="${DEVICE:-cuda}"
mkdir -p "$out"
log="$out/gpu_check.log"
: > "$log"
shim="$(mktemp -d)"
trap 'rm -rf "$shim"' EXIT
if [ "${GPU_CHECK_SHIM:-0}" != 0 ] || ! python3 -c "import divopt_rag.solvers" 2>/dev/null; then
  # divopt-rag not installed here: a namespace package over the repository's folders
  mkdir -p "$shim/divopt_rag"
  for d in models solvers robust experiments data integrations; do ln -s "$here/$d" "$shim/divopt_rag/$d"; done
fi
if ! python3 -c "import tqdm" 2>/dev/null; then
  # data.synthetic imports tqdm for its progress bar: a no-op stand-in
  mkdir -p "$shim/tqdm"
  printf 'class tqdm:\n    def __init__(self, *a, **k): pass\n    def __enter__(self): return self\n    def __exit__(self, *a): return False\n    def update(self, *a): pass\n' > "$shim/tqdm/auto.py"
  printf 'from .auto import tqdm\n' > "$shim/tqdm/__init__.py"
fi
export PYTHONPATH="$shim:$here/tests${PYTHONPATH:+:$PYTHONPATH}"
start=$SECONDS
if [ "${GPU_CHECK_TESTS:-1}" != 0 ]; then
  echo "== CUDA tests ==" | tee -a "$log"
  set +e
  ( cd "$here" && PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 timeout 150 python3 -m pytest -q -p no:cacheprovider \
      --junitxml="$shim/tests.xml" -k cuda tests/solvers/test_gpu.py \
      "tests/solvers/test_lazy_mmr.py::test_lazy_mmr_on_cuda_half" \
      "tests/solvers/test_ws_multistart.py::test_fw_ws_ms_on_cuda_half_storage" \
      "tests/solvers/test_mmr_ties.py::test_duplicates_resolve_like_langchain_in_every_storage" ) 2>&1 | tail -n 40 | tee -a "$log"
  set -e
  python3 - "$shim/tests.xml" "$out/tests.csv" <<'EOF' 2>&1 | tee -a "$log"
import csv, sys, xml.etree.ElementTree as ET
try:
    cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
except (OSError, ET.ParseError) as exc:
    cases = []
    print(f"no test report ({exc})")
rows = []
for c in cases:
    outcome = "passed"
    for tag in ("failure", "error", "skipped"):
        if c.find(tag) is not None:
            outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
    rows.append({"test": f"{c.get('classname')}::{c.get('name')}", "outcome": outcome, "seconds": c.get("time")})
with open(sys.argv[2], "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["test", "outcome", "seconds"])
    w.writeheader()
    w.writerows(rows)
counts = {}
for r in rows:
    counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
print("tests:", counts)
EOF
fi
echo "== timings ==" | tee -a "$log"
small=()
[ "${SMALL:-0}" != 0 ] && small=(--small)
budget=$(( 230 - (SECONDS - start) ))
[ "$budget" -lt 30 ] && budget=30
python3 "$here/benchmarks/gpu_check.py" --device "$device" "${small[@]}" --budget "$budget" --out "$out" 2>&1 \
  | tee -a "$log"
echo "gpu_check: $((SECONDS - start)) s in all; files in $out" | tee -a "$log"
