"""The house as the package's AST shows it: no import circle, one home per name, the rooms' rules.

Every module of the package (pyproject's ``package-dir`` mapping: ``models/`` is
``divopt_rag.models``, ...) is parsed, and every ``import`` / ``from ... import`` in it is read, at
any depth: module level, inside functions and under ``TYPE_CHECKING`` (a function-level import
runs too, so it can close a circle as well as a module-level one). Relative imports are resolved
against the importing module's package.
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _package_dirs() -> dict[str, Path]:
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    return {pkg: ROOT / folder for pkg, folder in tool["package-dir"].items()}


def _modules() -> dict[str, Path]:
    """Module name -> file, for every module of the package (the longest mapping wins)."""
    out: dict[str, Path] = {}
    for pkg, folder in sorted(_package_dirs().items(), key=lambda kv: -len(kv[0])):
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out.setdefault(".".join([pkg, *parts]), path)
    return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in MODULES.items()}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _source(node: ast.ImportFrom, module: str | None, is_package: bool) -> str:
    """The absolute module a ``from`` import reads (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    base = (module if is_package else module.rpartition(".")[0]).split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _own(name: str) -> str | None:
    """The package module that ``name`` (a dotted import path) lands in, if any."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _defined(tree: ast.Module) -> set[str]:
    """The names a module binds itself at module level (functions, classes, assignments)."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return names


DEFINED = {name: _defined(tree) for name, tree in TREES.items()}


def _imports(path: Path, module: str | None = None):
    """(line, source module, imported name or None) of every project import in ``path``, at any
    depth; ``module``: the file's own module name (relative imports), None outside the package."""
    tree = TREES[module] if module else ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _own(alias.name):
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom) and not (node.level and module is None):
            source = _source(node, module, is_package)
            if _own(source):
                for alias in node.names:
                    yield node.lineno, source, alias.name


def _edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for _, source, name in _imports(path, module):
            target = _own(f"{source}.{name}") if name and f"{source}.{name}" in MODULES else _own(source)
            if target and target != module:
                graph[module].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                members = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    members.append(member)
                    if member == node:
                        break
                if len(members) > 1:
                    found.append(sorted(members))
    return found


def test_no_import_circle_anywhere_in_the_package():
    graph = _edges()
    assert sum(len(t) for t in graph.values()) > 300, "the import graph was not read"
    circles = _circles(graph)
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def _files_outside_the_package() -> list[Path]:
    return sorted([*(ROOT / "tests").rglob("*.py"), *(p for p in (ROOT / "benchmarks").rglob("*.py")
                                                       if "results" not in p.relative_to(ROOT).parts)])


def test_each_public_name_has_one_home():
    """A name is imported from the module that defines it; only ``__init__.py`` files hand on a
    package's public API (``__all__`` of any other module lists its own names only); test files
    import their helpers from ``tests/helpers`` (or conftest), never from another test file."""
    problems = []
    for module, tree in TREES.items():
        if _is_package(module):
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                for item in getattr(node.value, "elts", []):
                    if isinstance(item, ast.Constant) and item.value not in DEFINED[module]:
                        problems.append(f"{MODULES[module].relative_to(ROOT)}: __all__ hands on {item.value!r}")
    files = [(path, module) for module, path in MODULES.items()] + [(p, None) for p in _files_outside_the_package()]
    for path, module in files:
        for line, source, name in _imports(path, module):
            home = _own(source)
            if name is None or home != source or _is_package(source) or f"{source}.{name}" in MODULES:
                continue
            if name not in DEFINED[source]:
                problems.append(f"{path.relative_to(ROOT)}:{line}: {name} is imported from {source}, which does not "
                                f"define it")
    for path in (ROOT / "tests").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name.split(".")[-1].startswith("test_"):
                    problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports the test file {name}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("rule", ["argparse only in cli", "the engine never imports the command line",
                                  "models, solvers, robust, data and integrations never import experiments"])
def test_the_rooms_keep_their_rules(rule):
    cli, engine, experiments = "divopt_rag.experiments.cli", "divopt_rag.experiments.engine", "divopt_rag.experiments"
    problems = []
    for module, path in MODULES.items():
        where = path.relative_to(ROOT)
        for node in ast.walk(TREES[module]):
            if rule == "argparse only in cli" and module.startswith(experiments + ".") and not module.startswith(cli):
                if (isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names)) or (
                        isinstance(node, ast.ImportFrom) and node.module == "argparse"):
                    problems.append(f"{where}:{node.lineno}: imports argparse")
        for line, source, _ in _imports(path, module):
            if rule == "the engine never imports the command line" and module.startswith(engine) and \
                    source.startswith(cli):
                problems.append(f"{where}:{line}: the engine imports {source}")
            if rule.startswith("models") and not module.startswith(experiments) and \
                    module.startswith("divopt_rag.") and source.startswith(experiments):
                problems.append(f"{where}:{line}: imports {source}")
    assert not problems, "\n".join(problems)


def test_test_files_have_unique_basenames():
    # tests/ has no __init__.py files (pytest's rootdir-relative import), so two test modules
    # with one basename in two rooms stop collection of the whole suite.
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(ROOT)} and {path.relative_to(ROOT)}")
        seen.setdefault(path.name, path)
    assert not clashes, "test files sharing a basename: " + "; ".join(clashes)
