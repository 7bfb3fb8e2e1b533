"""The rules agent with the experience bank: a lesson-backed move goes first and is named, a
move a lesson says loses is skipped with the lesson as evidence, and without lessons nothing
changes."""

from __future__ import annotations

import pytest

from bot.agents.lesson_use import lesson_about
from bot.agents.levers.directions import direction
from bot.interfaces import Proposal, Stop
from bot.lessons.view import LessonView
from gate.registry import Registry, load_registry
from tests.test_rules_agent import PORTED, decide, view

SDPA = LessonView(
    id="embedded-sdpa",
    claim="fused SDPA attention is faster than the explicit math path",
    levers={"attention": "=sdpa"},
    effect="faster",
    gain_pct=9.5,
    trials=2,
)
NO_RECOMPUTE_SLOWER = LessonView(
    id="no-recompute-slower",
    claim="turning recompute off is slower here",
    levers={"activation_checkpointing": "=false"},
    effect="slower",
    gain_pct=-6.0,
    trials=1,
)


@pytest.fixture(scope="module")
def registry() -> Registry:
    return load_registry("embedded", "1")


def test_directions_are_written_the_way_lessons_write_them() -> None:
    assert direction(1, 2) == "up" and direction(8, 4) == "down"
    assert direction(True, False) == "=false" and direction("math", "sdpa") == "=sdpa"
    found = lesson_about({"attention": "sdpa"}, {"attention": "math"}, [NO_RECOMPUTE_SLOWER, SDPA])
    assert found == SDPA
    assert lesson_about({"attention": "flash"}, {"attention": "math"}, [SDPA]) is None


def test_without_lessons_the_bottleneck_order_holds(registry: Registry) -> None:
    out = decide(view(registry))
    assert isinstance(out, Proposal) and list(out.changes) == ["threads"]
    assert out.lessons_used == []


def test_a_lesson_backed_move_goes_first_and_is_named(registry: Registry) -> None:
    out = decide(view(registry).model_copy(update={"lessons": [SDPA]}))
    assert isinstance(out, Proposal)
    assert out.changes == {"attention": ("math", "sdpa")}
    assert out.lessons_used == ["embedded-sdpa"]
    assert "lesson embedded-sdpa (2 trials, +9.5%)" in out.mechanism
    # the expected gain is the calibrated step-time model's; the lesson's measured gain is cited
    assert "The calibrated step-time model: predicted" in out.mechanism
    assert f"{out.expected_gain_pct:+.1f}%" in out.mechanism


def test_a_move_a_lesson_says_loses_is_skipped_and_named(registry: Registry) -> None:
    v = view(registry).model_copy(update={"lessons": [NO_RECOMPUTE_SLOWER]})
    out = decide(v)
    assert isinstance(out, Proposal) and "activation_checkpointing" not in out.changes
    one_core = decide(v.model_copy(update={"cores": 1}))  # threads is not a move on one core
    assert isinstance(one_core, Proposal)
    assert "activation_checkpointing" not in one_core.changes
    assert "no-recompute-slower" in one_core.lessons_used
    assert "Skipped what lessons no-recompute-slower say loses" in one_core.mechanism


def test_a_stop_lists_the_lessons_that_ruled_moves_out(registry: Registry) -> None:
    config = {"threads": 2, "micro_batch_size": 8, "attention": "sdpa", "compile": True}
    full = {**PORTED, **config, "optimizer_impl": "fused"}  # recompute is the one move left
    out = decide(view(registry, full).model_copy(update={"lessons": [NO_RECOMPUTE_SLOWER]}), full)
    assert isinstance(out, Stop)
    assert any("lesson no-recompute-slower" in line for line in out.evidence)
