"""Frozen surfaces: gate/ is the pure core and imports neither bot/ nor runners/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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
