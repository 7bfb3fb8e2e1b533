"""The repository stands alone: nothing in it reads a path above its own root.

A user's clone is all there is. A module that climbs out of the repository (``parents[k]`` or a
chain of ``.parent`` past the root, a ``..`` path to a sibling folder) works
only on the machine it was written on, so the suite fails on any.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

OUTSIDE_WORDS = re.compile(r"(^|[\s\"'=(])\.\./")
"""Text that names a place outside the repository in a Makefile, a workflow or a script."""
NOT_A_PATH = "# not a path:"
"""A comment that marks a line's strings as data (a hostile input a test feeds), not a path."""


def tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *patterns],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [ROOT / name for name in out.split("\0") if name and (ROOT / name).is_file()]


def _file_chain_depth(node: ast.AST) -> int | None:
    """How many levels up a ``Path(__file__)...`` expression climbs; None if it is not one."""
    ups = 0
    while True:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
            index = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if node.value.attr != "parents" or not isinstance(index, int):
                return None
            ups += index + 1
            node = node.value.value
        elif isinstance(node, ast.Attribute) and node.attr == "parent":
            ups += 1
            node = node.value
        elif isinstance(node, ast.Attribute) and node.attr in ("resolve", "absolute"):
            node = node.value
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id == "Path" and node.args:
                node = node.args[0]
            else:
                node = node.func
        elif isinstance(node, ast.Name) and node.id == "__file__":
            return ups
        else:
            return None


def climbs_out(source: str, depth: int) -> list[str]:
    """Places in Python ``source``, of a file ``depth`` levels below the root (``tests/x.py``
    is 2: ``parents[1]`` is the root), that reach above the repository root."""
    problems = []
    tree = ast.parse(source)
    lines = source.splitlines()
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        lineno: int = getattr(node, "lineno", 0)
        line = lines[lineno - 1] if lineno else ""
        if id(node) in docstrings or NOT_A_PATH in line:
            continue
        ups = _file_chain_depth(node) if isinstance(node, (ast.Subscript, ast.Attribute)) else None
        if ups is not None and ups > depth:
            problems.append(f"line {lineno}: climbs {ups} levels from a file {depth} deep")
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant)
            and node.right.value == ".."
        ):
            problems.append(f"line {lineno}: names a path outside: joins '..'")
        text = node.value if isinstance(node, ast.Constant) else None
        if isinstance(text, str) and OUTSIDE_WORDS.search(text):
            problems.append(f"line {lineno}: names a path outside: {text[:60]!r}")
    return problems


@pytest.mark.parametrize(
    "source, expected",
    [
        ("Path(__file__).resolve().parents[1]", []),  # tests/x.py -> the root
        ("Path(__file__).resolve().parents[2]", ["climbs 3 levels"]),
        ("Path(__file__).parent.parent.parent", ["climbs 3 levels"]),
        ("Path(__file__).resolve().parent / '..' / 'sibling'", ["outside"]),
        ("open('../sibling/fixtures/x.json')", ["outside"]),
        ('"""Usage: attune init ../models"""', []),  # a docstring shows, it does not read
        ("BAD = '../etc/passwd'  # not a path: a hostile input", []),
    ],
)
def test_the_check_catches_what_it_claims(source: str, expected: list[str]) -> None:
    found = climbs_out(source, depth=2)
    assert len(found) == len(expected), found
    for problem, words in zip(found, expected, strict=True):
        assert words in problem


def test_no_python_file_reaches_above_the_repository() -> None:
    offenders = {
        str(path.relative_to(ROOT)): problems
        for path in tracked("*.py")
        if path != Path(__file__).resolve()  # its patterns name what they look for
        if (problems := climbs_out(path.read_text(), len(path.relative_to(ROOT).parts)))
    }
    assert offenders == {}


def test_no_build_or_ci_file_names_a_path_outside() -> None:
    files = tracked("Makefile", ".ci/*", "*.yml", "*.yaml", "*.toml", "*.sh", "*.cfg")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        if "fixtures" not in path.parts  # recorded payloads are data, never read as paths
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE_WORDS.search(line)
    ]
    assert offenders == []


def test_the_github_fixtures_live_in_the_repository() -> None:
    from tests.fakegithub import fixtures_dir

    folder = fixtures_dir().resolve()
    assert folder.is_relative_to(ROOT)
    assert (folder / "rest-api-subset.json").is_file()
    assert (folder / "SOURCES.md").is_file()
