"""The modules of hpcrl_core/data import each other without a cycle (issue 17: the race generator and its kernels
once imported each other through a private builder).

Every import statement counts, wherever it stands: module level, inside a function, under ``TYPE_CHECKING``, and
relative imports resolved. ``from pkg import name`` points at the module ``pkg.name`` when there is one, else at
``pkg``. The package ``__init__`` files hold docstrings only, so the edge a submodule import implies to its parent
package is left out.

Run: pytest tests/data/test_imports.py
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "hpcrl_core" / "data"


def module_names(root: Path, package: Path) -> dict[str, Path]:
    """Dotted name -> file of every module under ``package`` (a package is named by its ``__init__.py``)."""
    out = {}
    for f in sorted(package.rglob("*.py")):
        parts = f.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name in known}
    base = node.module or ""
    if node.level:
        parts = (module if is_package else module.rpartition(".")[0]).split(".")
        parts = parts[:len(parts) - node.level + 1]
        base = ".".join([*parts, *([base] if base else [])])
    out = set()
    for a in node.names:
        if f"{base}.{a.name}" in known:
            out.add(f"{base}.{a.name}")
        elif base in known:
            out.add(base)
    return out


def import_graph(root: Path, package: Path) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports."""
    modules = module_names(root, package)
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, f in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= _targets(node, name, f.name == "__init__.py", known)
        graph[name] = edges - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return [*path[path.index(n):], n]
            if n not in state and (cycle := visit(n)):
                return cycle
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_data_modules_import_each_other_without_a_cycle() -> None:
    graph = import_graph(ROOT, DATA)
    assert "hpcrl_core.data.race.programs" in graph["hpcrl_core.data.race.kernels"]  # the scan sees the imports
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle in hpcrl_core/data: {' -> '.join(cycle or [])}"


def test_the_scan_finds_a_cycle_through_a_lazy_relative_or_type_checking_import(tmp_path: Path) -> None:
    pkg = tmp_path / "hpcrl_core" / "data"
    (pkg / "race").mkdir(parents=True)
    for f in (pkg / "__init__.py", pkg / "race" / "__init__.py"):
        f.write_text('"""docstring only"""\n')
    (pkg / "race" / "a.py").write_text("from hpcrl_core.data.race.b import f\n")
    (pkg / "race" / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "race" / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                       "    from hpcrl_core.data.race import a\n")
    (pkg / "schema.py").write_text("import json\nfrom hpcrl_core.errors import DataError\n")
    graph = import_graph(tmp_path, pkg)
    assert graph["hpcrl_core.data.schema"] == set()
    assert find_cycle(graph) == ["hpcrl_core.data.race.a", "hpcrl_core.data.race.b", "hpcrl_core.data.race.c",
                                 "hpcrl_core.data.race.a"]
    (pkg / "race" / "c.py").write_text("from hpcrl_core.data import schema\n")
    assert find_cycle(import_graph(tmp_path, pkg)) is None
