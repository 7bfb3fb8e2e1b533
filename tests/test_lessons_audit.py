"""``attune lessons audit`` against real committed ledgers: a lesson whose evidence holds, one
whose trial is missing, one whose measured change contradicts its claim, and the rest of the
reasons to retire; the bank in the repository passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main
from bot.commands.lessons import ROOT, audit_bank
from bot.lessons.audit import Audit, check_scope
from bot.lessons.bank import load_bank

LEDGER_01 = "tests/fixtures/ledgers/attune-0.1.db"
"""A real campaign (v01run) on examples/ported-gpt.yaml: c1 threads 1 -> 2 measured -40.32%,
c2 activation_checkpointing true -> false measured +126.70% and merged."""


def lesson(lesson_id: str, **over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": lesson_id,
        "status": "accepted",
        "claim": "storing activations instead of recomputing them is faster on a CPU",
        "levers": {"activation_checkpointing": "=false"},
        "effect": "faster",
        "min_gain_pct": 50.0,
        "scope": {"framework": "embedded", "versions": "==1", "hardware": ["cpu"]},
        "evidence": [
            {"ledger": LEDGER_01, "campaign": "v01run", "trial": "c2", "delta_pct": 126.7}
        ],
    }
    body.update(over)
    return body


def cite(trial: str, delta: float | None, ledger: str = LEDGER_01) -> list[dict[str, Any]]:
    return [{"ledger": ledger, "campaign": "v01run", "trial": trial, "delta_pct": delta}]


THREADS_UP = {"levers": {"threads": "up"}, "claim": "two threads beat one on this CPU"}
CASES: dict[str, tuple[dict[str, Any], str | None]] = {
    "holds": ({}, None),
    "trial-missing": ({"evidence": cite("c7", 10.0)}, "v01run/c7: no such candidate trial"),
    "contradicted": (
        {**THREADS_UP, "evidence": cite("c1", -40.32)},
        "claims faster, but the ledger measured -40.32%",
    ),
    "too-small": ({"min_gain_pct": 150.0}, "claims at least 150.0% faster; the evidence's mean"),
    "wrong-delta": ({"evidence": cite("c2", 12.0)}, "the ledger measured +126.70%, the lesson"),
    "wrong-lever": ({**THREADS_UP}, "v01run/c2 moved {'activation_checkpointing': '=false'}"),
    "no-ledger": ({"evidence": cite("c2", 126.7, "gone.db")}, "the ledger gone.db does not exist"),
    "did-not-fail": ({"effect": "fails", "evidence": cite("c2", None)}, "did not fail (status ok)"),
    "not-layout": (
        {"levers": {"n_layer": "up"}, "evidence": cite("c2", 126.7)},
        "v01run/c2 moved",
    ),
}


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("bank")
    lessons = [lesson(name, **over) for name, (over, _) in CASES.items()]
    lessons.append(lesson("old", status="retired", evidence=cite("c9", 1.0)))
    lessons.append(lesson("other-version", scope={**lesson("x")["scope"], "versions": "==2"}))
    (directory / "audit.yaml").write_text(yaml.safe_dump({"lessons": lessons}))
    return directory


@pytest.fixture(scope="module")
def audited(bank: Path) -> dict[str, Audit]:
    return {r.lesson: r for r in audit_bank(load_bank(bank), ROOT)}


@pytest.mark.parametrize("name", list(CASES))
def test_each_lesson_is_checked_against_its_ledger(audited: dict[str, Audit], name: str) -> None:
    found = audited[name]
    expected = CASES[name][1]
    if expected is None:
        assert found.problems == [] and not found.retire
    else:
        assert found.retire and any(expected in p for p in found.problems), found.problems


def test_scope_against_the_installed_framework(bank: Path, audited: dict[str, Audit]) -> None:
    found = audited
    other = found["other-version"]  # not read with embedded 1: a note, not a retirement
    assert not other.retire and "not read with the installed embedded 1" in other.notes[0]
    assert not found["old"].retire  # already retired: its evidence is not re-checked
    [parsed] = [x for _, x in load_bank(bank) if x.id == "holds"]
    gone = parsed.model_copy(update={"levers": {"n_layer": "up"}})
    problems, _ = check_scope(gone, "1", {"threads", "activation_checkpointing"})
    assert problems == ["n_layer: not a layout key in the embedded 1 registry"]


def test_the_command_lists_what_to_retire_and_fails(
    bank: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lessons", "audit", "--bank", str(bank), "--root", str(ROOT)]) == 1
    out = capsys.readouterr().out
    assert "holds holds" in out and "RETIRE trial-missing" in out
    retire = sorted(name for name, (_, why) in CASES.items() if why)
    assert f"to retire ({len(retire)}): " in out
    assert all(name in out.split("to retire")[1] for name in retire)


def test_a_malformed_lesson_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = lesson("bad")
    del bad["scope"]["versions"]
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"lessons": [bad]}))
    assert main(["lessons", "audit", "--bank", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml: lessons[0].scope.versions: invalid lesson: Field required" in err


def test_the_bank_in_the_repository_holds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lessons", "audit"]) == 0
    assert "none to retire" in capsys.readouterr().out
