"""Frozen surfaces: gate/ is the pure core and imports neither bot/ nor runners/."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_gate_imports_neither_bot_nor_runners() -> None:
    offenders = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "gate").rglob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] in {"bot", "runners"}
    }
    assert not offenders


def test_gate_does_not_import_torch() -> None:
    """The gate runs in CI checks that must not need the workload's dependencies."""
    offenders = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "gate").rglob("*.py")
        if any(name.split(".")[0] == "torch" for name in imported_modules(path))
    }
    assert not offenders


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(packages: tuple[str, ...] = ("bot", "runners", "gate")) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports anywhere in its body (function-level
    and TYPE_CHECKING imports included: a cycle there is still two modules that need each
    other)."""
    files = {_module_of(p): p for pkg in packages for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                deps.add(base)
                deps.update(f"{base}.{a.name}" for a in node.names)
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in sorted(graph[node]):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_bot_runners_or_gate() -> None:
    graph = import_graph()
    assert "runners.adapters" in graph["bot.campaign.setup"]  # the walk sees real imports
    assert cycles(graph) == []


def test_pygithub_is_imported_by_the_github_client_only() -> None:
    """Every other module of the product speaks to GitHub through ``bot.github.client``'s
    typed surface, never PyGithub's lazily-fetching objects or its exceptions."""
    importers = {
        str(path.relative_to(ROOT))
        for pkg in ("bot", "runners", "gate")
        for path in (ROOT / pkg).rglob("*.py")
        if any(name.split(".")[0] == "github" for name in imported_modules(path))
    }
    assert importers == {"bot/github/client.py"}


def test_no_module_is_over_300_lines() -> None:
    """Small modules with names that say what they do."""
    long = {
        f"{path.relative_to(ROOT)}: {n}"
        for pkg in ("bot", "runners", "gate")
        for path in (ROOT / pkg).rglob("*.py")
        if (n := len(path.read_text().splitlines())) > 300
    }
    assert not long


def test_perfmodel_is_pure_and_small() -> None:
    """perfmodel/ (the step-time model) sits beside gate/: it may read the gate, never bot/,
    runners/ or torch, and keeps to small modules."""
    offenders = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "perfmodel").rglob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] in {"bot", "runners", "torch"}
    }
    assert not offenders
    gate_users = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "gate").rglob("*.py")
        if any(name.split(".")[0] == "perfmodel" for name in imported_modules(path))
    }
    assert not gate_users  # the gate never depends on the model built on it
    assert all(len(p.read_text().splitlines()) <= 300 for p in (ROOT / "perfmodel").rglob("*.py"))
