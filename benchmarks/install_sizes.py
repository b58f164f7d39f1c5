"""Install size of divopt-rag's core, each extra and [all]: run benchmarks/install_sizes.sh first
(dry-run reports of each in a fresh venv, and real installs of core, [langchain], [all], [dev] in
/tmp/inst), then this script; it writes benchmarks/results/install/sizes.csv.

packages: what `pip install --dry-run --report` resolves in an empty venv with -c constraints-cpu.txt
(divopt-rag itself and torch included); MB: the sum of those distributions' file sizes as their
RECORD lists them in the real [dev] install (torch 2.13.0+cpu: 698 MB of each total).
"""
import csv, json, re, glob, os, sys
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as cn
SITE = "/tmp/inst/v_dev/lib/python3.11/site-packages"
size, ver = {}, {}
for rec in glob.glob(f"{SITE}/*.dist-info/RECORD"):
    meta = open(os.path.join(os.path.dirname(rec), "METADATA"), encoding="utf-8", errors="replace").read()
    name = cn(re.search(r"^Name: (.+)$", meta, re.M).group(1).strip())
    total = 0
    for line in open(rec, encoding="utf-8", errors="replace"):
        parts = line.rstrip("\n").rsplit(",", 2)
        if len(parts) == 3 and parts[2].isdigit():
            total += int(parts[2])
    size[name] = total; ver[name] = re.search(r"^Version: (.+)$", meta, re.M).group(1).strip()
def report(e):
    r = json.load(open(f"/tmp/inst/rep_{e}.json"))
    return {cn(i["metadata"]["name"]): i for i in r["install"]}
def closure(items, roots):
    seen, todo = set(), list(roots)
    while todo:
        n = todo.pop()
        if n in seen or n not in items: continue
        seen.add(n)
        for req in items[n]["metadata"].get("requires_dist", []) or []:
            R = Requirement(req)
            if R.marker and not R.marker.evaluate({"extra": ""}): continue
            todo.append(cn(R.name))
    return seen
rows = []
extras = "core embed bm25 llm robust plots ray gurobi scip scs notebooks langchain llamaindex haystack faiss chroma qdrant ir docs all dev".split()
core = report("core")
for e in extras:
    items = report(e)
    missing = [n for n in items if n not in size]
    mism = [n for n in items if n in ver and ver[n] != items[n]["metadata"]["version"]]
    mb = sum(size.get(n, 0) for n in items) / 1e6
    torch_mb = size.get("torch", 0) / 1e6
    beyond_core = [n for n in items if n not in core]
    mb_beyond = sum(size.get(n, 0) for n in beyond_core) / 1e6
    rows.append((e, len(items), mb, len(beyond_core), mb_beyond, missing, mism))
    print(f"{e:11s} {len(items):4d} pkgs {mb:8.0f} MB | beyond core: {len(beyond_core):3d} pkgs {mb_beyond:7.0f} MB  missing={missing} vermismatch={mism}")
with open(sys.argv[1] if len(sys.argv) > 1 else "benchmarks/results/install/sizes.csv", "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["install", "packages", "MB", "packages_beyond_core", "MB_beyond_core"])
    for e, n, mb, nb, mbb, _, _ in rows:
        w.writerow([e, n, round(mb), nb, round(mbb)])
items = report("langchain")
tc = closure(items, ["torch"]); lc = closure(items, ["langchain-core"])
rest = sorted(set(items) - tc - lc)
print("torch closure", sorted(tc)); print("langchain-core closure", sorted(lc))
print("beyond torch & langchain-core:", len(rest), rest)
print("torch MB", size["torch"]/1e6)
