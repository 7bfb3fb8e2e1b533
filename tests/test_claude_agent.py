"""The Claude agent alone, against the local Messages API (no trials run): API failures past
the retries, a timeout, a refused key, the spend cap, questions without end, and an accepted
decision replayed from the ledger without a call."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.agents.claude.agent import MAX_BAD_TURNS, ClaudeAgent
from bot.agents.claude.factory import load_playbook
from bot.agents.claude.settings import load_settings
from bot.agents.claude.source_tree import source_tree
from bot.commands.stop import withdraw
from bot.interfaces import AgentView, Probe, Proposal, Stop
from gate.ledger import Ledger
from gate.recipe import load_recipe
from gate.registry import load_registry
from runners.adapters import get_adapter
from tests.conftest import ROOT
from tests.events_factory import payload
from tests.fake_anthropic import Fail, FakeAnthropic, Step, Turn, text, tool

REGISTRY = load_registry("embedded", "1")


@pytest.fixture(scope="module")
def view() -> AgentView:
    effective = get_adapter("embedded").resolve(load_recipe(ROOT / "examples" / "ported-gpt.yaml"))
    layout = REGISTRY.layout_sources()
    return AgentView(
        framework="embedded",
        incumbent="baseline",
        incumbent_values=effective.values,
        profile=None,
        history=[],
        layout_sources=layout,
        threshold=0.03,
        budget_left_s=3600.0,
        forecast_s=10.0,
        cores=2,
    )


def probe(changes: dict[str, object]) -> Probe:
    return Probe(fingerprint=repr(sorted(changes.items())))


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("c", "campaign_opened", payload("campaign_opened", agent="claude"))
        yield ledger


def agent(ledger: Ledger, server: FakeAnthropic, **env: str) -> ClaudeAgent:
    settings = load_settings(
        {
            "ANTHROPIC_API_KEY": "k",
            "ANTHROPIC_BASE_URL": server.url,
            "ATTUNE_AGENT_BACKOFF_S": "0.01",
            **env,
        }
    )
    return ClaudeAgent(
        ledger=ledger,
        campaign="c",
        registry=REGISTRY,
        tree=source_tree("embedded", "1"),
        settings=settings,
        playbook=load_playbook(),
    )


def decide(ledger: Ledger, view: AgentView, script: list[Step], **env: str) -> tuple[Any, Any]:
    with FakeAnthropic(script) as server:
        decision = agent(ledger, server, **env).decide(view, probe, set())
    assert server.failures == []
    return decision, server


def kinds(ledger: Ledger, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in ledger.events("c") if e.kind == kind]


def test_overloaded_past_the_retries_stops_resumably_and_records_no_call(
    ledger: Ledger, view: AgentView
) -> None:
    script: list[Step] = [Fail(529, "overloaded_error", "Overloaded")] * 3
    decision, server = decide(ledger, view, script, ATTUNE_AGENT_RETRIES="2")
    assert isinstance(decision, Stop) and decision.reason == "agent_error"
    assert "failed 3 times" in decision.evidence[0] and "overloaded_error" in decision.evidence[0]
    assert len(server.requests) == 3 and kinds(ledger, "model_called") == []
    ledger.append("c", "campaign_stopped", {"reason": "agent_error", "evidence": decision.evidence})
    withdraw(ledger, "c", ledger.path.parent)  # attune tune --resume reopens it
    assert kinds(ledger, "campaign_resumed")


def test_a_timeout_is_retried_then_stops(ledger: Ledger, view: AgentView) -> None:
    never = threading.Event()
    script: list[Step] = [Turn([text("late")], "end_turn", hold=never)] * 2
    decision, server = decide(
        ledger, view, script, ATTUNE_AGENT_TIMEOUT_S="0.3", ATTUNE_AGENT_RETRIES="1"
    )
    never.set()
    assert isinstance(decision, Stop) and "APITimeoutError" in decision.evidence[0]
    assert len(server.requests) == 2


def test_a_refused_key_is_not_retried(ledger: Ledger, view: AgentView) -> None:
    script: list[Step] = [Fail(401, "authentication_error", "invalid x-api-key")]
    decision, server = decide(ledger, view, script)
    assert isinstance(decision, Stop) and "HTTP 401 authentication_error" in decision.evidence[0]
    assert len(server.requests) == 1


def test_the_spend_cap_stops_before_a_call(ledger: Ledger, view: AgentView) -> None:
    ledger.append("c", "model_called", payload("model_called", cost_usd=1.25))
    decision, server = decide(ledger, view, [], ATTUNE_AGENT_SPEND_CAP_USD="1")
    assert isinstance(decision, Stop) and decision.reason == "agent_spend_cap"
    assert "ATTUNE_AGENT_SPEND_CAP_USD" in decision.evidence[0] and server.requests == []


def test_questions_without_end_are_bounded(ledger: Ledger, view: AgentView) -> None:
    script: list[Step] = [Turn([text("Which one?")], "end_turn") for _ in range(MAX_BAD_TURNS)]
    decision, _ = decide(ledger, view, script)
    assert isinstance(decision, Stop) and decision.reason == "agent_error"
    assert len(kinds(ledger, "agent_assumption")) == MAX_BAD_TURNS


def test_an_accepted_decision_is_replayed_from_the_ledger_without_a_call(
    ledger: Ledger, view: AgentView
) -> None:
    line = next(
        n
        for n, t in enumerate((ROOT / "runners/embedded/train.py").read_text().splitlines(), 1)
        if "set_num_threads" in t
    )
    ref = f"runners/embedded/train.py:{line}"
    why = "one intra-op thread leaves the second core idle during every matmul"
    script: list[Step] = [
        Turn([tool("read_source", path="runners/embedded/train.py", start=line, end=line)]),
        Turn(
            [
                tool(
                    "propose",
                    changes={"threads": 2},
                    bottleneck="compute",
                    mechanism=why,
                    expected_gain_pct=40,
                    source_refs=[ref],
                )
            ]
        ),
    ]
    first, _ = decide(ledger, view, script)
    assert isinstance(first, Proposal) and first.changes == {"threads": (1, 2)}
    again, server = decide(ledger, view, [])  # killed before the campaign recorded it
    assert again == first and server.requests == []
    assert [c["decision"] for c in kinds(ledger, "tool_finished")] == [None, "propose"]
    assert [c["name"] for c in kinds(ledger, "tool_started")] == ["read_source", "propose"]


def test_lessons_reach_the_model_and_the_ones_it_cites_reach_the_proposal(
    ledger: Ledger, view: AgentView
) -> None:
    from bot.lessons.view import LessonView
    from tests.fake_anthropic import Request, tool_results

    lesson = LessonView(
        id="embedded-threads-up",
        claim="More intra-op threads speed up the embedded workload on idle cores.",
        levers={"threads": "up"},
        effect="faster",
        gain_pct=35.0,
        trials=3,
    )
    lessons_view = view.model_copy(update={"lessons": [lesson]})
    line = next(
        n
        for n, t in enumerate((ROOT / "runners/embedded/train.py").read_text().splitlines(), 1)
        if "set_num_threads" in t
    )
    why = "one intra-op thread leaves the second core idle during every matmul"

    def propose(*used: str) -> dict[str, Any]:
        return tool(
            "propose",
            changes={"threads": 2},
            bottleneck="compute",
            mechanism=why,
            expected_gain_pct=35,
            source_refs=[f"runners/embedded/train.py:{line}"],
            lessons_used=list(used),
        )

    def sees_the_lesson(request: Request) -> None:
        assert lesson.claim in str(request["messages"][0]["content"])

    def unknown_refused(request: Request) -> None:
        assert "unknown lesson id no-such-lesson" in str(tool_results(request)[0]["content"])

    script: list[Step] = [
        Turn([tool("grep_source", pattern="set_num_threads")], expect=sees_the_lesson),
        Turn([propose("no-such-lesson")]),
        Turn([propose(lesson.id)], expect=unknown_refused),
    ]
    decision, _ = decide(ledger, lessons_view, script)
    assert isinstance(decision, Proposal) and decision.lessons_used == [lesson.id]
