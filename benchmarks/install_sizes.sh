#!/usr/bin/env bash
# install sizes of divopt-rag's core, each extra and [all]: dry-run reports in a fresh venv, and
# real installs (core, [langchain], [all], [dev]) whose RECORD files give each distribution's size
set -uo pipefail
W=/tmp/inst
SRC=$W/src
rm -rf $SRC && git clone -q /work/wt/install $SRC
C=$SRC/constraints-cpu.txt
python3 -m venv $W/dry && $W/dry/bin/python -m pip install -q --upgrade pip
EXTRAS="core embed bm25 llm robust plots ray gurobi scip scs notebooks langchain llamaindex haystack faiss chroma qdrant ir docs all dev"
for e in $EXTRAS; do
  spec="divopt-rag @ file://$SRC"; [ "$e" != core ] && spec="divopt-rag[$e] @ file://$SRC"
  $W/dry/bin/python -m pip install -q --dry-run --ignore-installed --report $W/rep_$e.json -c $C "$spec" > $W/dry_$e.log 2>&1 \
    && echo "dry $e ok" || echo "dry $e FAILED"
done
for e in core langchain all dev; do
  rm -rf $W/v_$e; python3 -m venv $W/v_$e; $W/v_$e/bin/python -m pip install -q --upgrade pip
  spec="$SRC"; [ "$e" != core ] && spec="$SRC[$e]"
  t0=$(date +%s)
  $W/v_$e/bin/python -m pip install -q -c $C "$spec" > $W/real_$e.log 2>&1 && echo "real $e ok $(( $(date +%s)-t0 )) s" || echo "real $e FAILED"
  du -sm $W/v_$e/lib/python3.11/site-packages | cut -f1 > $W/du_$e.txt
  $W/v_$e/bin/python -m pip list --format=freeze > $W/freeze_$e.txt
  [ "$e" != dev ] && [ "$e" != all ] && rm -rf $W/v_$e
done
echo done
