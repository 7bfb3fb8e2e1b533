"""A whole campaign on the embedded workload with the Claude agent, against a local server
speaking the Messages API (tests/fake_anthropic.py) that replays one scripted conversation.

``attune tune --agent claude`` runs as a real subprocess through calibration into the first
conversation: a question answered with the default, an early stop refused, 429 and 500
retried, a grep; it is killed with SIGKILL while the model is answering. ``attune tune
--resume`` rebuilds the conversation from the ledger (the same messages, no launch repeated),
and the model's two-lever proposal, a citation of a line it has not read, a bogus citation,
malformed input and a truncated answer are each refused and corrected before its candidate
runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.agents.claude.messages import TAKE_THE_DEFAULT
from bot.cli import main
from bot.forges.local import LocalForge
from bot.github.commands import parse
from gate.ledger import Ledger, LedgerEvent
from tests.conftest import ROOT
from tests.fake_anthropic import Fail, FakeAnthropic, Request, Turn, text, tool, tool_results

pytestmark = pytest.mark.slow  # real training runs or whole campaigns

LEVERS = {"attention": "math", "threads": 1, "activation_checkpointing": True}
WHY = "one intra-op thread leaves the second core idle during every matmul"
TRAIN = "runners/embedded/train.py"


def refused(*needles: str) -> Any:
    """A check that the agent answered the model's previous call with a tool error."""

    def check(request: Request) -> None:
        results = tool_results(request)
        assert results and results[0].get("is_error") is True, results
        for needle in needles:
            assert needle in str(results[0]["content"]), (needle, results[0]["content"])

    return check


def hits(request: Request) -> list[str]:
    """``path:line`` of every grep hit in the agent's tool results, in order."""
    lines = [ln for r in tool_results(request) for ln in str(r["content"]).splitlines()]
    return [":".join(ln.split(":")[:2]) for ln in lines if ln.startswith("runners/")]


class Script:
    """The conversation, and what the test needs to know about it."""

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.refs: dict[str, str] = {}
        self.held: Request | None = None

    def propose(self, changes: dict[str, Any], *refs: str, **kw: Any) -> dict[str, Any]:
        return tool(
            "propose",
            changes=changes,
            bottleneck="compute",
            mechanism=WHY,
            expected_gain_pct=30,
            source_refs=list(refs),
            **kw,
        )

    def steps(self) -> list[Any]:
        def asked_default(request: Request) -> None:
            assert TAKE_THE_DEFAULT in str(request["messages"][-1]["content"])

        def killed_here(request: Request) -> Turn:
            self.held = request
            found = hits(request)
            self.refs["threads"] = next(h for h in found if h.startswith(TRAIN))
            self.refs["attention"] = next(h for h in found if "model.py" in h)
            return Turn([text("unreachable")], "end_turn", hold=self.hold)

        def same_conversation(request: Request) -> Turn:
            assert self.held is not None and request["messages"] == self.held["messages"]
            both = {"threads": 2, "attention": "sdpa"}
            return Turn([text("Both."), self.propose(both, self.refs["threads"])])

        def unread(request: Request) -> Turn:
            path = self.refs["threads"].split(":")[0]
            line = (
                (ROOT / path).read_text().splitlines().index("    assert cfg.threads is not None")
            )
            return Turn([self.propose({"threads": 2}, f"{path}:{line + 1}")])

        def correct(request: Request) -> Turn:
            return Turn([self.propose({"threads": 2}, self.refs["threads"])])

        return [
            Turn([text("Should I favour throughput or memory headroom?")], "end_turn"),
            Turn([tool("stop", reason="looks tuned", evidence_trial_ids=[])], expect=asked_default),
            Fail(
                429,
                "rate_limit_error",
                "Number of request tokens has exceeded your rate limit",
                "0",
            ),
            Fail(500, "api_error", "Internal server error"),
            Turn(
                [
                    tool("grep_source", pattern=r"set_num_threads", path=TRAIN),
                    tool(
                        "grep_source", pattern=r"cfg\.attention", path="runners/embedded/model.py"
                    ),
                ],
                expect=refused("stop refused", "names no finished trial"),
            ),
            killed_here,  # SIGKILL while the model answers
            same_conversation,  # asked again by the resumed bot, with the same history
            unread,
            Turn(
                [self.propose({"threads": 2}, f"{TRAIN}:1")],
                expect=refused("read runners/embedded/train.py around line"),
            ),
            Turn(
                [tool("read_source", path=TRAIN, start=1, end=3)],
                expect=refused("does not mention threads"),
            ),
            Turn([tool("read_source", path=TRAIN, start="ten", end=20)]),
            Turn(
                [text("Proposing"), tool("propose", changes={"threads": 2})],
                "max_tokens",
                expect=refused("malformed input for read_source", "start"),
            ),
            Turn([tool("get_history")], expect=refused("cut off")),
            correct,
        ]


@pytest.fixture(scope="module")
def campaign(
    tmp_path_factory: pytest.TempPathFactory, write_recipe: Any
) -> Iterator[tuple[Path, list[LedgerEvent], FakeAnthropic, Script, list[LedgerEvent]]]:
    from tests.conftest import SMALL_CONFIG

    tmp = tmp_path_factory.mktemp("claude")
    script = Script()
    with FakeAnthropic(script.steps()) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("ANTHROPIC_API_KEY", "test-key")
        env.setenv("ANTHROPIC_BASE_URL", server.url)
        env.setenv("ATTUNE_AGENT_BACKOFF_S", "0.01")
        recipe = write_recipe(tmp, "small", **{**SMALL_CONFIG, **LEVERS})
        workdir = tmp / "campaign"
        argv = [
            sys.executable,
            "-m",
            "bot.cli",
            "tune",
            str(recipe),
            "--agent",
            "claude",
            "--budget",
            "1",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--max-trials",
            "1",
            "--max-pairs",  # the agent is under test here, not the judgement's extra runs
            "0",
            "--confirm-pairs",
            "0",
            "--workdir",
            str(workdir),
        ]
        bot = subprocess.Popen(
            argv,
            cwd=ROOT,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 900  # calibration on a loaded 2-core machine included
        try:
            while script.held is None:  # until the bot waits on the held answer
                server.arrived.wait(timeout=1)
                server.arrived.clear()
                assert bot.poll() is None, bot.stderr.read() if bot.stderr else ""
                assert time.monotonic() < deadline, "the bot never reached the held call"
        finally:
            os.killpg(bot.pid, signal.SIGKILL)
            bot.wait()
        script.hold.set()
        with Ledger(workdir / "ledger.db") as ledger:
            before = ledger.events()
        assert main(["tune", "--resume", str(workdir)]) == 0
        with Ledger(workdir / "ledger.db") as ledger:
            yield workdir, ledger.events(), server, script, before


def kinds(events: list[LedgerEvent], kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.kind == kind]


def test_the_campaign_ran_the_whole_script_and_stopped(campaign: Any) -> None:
    _, events, server, _, _ = campaign
    assert server.failures == [] and server.left == 0
    assert kinds(events, "campaign_stopped")[-1]["reason"] == "max_trials"
    assert [p["trial"] for p in kinds(events, "candidate_proposed")] == ["c1"]


def test_a_kill_mid_conversation_resumes_it_without_repeating_a_launch(campaign: Any) -> None:
    _, events, _, _, before = campaign
    assert [e.kind for e in before].count("model_called") == 3  # then killed
    started = [p["trial"] for p in kinds(events, "trial_started")]
    assert len(started) == len(set(started))  # no launch twice
    assert {f"baseline-{i}" for i in range(1, 6)} | {"c1"} <= set(started)
    assert len(kinds(events, "agent_assumption")) == 1  # not recorded again on replay
    assert kinds(events, "trial_abandoned") == []


def test_every_model_call_is_in_the_ledger_with_its_cost(campaign: Any) -> None:
    _, events, server, _, _ = campaign
    calls = kinds(events, "model_called")
    assert len(calls) == len(server.requests) - 3  # two errors retried, one killed
    assert {c["conversation"] for c in calls} == {"d0"}
    assert [c["call"] for c in calls] == list(range(11))
    assert calls[2]["attempts"] == 3 and all(c["cost_usd"] > 0 for c in calls)
    assert calls[2]["tool_calls"] == ["grep_source", "grep_source"]
    finished = kinds(events, "tool_finished")
    assert [f["decision"] for f in finished if f["decision"]] == ["propose"]
    assert [f["call"] for f in finished if f["decision"]] == [10]
    assert len(kinds(events, "tool_started")) == len(finished)  # none left unfinished
    assert calls[0]["stop_reason"] == "end_turn" and calls[8]["stop_reason"] == "max_tokens"


def test_the_question_was_answered_with_the_default_and_recorded(campaign: Any) -> None:
    workdir, events, _, _, _ = campaign
    [assumption] = kinds(events, "agent_assumption")
    assert assumption["question"] == "Should I favour throughput or memory headroom?"
    report = (workdir / "report.md").read_text()
    assert "## Assumptions the agent made" in report and "memory headroom" in report
    assert "- LLM agent: 11 model calls" in report


def test_only_the_corrected_proposal_became_a_candidate(campaign: Any) -> None:
    _, events, _, script, _ = campaign
    [proposed] = kinds(events, "candidate_proposed")
    assert proposed["changes"] == {"threads": [1, 2]}
    assert proposed["sources"] == [script.refs["threads"]]
    # the model's words, then the step-time model's prediction of the move, recorded beside them
    mechanism, _, prediction = proposed["mechanism"].partition(" [step-time model: predicted ")
    assert mechanism == WHY and prediction.endswith("%)]"), proposed["mechanism"]


def test_pull_requests_carry_the_hypothesis_and_the_comment_the_llm_cost(campaign: Any) -> None:
    workdir, _, _, script, _ = campaign
    with LocalForge(workdir / "forge", create=False) as forge:
        body = forge.get(2).body
        assert WHY in body and "+30%" in body and script.refs["threads"] in body
        [comment] = forge.comments(1)
        assert "LLM agent: 11 model calls" in comment.body and "GPU-hours" in comment.body


def test_without_a_key_tune_says_how_to_set_one_and_writes_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    write_recipe: Any,
) -> None:
    from tests.conftest import SMALL_CONFIG

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    recipe = write_recipe(tmp_path, "small", **SMALL_CONFIG)
    workdir = tmp_path / "run"
    argv = ["tune", str(recipe), "--agent", "claude", "--budget", "1", "--workdir", str(workdir)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "export ANTHROPIC_API_KEY=" in err and "--agent rules" in err
    assert not workdir.exists()


def test_the_pull_request_command_accepts_agent_claude() -> None:
    command = parse("/attune tune budget=1 agent=claude")
    assert command is not None and command.agent == "claude"
