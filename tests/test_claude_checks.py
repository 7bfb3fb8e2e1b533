"""The playbook's checks (pure), the source the agent may read, prices, backoff, settings."""

from __future__ import annotations

from typing import Any

import pytest

from bot.agents.claude import checks
from bot.agents.claude.api import backoff_s
from bot.agents.claude.messages import TAKE_THE_DEFAULT, reply
from bot.agents.claude.prices import PRICES, Usage, cost_usd
from bot.agents.claude.settings import NO_KEY, load_settings
from bot.agents.claude.source_tree import SourceError, source_tree
from bot.agents.claude.tools import Outcome
from gate.errors import AttuneError

HYPOTHESIS = {
    "changes": {"threads": 2},
    "bottleneck": "compute",
    "mechanism": "one thread leaves the second core idle during every matmul",
    "expected_gain_pct": 40,
    "source_refs": ["runners/embedded/train.py:1"],
}


@pytest.mark.parametrize("field", checks.HYPOTHESIS)
def test_every_field_of_the_hypothesis_is_required(field: str) -> None:
    assert checks.missing_fields(HYPOTHESIS) == []
    assert checks.missing_fields({**HYPOTHESIS, field: None}) == [f"{field} is missing"]


def test_a_bottleneck_outside_the_profile_and_a_vague_mechanism_are_refused() -> None:
    problems = checks.missing_fields({**HYPOTHESIS, "bottleneck": "vibes", "mechanism": "faster"})
    assert any("bottleneck 'vibes'" in p for p in problems)
    assert any("mechanism must say why" in p for p in problems)
    assert checks.missing_fields({**HYPOTHESIS, "expected_gain_pct": -3})


def test_one_lever_or_one_declared_coupled_split() -> None:
    split = frozenset({"data_parallel_size", "threads"})
    assert checks.lever_problem(["threads"], False, []) is None
    assert "2 levers moved at once" in str(checks.lever_problem(["threads", "compile"], False, []))
    assert "not a coupled split" in str(checks.lever_problem(["threads", "compile"], True, [split]))
    assert checks.lever_problem(["threads", "data_parallel_size"], True, [split]) is None


def test_only_layout_keys_may_change() -> None:
    assert checks.layout_problems(["threads", "lr"], {"threads"}) == [
        "lr is not a layout key in the registry (get_registry('lr') says why)"
    ]


def test_a_citation_must_resolve_name_the_key_and_have_been_read() -> None:
    def cite(ref: str, key: str) -> tuple[str, int] | str:
        return ("a.py", 7) if ref == "a.py:7" and key == "threads" else f"{ref} is not it"

    assert checks.citation_problems(["threads"], ["a.py:7"], cite, {("a.py", 7)}) == []
    unread = checks.citation_problems(["threads"], ["a.py:7"], cite, set())
    assert "read a.py around line 7 before citing it" in unread[0]
    bogus = checks.citation_problems(["threads"], ["a.py:9"], cite, {("a.py", 9)})
    assert bogus == ["a.py:9 is not it", "no citation read and resolving for threads"]


def test_no_rerun_of_a_failure_and_nothing_twice() -> None:
    assert "c2, which failed" in str(checks.rerun_problem("f1", {"f1": "c2"}))
    assert checks.rerun_problem("f2", {"f1": "c2"}) is None
    assert checks.tried_problem("f1", {"f1"}) and checks.tried_problem("f3", {"f1"}) is None
    assert "unknown lesson id L9" in str(checks.lessons_problem(["L9"], ["L1"]))


def test_a_stop_needs_the_budget_spent_or_finished_trials_ruling_out_every_move() -> None:
    common: dict[str, Any] = {
        "budget_left_s": 100.0,
        "forecast_s": 10.0,
        "finished": ["c1"],
        "remaining": [],
    }
    assert checks.stop_problem(**{**common, "forecast_s": 200.0}, evidence=[]) is None
    assert "names no finished trial" in str(checks.stop_problem(**common, evidence=[]))
    assert "c9 is not a finished trial" in str(checks.stop_problem(**common, evidence=["c9"]))
    left = checks.stop_problem(
        **{**common, "remaining": ["compile=True (not tried)"]}, evidence=["c1"]
    )
    assert "moves remain" in str(left) and "compile=True" in str(left)
    assert checks.stop_problem(**common, evidence=["c1"]) is None


def test_the_source_tree_is_confined_and_capped() -> None:
    tree = source_tree("embedded", "1")
    text, shown = tree.read("runners/embedded/train.py", 1, 10_000)
    assert len(shown) <= 200 and "runners/embedded/train.py has" in text
    hostile = ["../gate/ledger.py", "/etc/passwd"]  # not a path: inputs the tree refuses
    hostile.append("runners/embedded/../../gate/ledger.py")  # not a path: it climbs out too
    for path in hostile:
        with pytest.raises(SourceError):
            tree.read(path, 1, 2)
    with pytest.raises(SourceError, match="outside"):
        tree.grep("import", "gate")
    with pytest.raises(SourceError, match="not a regular expression"):
        tree.grep("(")
    path, line, _ = tree.grep(r"set_num_threads", "runners/embedded/train.py").hits[0]
    assert tree.cite(f"{path}:{line}", "threads") == (path, line)
    assert "names version 7" in str(tree.cite(f"{path}:{line}@7", "threads"))
    assert "does not mention lr" in str(tree.cite(f"{path}:{line}", "lr"))


def test_megatron_source_is_the_installed_package_at_its_version() -> None:
    tree = source_tree("megatron", "0.19.2", env={})
    assert tree.package == "megatron" and (tree.root / "megatron" / "core").is_dir()
    hits = tree.grep(r"tensor_model_parallel_size:", "megatron/core/model_parallel_config.py").hits
    assert hits and tree.cite(f"{hits[0][0]}:{hits[0][1]}@0.19.2", "tensor_model_parallel_size")


def test_cost_from_usage_and_price() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_input_tokens=1_000_000)
    assert cost_usd(PRICES["claude-sonnet-4-6"], usage) == pytest.approx(3.0 + 1.5 + 0.3)


def test_backoff_honours_retry_after_then_doubles_with_jitter_under_a_cap() -> None:
    assert backoff_s(0, 2.5, base=1, cap=60, rand=0.5) == 2.5
    assert backoff_s(3, None, base=1, cap=60, rand=1.0) == 8.0
    assert backoff_s(10, None, base=1, cap=60, rand=0.5) == 30.0
    assert backoff_s(0, 500.0, base=1, cap=60, rand=0.5) == 60.0


def test_settings_say_how_to_set_the_key_and_name_a_bad_variable() -> None:
    with pytest.raises(AttuneError) as err:
        load_settings({})
    assert str(err.value) == NO_KEY and "ANTHROPIC_API_KEY" in NO_KEY
    with pytest.raises(AttuneError, match="ATTUNE_AGENT_MAX_TOKENS"):
        load_settings({"ANTHROPIC_API_KEY": "k", "ATTUNE_AGENT_MAX_TOKENS": "12"})
    with pytest.raises(AttuneError, match="no price for model"):
        load_settings({"ANTHROPIC_API_KEY": "k", "ATTUNE_AGENT_MODEL": "claude-unknown"})
    priced = {"ANTHROPIC_API_KEY": "k", "ATTUNE_AGENT_MODEL": "x", "ATTUNE_AGENT_PRICE_USD": "2,8"}
    assert load_settings(priced).price.output == 8.0


def test_a_truncated_turn_runs_nothing_and_a_question_gets_the_default() -> None:
    ran: list[str] = []

    def run(use: dict[str, Any]) -> Outcome:
        ran.append(str(use["name"]))
        return Outcome("ok")

    use = {"type": "tool_use", "id": "t1", "name": "get_history", "input": {}}
    cut = reply([use], "max_tokens", run)
    assert ran == [] and cut.content[0]["is_error"] and "max_tokens" in cut.content[1]["text"]
    asked = reply([{"type": "text", "text": "Which metric?"}], "end_turn", run)
    assert asked.question == "Which metric?" and asked.content[0]["text"] == TAKE_THE_DEFAULT
    done = reply([use], "tool_use", run)
    assert ran == ["get_history"] and done.ok and "is_error" not in done.content[0]


def test_the_claude_agent_is_refused_up_front_without_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bot.campaign.setup import agent_problem
    from bot.render import replies

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert agent_problem("rules") is None
    problem = agent_problem("claude")
    assert problem == NO_KEY
    reply = replies.agent_unavailable("claude", problem)
    assert (
        "`agent=claude`" in reply
        and "ANTHROPIC_API_KEY" in reply
        and "Nothing was started" in reply
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert agent_problem("claude") is None


def test_the_fold_sums_model_calls_for_every_surface(tmp_path: Any) -> None:
    from bot.render import campaign_comment, cost_line
    from bot.state.fold import fold
    from gate.ledger import Ledger
    from tests.events_factory import payload

    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("c", "campaign_opened", payload("campaign_opened", agent="claude"))
        for cost in (0.01, 0.02):
            ledger.append("c", "model_called", payload("model_called", cost_usd=cost))
        ledger.append("c", "agent_assumption", payload("agent_assumption"))
        state = fold("c", ledger.events("c"))
    assert state.llm == {"calls": 2, "input_tokens": 2400, "output_tokens": 600, "cost_usd": 0.03}
    assert state.assumptions == [payload("agent_assumption")["question"]]
    line = "LLM agent: 2 model calls, 2,400 input + 600 output tokens, $0.0300"
    assert line in cost_line(state) and line in campaign_comment(state, budget_h=1.0)
