"""The registry: schema, coverage of the workload, source lines and conditions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gate.errors import AttuneError
from gate.registry import DEFAULT_REGISTRY_DIR, load_file, load_registry
from runners.embedded.config import ENV_READ, WORKLOAD_VERSION, WorkloadConfig

ROOT = Path(__file__).resolve().parent.parent


def test_every_workload_key_is_classified() -> None:
    registry = load_registry("embedded", WORKLOAD_VERSION)
    keys = set(WorkloadConfig.model_fields) | {f"env.{k}" for k in ENV_READ}
    missing = sorted(k for k in keys if registry.entry(k) is None)
    assert not missing, f"registry/embedded.yaml lacks: {missing}"
    stale = sorted(set(registry.data.keys) - keys)
    assert not stale, f"registry/embedded.yaml names keys the workload does not have: {stale}"


def test_every_source_line_reads_its_key() -> None:
    """A source must point at a line that mentions the key; code moves, the test names it."""
    registry = load_registry("embedded", WORKLOAD_VERSION)
    wrong = []
    for key, entry in registry.data.keys.items():
        path, line = entry.source.rsplit(":", 1)
        lines = (ROOT / path).read_text().splitlines()
        text = lines[int(line) - 1] if int(line) <= len(lines) else ""
        name = key.removeprefix("env.")
        if not re.search(rf"\b{re.escape(name)}\b", text, re.IGNORECASE):
            wrong.append(f"{key}: {entry.source} reads {text.strip()!r}")
    assert not wrong, "registry/embedded.yaml sources moved:\n" + "\n".join(wrong)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "framework: x\nversions: '==1'\nkeys: {a: {class: layot, reason: r, source: f.py:1}}\n",
            r"bad\.yaml: keys\.a\.class: invalid registry entry",
        ),
        (
            "framework: x\nversions: '==1'\nkeys: {a: {class: layout, reason: r, source: f.py}}\n",
            r"keys\.a\.source: invalid registry entry: .*path/to/file\.py:123",
        ),
        (
            "framework: x\nversions: '==1'\nkeys: {a: {class: layout, reason: r}}\n",
            r"keys\.a\.source: invalid registry entry: Field required",
        ),
        (
            "framework: x\nversions: 'one'\n"
            "keys: {a: {class: layout, reason: r, source: f.py:1}}\n",
            r"versions: invalid registry entry",
        ),
        ("framework: x\nversions: '==1'\nkeys: {}\n", r"needs keys or known_bugs"),
        (
            "framework: x\nkeys: {a: {class: layout, reason: r, source: f.py:1}}\n",
            r"a file with keys needs versions",
        ),
        (
            "framework: x\nknown_bugs: {b: {versions: '<1', keys: [a], reason: r, source: f}}\n",
            r"known_bugs\.b\.source: invalid registry entry: .*path/to/file\.py:123",
        ),
        (
            "framework: x\nknown_bugs: {b: {versions: 'old', keys: [a], reason: r, source: f:1}}\n",
            r"known_bugs\.b\.versions: invalid registry entry: .*not a version specifier",
        ),
        ("framework: x\nversions: '==1'\nkeys: [\n", r"malformed registry YAML"),
        (
            "framework: x\nversions: '==1'\nkeys:\n  a: {class: layout, reason: r, source: f.py:1,"
            " when: [{if: {unpinned: b, key: c, is_set: true}, class: semantic, reason: r}]}\n",
            r"keys\.a\.when\.0\.if: invalid registry entry: .*exactly one",
        ),
        (
            "framework: x\nversions: '==1'\n"
            "keys: {a: {class: layout, reason: r, source: f.py:1, x: 1}}\n",
            r"keys\.a\.x: invalid registry entry: Extra",
        ),
    ],
)
def test_malformed_registry_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(AttuneError, match=message):
        load_file(write(tmp_path, text))


def test_a_broken_file_fails_every_lookup(tmp_path: Path) -> None:
    """Never an empty or partial registry: one bad file makes loading fail loudly."""
    (tmp_path / "embedded.yaml").write_text((DEFAULT_REGISTRY_DIR / "embedded.yaml").read_text())
    write(tmp_path, "framework: other\nversions: '==1'\nkeys: {a: {class: nope}}\n")
    with pytest.raises(AttuneError, match=r"bad\.yaml"):
        load_registry("embedded", WORKLOAD_VERSION, tmp_path)


def test_version_range_selects_the_file(tmp_path: Path) -> None:
    with pytest.raises(AttuneError, match="no registry for framework 'embedded' version 2"):
        load_registry("embedded", "2")
