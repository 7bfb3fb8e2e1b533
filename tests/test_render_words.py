"""Counted nouns in what attune prints and posts: "1 candidate", "2 candidates", never "(s)"."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from bot.render import cost_line
from bot.render.replies import not_one_recipe, status
from bot.render.text import trial_line
from bot.render.words import count
from bot.state.fold import fold
from bot.state.model import CampaignState
from gate.ledger import Ledger
from gate.models import TrialResult
from gate.prelaunch import Machine, resource_problem
from tests.conftest import ROOT
from tests.events_factory import payload


@pytest.mark.parametrize(
    ("n", "noun", "plural", "text"),
    [
        (0, "candidate", None, "0 candidates"),
        (1, "candidate", None, "1 candidate"),
        (2, "candidate", None, "2 candidates"),
        (1, "recipe file", None, "1 recipe file"),
        (3, "recipe file", None, "3 recipe files"),
        (2, "process", "processes", "2 processes"),
    ],
)
def test_count_pluralises_unless_one(n: int, noun: str, plural: str | None, text: str) -> None:
    assert count(n, noun, plural) == text


def _state(tmp_path: Path, candidates: int) -> CampaignState:
    """A campaign with one calibration run and ``candidates`` candidate runs."""
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("c", "campaign_opened", payload("campaign_opened"))
        trials = ["baseline-1", *(f"c{i}" for i in range(1, candidates + 1))]
        for trial in trials:
            role = "candidate" if trial.startswith("c") else "calibration"
            if role == "candidate":
                ledger.append("c", "candidate_proposed", payload("candidate_proposed", trial=trial))
            ledger.append("c", "trial_started", payload("trial_started", trial=trial, role=role))
            ledger.append("c", "trial_finished", payload("trial_finished", trial=trial))
        return fold("c", ledger.events("c"))


def test_the_status_reply_counts_candidates_and_trials_in_words(tmp_path: Path) -> None:
    one = status(_state(tmp_path / "one", 1), running=True)
    assert "1 candidate, 2 trials;" in one
    two = status(_state(tmp_path / "two", 2), running=False)
    assert "2 candidates, 3 trials;" in two
    assert "(s)" not in one + two


def test_the_ledger_summary_and_a_trial_line_count_in_words(tmp_path: Path) -> None:
    assert cost_line(_state(tmp_path / "one", 0)).startswith("1 trial (1 ok): 10.0 device-s")
    assert cost_line(_state(tmp_path / "three", 2)).startswith("3 trials (3 ok)")
    result = TrialResult.model_validate(
        {"recipe": "r", "fingerprint": "f", "status": "ok", "warmup": 1, "devices": 1}
        | {"allocated_at": 0, "released_at": 8}
    )
    assert trial_line(result).endswith("8.0 device-s on 1 device")
    wide = result.model_copy(update={"devices": 4})
    assert trial_line(wide).endswith("on 4 devices")


def test_the_gate_counts_ranks_threads_and_events_in_words() -> None:
    machine = Machine(cores=2, memory_bytes=2**40)
    one = resource_problem(ranks=1, cores_per_rank=4, bytes_per_rank=None, machine=machine)
    assert one is not None and one.startswith("needs 1 rank x 4 threads = 4 cores")
    two = resource_problem(ranks=3, cores_per_rank=1, bytes_per_rank=None, machine=machine)
    assert two is not None and two.startswith("needs 3 ranks x 1 thread = 3 cores")


def test_the_recipe_count_reply_in_words() -> None:
    none = not_one_recipe([], ["models/*.yaml"], ".github/attune.yml")
    assert "changes 0 recipe files (none)" in none
    two = not_one_recipe(["a.yaml", "b.yaml"], ["*.yaml"], ".github/attune.yml")
    assert "changes 2 recipe files (`a.yaml`, `b.yaml`)" in two


def test_no_string_under_bot_or_gate_counts_with_s_in_parentheses() -> None:
    """Every string literal under bot/ and gate/ names a count with ``count``: a noun followed
    by "(s)" is found here (a help text's "(s)" for seconds follows a space, and is not)."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for package in ("bot", "gate")
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.search(r"[A-Za-z]\(s\)", node.value)
    ]
    assert found == []
