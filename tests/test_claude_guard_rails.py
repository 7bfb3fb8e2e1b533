"""The Claude agent's guard rails against a hostile model, each against the local Messages API
(tests/fake_anthropic.py): a regex that backtracks, tools that hang or are stopped, citations
of unseen lines and of prose, a bottleneck the profile contradicts and an absurd gain, usage
numbers that lie, a turn of a hundred reads and a conversation that outgrows the context,
coupled moves that are not splits, a move the gate's `when:` conditions refuse, and a server
claiming another model."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.agents.claude import messages
from bot.agents.claude.agent import ClaudeAgent
from bot.agents.claude.factory import load_playbook
from bot.agents.claude.settings import load_settings
from bot.agents.claude.source_tree import SourceTree, source_tree
from bot.campaign.recipe_edit import apply_changes
from bot.commands.stop import STOP_FILE
from bot.interfaces import AgentView, Probe, ProbeOf, ProfileRequest, Proposal, Stop
from gate.ledger import Ledger
from gate.models import ProfileBreakdown
from gate.recipe import load_recipe, parse_recipe
from gate.registry import load_registry
from runners.adapters import get_adapter
from tests.conftest import ROOT
from tests.events_factory import payload
from tests.fake_anthropic import Fail, FakeAnthropic, Request, Step, Turn, text, tool, tool_results

REGISTRY = load_registry("embedded", "1")
RECIPE = ROOT / "examples" / "ported-gpt.yaml"
TRAIN = "runners/embedded/train.py"
WHY = "one intra-op thread leaves the second core idle during every matmul"


def line_of(path: str, needle: str) -> int:
    lines = (ROOT / path).read_text().splitlines()
    return next(n for n, t in enumerate(lines, 1) if needle in t)


THREADS_LINE = line_of(TRAIN, "torch.set_num_threads(cfg.threads)")


def make_view(**update: Any) -> AgentView:
    effective = get_adapter("embedded").resolve(load_recipe(RECIPE))
    layout = {k: e.source for k, e in REGISTRY.data.keys.items() if e.key_class == "layout"}
    view = AgentView(
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
    return view.model_copy(update=update)


def probe(changes: dict[str, object]) -> Probe:
    return Probe(fingerprint=repr(sorted(changes.items())))


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("c", "campaign_opened", payload("campaign_opened", agent="claude"))
        yield ledger


def decide(
    ledger: Ledger,
    view: AgentView,
    script: list[Step],
    *,
    probe_of: ProbeOf = probe,
    tree: SourceTree | None = None,
    **env: str,
) -> tuple[Any, FakeAnthropic]:
    with FakeAnthropic(script) as server:
        settings = load_settings(
            {
                "ANTHROPIC_API_KEY": "k",
                "ANTHROPIC_BASE_URL": server.url,
                "ATTUNE_AGENT_BACKOFF_S": "0.01",
                **env,
            }
        )
        agent = ClaudeAgent(
            ledger=ledger,
            campaign="c",
            registry=REGISTRY,
            tree=tree or source_tree("embedded", "1"),
            settings=settings,
            playbook=load_playbook(),
        )
        decision = agent.decide(view, probe_of, set())
    assert server.failures == []
    return decision, server


def kinds(ledger: Ledger, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in ledger.events("c") if e.kind == kind]


def answer(request: Request, n: int = 0) -> str:
    return str(tool_results(request)[n]["content"])


def refused(*needles: str) -> Any:
    """A check that the agent answered the model's last tool call of its previous turn with a
    tool error naming ``needles``."""

    def check(request: Request) -> None:
        result = tool_results(request)[-1]
        assert result.get("is_error") is True, result
        for needle in needles:
            assert needle in str(result["content"]), (needle, result["content"])

    return check


def propose(changes: dict[str, Any], *refs: str, **kw: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "changes": changes,
        "bottleneck": "compute",
        "mechanism": WHY,
        "expected_gain_pct": 30,
        "source_refs": list(refs),
    }
    return tool("propose", **{**fields, **kw})


def read(path: str, start: int, end: int | None = None) -> dict[str, Any]:
    return tool("read_source", path=path, start=start, end=end or start)


# --- the tools: bounded time, bounded output ---


def test_a_backtracking_pattern_answers_at_once(ledger: Ledger, tmp_path: Path) -> None:
    """``^(\\w+\\s?)*$`` over a 27-letter word and a '!' takes Python's ``re`` tens of seconds
    (holding the GIL); RE2 answers in microseconds."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("x = 1\n" + "a" * 27 + "!\n")
    tree = SourceTree(root=tmp_path, package="pkg", version="1")
    took: list[float] = []

    def answered(request: Request) -> Turn:
        took.append(time.monotonic())
        assert "no line of pkg matches" in answer(request), answer(request)
        return Turn([tool("grep_source", pattern=r"(a)\1")])

    script: list[Step] = [
        Turn([tool("grep_source", pattern=r"^(\w+\s?)*$")]),
        answered,
        Turn(
            [tool("request_profile", reason="the bottleneck is unclear")],
            expect=refused("RE2", "backreferences"),
        ),
    ]
    began = time.monotonic()
    decision, _ = decide(ledger, make_view(), script, tree=tree)
    assert isinstance(decision, ProfileRequest)
    assert took[0] - began < 3.0
    finished = kinds(ledger, "tool_finished")
    assert [f["outcome"] for f in finished] == ["ok", "error", "ok"]


def test_a_hanging_tool_times_out_and_a_resume_does_not_rerun_it(ledger: Ledger) -> None:
    probed: list[dict[str, object]] = []

    hold = threading.Event()

    def slow(changes: dict[str, object]) -> Probe:
        probed.append(changes)
        hold.wait(30)  # hangs until the test lets it go
        return probe(changes)

    script: list[Step] = [
        Turn([tool("get_memory", changes={"threads": 2})]),
        Turn(
            [tool("request_profile", reason="the bottleneck is unclear")],
            expect=refused("did not finish within 0.5 s"),
        ),
    ]
    began = time.monotonic()
    decision, _ = decide(
        ledger, make_view(), script, probe_of=slow, ATTUNE_AGENT_TOOL_TIMEOUT_S="0.5"
    )
    # the tool was abandoned at its 0.5 s deadline, not waited for (it sleeps 30 s)
    assert isinstance(decision, ProfileRequest) and time.monotonic() - began < 15
    hold.set()
    [timeout] = [f for f in kinds(ledger, "tool_finished") if f["name"] == "get_memory"]
    assert timeout["outcome"] == "timeout"
    again, server = decide(ledger, make_view(), [], probe_of=slow)  # replayed from the ledger
    assert isinstance(again, ProfileRequest) and server.requests == [] and len(probed) == 1


def test_attune_stop_interrupts_a_tool_and_a_resume_pays_for_nothing_again(
    ledger: Ledger,
) -> None:
    stop_file = ledger.path.parent / STOP_FILE
    release = threading.Event()

    def hangs(changes: dict[str, object]) -> Probe:
        release.wait(30)
        return probe(changes)

    threading.Timer(0.5, stop_file.write_text, args=("requested\n",)).start()
    script: list[Step] = [Turn([tool("get_memory", changes={"threads": 2})])]
    began = time.monotonic()
    decision, _ = decide(ledger, make_view(), script, probe_of=hangs)
    release.set()
    assert isinstance(decision, Stop) and decision.reason == "requested"
    assert time.monotonic() - began < 15  # the tool would have hung 30 s
    # the answer that asked for the tool was recorded before the tool ran; the tool started
    assert [c["call"] for c in kinds(ledger, "model_called")] == [0]
    assert [t["name"] for t in kinds(ledger, "tool_started")] == ["get_memory"]
    assert kinds(ledger, "tool_finished") == []
    stop_file.unlink()
    resumed: list[Step] = [
        Turn(
            [tool("request_profile", reason="the bottleneck is unclear")],
            expect=refused("did not finish before the campaign stopped"),
        )
    ]
    again, server = decide(ledger, make_view(), resumed, probe_of=hangs)
    assert isinstance(again, ProfileRequest) and len(server.requests) == 1
    assert [c["call"] for c in kinds(ledger, "model_called")] == [0, 1]


# --- citations ---


def test_a_citation_counts_only_for_a_line_returned_in_an_earlier_turn(ledger: Ledger) -> None:
    ref = f"{TRAIN}:{THREADS_LINE}"
    script: list[Step] = [
        Turn([read(TRAIN, THREADS_LINE), propose({"threads": 2}, ref)]),  # cites, unseen
        Turn([propose({"threads": 2}, ref)], expect=refused("this same turn")),
    ]
    decision, server = decide(ledger, make_view(), script)
    assert isinstance(decision, Proposal) and decision.sources == [ref]
    assert len(server.requests) == 2  # the first proposal was refused, the second accepted


def test_a_citation_of_prose_naming_the_key_is_refused(ledger: Ledger) -> None:
    prose = line_of("runners/embedded/config.py", "Dropout probability on attention")
    kernel = line_of("runners/embedded/model.py", "self.kernel = cfg.attention")
    docstring = f"runners/embedded/config.py:{prose}"
    code = f"runners/embedded/model.py:{kernel}"
    sdpa = {"attention": "sdpa"}
    script: list[Step] = [
        Turn(
            [read("runners/embedded/config.py", prose), read("runners/embedded/model.py", kernel)]
        ),
        Turn([propose(sdpa, docstring)]),
        Turn([propose(sdpa, code)], expect=refused("names attention only in prose")),
    ]
    decision, _ = decide(ledger, make_view(), script)
    assert isinstance(decision, Proposal) and decision.sources == [code]


# --- the hypothesis ---


def test_a_bottleneck_the_profile_contradicts_and_an_absurd_gain_are_refused(
    ledger: Ledger,
) -> None:
    profile = ProfileBreakdown(
        compute=0.86, communication=0.0, cpu=0.1, idle=0.04, step_seconds=0.5, steps=3
    )
    ref = f"{TRAIN}:{THREADS_LINE}"
    script: list[Step] = [
        Turn([read(TRAIN, THREADS_LINE)]),
        Turn([propose({"threads": 2}, ref, bottleneck="communication", expected_gain_pct=1e9)]),
        Turn(
            [propose({"threads": 2}, ref, bottleneck="cpu", expected_gain_pct=5)],
            expect=refused("communication 0% of the step", "at most 100%"),
        ),
        Turn(
            [propose({"threads": 2}, ref, bottleneck="cpu", expected_gain_pct=20)],
            expect=refused("largest share is compute"),
        ),
        Turn(
            [
                propose(
                    {"threads": 2},
                    ref,
                    bottleneck="cpu",
                    expected_gain_pct=20,
                    bottleneck_why="compute is the largest share, but its kernels are tuned",
                )
            ],
            expect=refused("exceeds what removing all cpu time (10% of the step) could give: 11%"),
        ),
        Turn([propose({"threads": 2}, ref, expected_gain_pct=60)]),
    ]
    decision, _ = decide(ledger, make_view(profile=profile), script)
    assert isinstance(decision, Proposal) and decision.bottleneck == "compute"
    assert decision.expected_gain_pct == 60


# --- usage and the spend cap ---


def test_usage_from_the_api_is_validated_before_it_is_charged(ledger: Ledger) -> None:
    """A server reporting -1e9 input tokens is charged the most the request could have used,
    so the spend cap still holds: before, it was recorded as negative dollars and five more
    calls went past the cap."""
    hostile = {"input_tokens": -1_000_000_000, "output_tokens": 10**12}
    script: list[Step] = [
        Turn([text("Which metric?")], "end_turn", usage=hostile) for _ in range(5)
    ]
    decision, server = decide(
        ledger,
        make_view(),
        script,
        ATTUNE_AGENT_PRICE_USD="1000,1000",
        ATTUNE_AGENT_SPEND_CAP_USD="5",
    )
    assert isinstance(decision, Stop) and decision.reason == "agent_spend_cap"
    assert len(server.requests) == 1
    [call] = kinds(ledger, "model_called")
    assert call["input_tokens"] == call["request_chars"] > 0
    assert call["output_tokens"] == 4096 and call["cost_usd"] > 5
    assert "input_tokens -1000000000 is not a count" in call["usage_problem"]


def test_the_ledger_records_the_configured_model_and_the_server_claim_beside_it(
    ledger: Ledger,
) -> None:
    script: list[Step] = [
        Turn([tool("get_history")], model="claude-opus-4-6"),
        Turn([tool("request_profile", reason="the bottleneck is unclear")]),
    ]
    decide(ledger, make_view(), script)
    first, second = kinds(ledger, "model_called")
    assert first["model"] == second["model"] == "claude-sonnet-4-6"
    assert first["server_model"] == "claude-opus-4-6" and second["server_model"] is None


# --- the conversation's size ---


def test_a_turn_of_a_hundred_reads_runs_a_few_and_the_conversation_stays_bounded(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """96 reads in one turn once grew the next request past the context ("prompt is too
    long"), and a resume replayed the same oversized conversation. Now 8 run, old results
    are summarised past the bound (in the ledger), and the resumed conversation fits."""
    limit = 60_000
    monkeypatch.setattr(messages, "MAX_CONVERSATION_CHARS", limit)
    sizes: list[int] = []

    def within(request: Request) -> None:
        sizes.append(len(json.dumps(request["messages"])))
        assert sizes[-1] <= limit, sizes

    def capped(request: Request) -> None:
        within(request)
        results = tool_results(request)
        assert len(results) == 96
        assert sum(1 for r in results if not r.get("is_error")) == messages.MAX_TOOL_CALLS
        assert "at most 8 tool calls per turn" in str(results[-1]["content"])

    def reads(n: int) -> list[dict[str, Any]]:
        return [read(TRAIN, 1 + 40 * (i % 5), 40 + 40 * (i % 5)) for i in range(n)]

    script: list[Step] = [
        Turn(reads(96)),
        Turn(reads(8), expect=capped),
        Turn(reads(8), expect=within),
        Turn(reads(8), expect=within),
        Fail(400, "invalid_request_error", "prompt is too long: 212000 tokens > 200000 maximum"),
    ]
    decision, _ = decide(ledger, make_view(), script)
    assert isinstance(decision, Stop) and "prompt is too long" in decision.evidence[0]
    trimmed = kinds(ledger, "conversation_trimmed")
    assert trimmed and all(t["chars_after"] <= limit < t["chars_before"] for t in trimmed)
    # a resume rebuilds the whole conversation from the ledger, and its request still fits
    resumed: list[Step] = [Turn([tool("request_profile", reason="unclear")], expect=within)]
    again, _ = decide(ledger, make_view(), resumed)
    assert isinstance(again, ProfileRequest)


def test_bound_keeps_the_opening_and_the_latest_results() -> None:
    big = "x" * 5_000
    history: list[dict[str, Any]] = [{"role": "user", "content": [text("opening " + big)]}]
    for n in range(6):
        use = {"type": "tool_use", "id": f"t{n}", "name": "read_source", "input": {}}
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": big}
        history += [
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ]
    bounded = messages.bound(history, 20_000)
    assert bounded.chars_after <= 20_000 < bounded.chars_before and bounded.blocks >= 1
    assert bounded.messages[0] == history[0] and bounded.messages[-1] == history[-1]
    assert "trimmed" in str(bounded.messages[2]["content"][0]["content"])
    assert history[2]["content"][0]["content"] == big  # the recorded history is untouched


# --- moves ---


def test_a_coupled_move_must_be_a_split(ledger: Ledger) -> None:
    base = make_view()
    view = base.model_copy(
        update={"incumbent_values": {**base.incumbent_values, "data_parallel_size": 2}}
    )
    ranks = line_of(TRAIN, "if world != cfg.data_parallel_size")
    refs = (f"{TRAIN}:{THREADS_LINE}", f"{TRAIN}:{ranks}")
    script: list[Step] = [
        Turn([read(TRAIN, ranks, THREADS_LINE)]),
        Turn([propose({"data_parallel_size": 1, "threads": 4}, *refs, coupled=True)]),
        Turn(
            [propose({"data_parallel_size": 1, "threads": 2}, *refs, coupled=True)],
            expect=refused("is not a split", "goes from 2 to 4"),
        ),
    ]
    decision, _ = decide(ledger, view, script)
    assert isinstance(decision, Proposal)
    assert decision.changes == {"data_parallel_size": (2, 1), "threads": (1, 2)}


def test_the_agent_refuses_what_the_gates_when_conditions_refuse(ledger: Ledger) -> None:
    """Without a pinned global batch, the registry's ``when: unpinned`` makes a micro-batch
    change semantic: the agent now runs the gate's judgement, where it used to accept it
    (each such proposal cost a pull request and a trial slot before the gate refused it)."""
    text_unpinned = "\n".join(
        ln for ln in RECIPE.read_text().splitlines() if not ln.startswith("  global_batch_size")
    )
    adapter = get_adapter("embedded")
    baseline = adapter.resolve(parse_recipe(text_unpinned, path=RECIPE))

    def gated(changes: dict[str, object]) -> Probe:
        effective = adapter.resolve(
            parse_recipe(apply_changes(text_unpinned, changes), path=RECIPE)
        )
        fingerprint = effective.fingerprint()
        return Probe(fingerprint=fingerprint, effective=effective, baseline=baseline)

    micro = line_of(TRAIN, "cfg.micro_batch_size")
    script: list[Step] = [
        Turn([read(TRAIN, micro), read(TRAIN, THREADS_LINE)]),
        Turn([propose({"micro_batch_size": 2}, f"{TRAIN}:{micro}")]),
        Turn(
            [propose({"threads": 2}, f"{TRAIN}:{THREADS_LINE}")],
            expect=refused("the gate would reject it", "semantic"),
        ),
    ]
    view = make_view(incumbent_values=baseline.values)
    decision, _ = decide(ledger, view, script, probe_of=gated)
    assert isinstance(decision, Proposal) and decision.lever == ["threads"]
