#!/usr/bin/env bash
# Recompute an instance's stored f from the library's files with bash, jq, od and awk only.
# usage: library_reader.sh LIBRARY INSTANCE_ID   -> prints: id n k theta stored_f recomputed_f
set -euo pipefail
L=$1; C="$L/instances/$2/card.json"; S="$L/instances/$2/solution.json"
k=$(jq -r .k "$C"); t=$(jq -r .theta "$C"); d=$(jq -r .d "$C"); n=$(jq -r .n "$C")
pool=$L/$(jq -r .rows.pool "$C"); sub=$(jq -r '.rows.subset // empty' "$C")
qf=$L/$(jq -r .query.file "$C"); qr=$(jq -r .query.row "$C")
off() { echo $((10 + $(od -An -tu2 -j8 -N2 "$1"))); }     # .npy v1: data after the header
vec() { od -An -v -tf4 -w4 -j $(( $(off "$1") + $2 * d * 4 )) -N $((d * 4)) "$1" | tr -d ' ' | paste -sd' '; }
{ echo "Q $(vec "$qf" "$qr")"
  for i in $(jq -r '.best_set[]' "$S"); do
    r=$i; [ -n "$sub" ] && r=$(od -An -td4 -j $(( $(off "$L/$sub") + 4 * i )) -N4 "$L/$sub" | tr -d ' ')
    echo "E $(vec "$pool" "$r")"
  done; } | awk -v k="$k" -v t="$t" '
  $1=="Q" { for (j=2; j<=NF; j++) q[j]=$j; next }
  { m++; for (j=2; j<=NF; j++) e[m,j]=$j; nf=NF }
  END { for (a=1; a<=m; a++) { c=0; for (j=2; j<=nf; j++) c+=e[a,j]*q[j]; rel+=c
          for (b=1; b<=m; b++) if (a!=b) { w=0; for (j=2; j<=nf; j++) w+=e[a,j]*e[b,j]; red+=w } }
        printf "%.12g\n", t*(k-1)*rel-(1-t)*red }' | { read -r f; echo "$2 $n $k $t $(jq -r .f "$S") $f"; }
