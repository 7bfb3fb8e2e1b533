"""The Claude agent's read-only ``predict`` tool: the campaign's calibrated step-time model as a
what-if on a candidate, answered from the probe, under the resolving tools' deadline, against
the local Messages API (tests/fake_anthropic.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.interfaces import Probe, ProfileRequest
from gate.ledger import Ledger
from tests.events_factory import payload
from tests.fake_anthropic import Request, Step, Turn, tool, tool_results
from tests.test_claude_guard_rails import decide, kinds, make_view, refused


def predicted(changes: dict[str, object]) -> Probe:
    return Probe(
        fingerprint=repr(sorted(changes.items())),
        predicted_gain_pct=12.5,
        band_pct=8.0,
        predicted_tokens_per_s=2150.0,
        predicted_trial_device_s=90.0,
    )


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("c", "campaign_opened", payload("campaign_opened", agent="claude"))
        yield ledger


def answered(request: Request) -> None:
    result = tool_results(request)[-1]
    assert result.get("is_error") is not True, result
    answer = json.loads(str(result["content"]))
    assert answer["predicted_gain_pct"] == 12.5 and answer["band_pct"] == 8.0
    assert answer["trial_device_hours"] == pytest.approx(90.0 / 3600)


def test_predict_answers_the_calibrated_models_what_if(ledger: Ledger) -> None:
    script: list[Step] = [
        Turn([tool("predict", changes={"threads": 2})]),
        Turn([tool("request_profile", reason="the bottleneck is unclear")], expect=answered),
    ]
    decision, _ = decide(ledger, make_view(), script, probe_of=predicted)
    assert isinstance(decision, ProfileRequest)
    [finished] = [f for f in kinds(ledger, "tool_finished") if f["name"] == "predict"]
    assert finished["outcome"] == "ok"


def test_predict_without_a_prediction_says_so(ledger: Ledger) -> None:
    script: list[Step] = [
        Turn([tool("predict", changes={"threads": 2})]),
        Turn(
            [tool("request_profile", reason="the bottleneck is unclear")],
            expect=refused("no prediction"),
        ),
    ]
    no_model = lambda changes: Probe(fingerprint="f")  # noqa: E731
    decision, _ = decide(ledger, make_view(), script, probe_of=no_model)
    assert isinstance(decision, ProfileRequest)


def test_predict_runs_under_the_deadline(ledger: Ledger) -> None:
    hold = threading.Event()

    def slow(changes: dict[str, object]) -> Probe:
        hold.wait(30)  # hangs until the test lets it go
        return predicted(changes)

    script: list[Step] = [
        Turn([tool("predict", changes={"threads": 2})]),
        Turn(
            [tool("request_profile", reason="the bottleneck is unclear")],
            expect=refused("did not finish within 0.5 s"),
        ),
    ]
    began = time.monotonic()
    decision, _ = decide(
        ledger, make_view(), script, probe_of=slow, ATTUNE_AGENT_TOOL_TIMEOUT_S="0.5"
    )
    assert isinstance(decision, ProfileRequest) and time.monotonic() - began < 15
    hold.set()
