"""Typed ledger events: the ledger refuses what does not validate, reads 0.1 ledgers, and the
documentation names every field of every kind."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bot.state.fold import fold
from gate.event_codec import EventError, parse_event
from gate.events import MODELS, CampaignOpened, TrialFinished
from gate.ledger import EVENT_KINDS, Ledger
from tests.conftest import ROOT
from tests.events_factory import DEFAULTS, payload

LEDGER_01 = ROOT / "tests" / "fixtures" / "ledgers" / "attune-0.1.db"


def test_the_models_are_the_closed_list_of_kinds() -> None:
    assert tuple(MODELS) == EVENT_KINDS
    assert set(DEFAULTS) == set(MODELS)  # the factory covers every kind
    for kind in MODELS:
        assert kind == parse_event(kind, payload(kind)).KIND


@pytest.mark.parametrize(
    ("kind", "bad", "message"),
    [
        ("trial_finished", {"status": "exploded"}, "trial_finished: status: Input should be"),
        ("trial_finished", {"devices": "two"}, "trial_finished: devices:"),
        ("campaign_stopped", {"reason": "bored"}, "campaign_stopped: reason:"),
        ("pr_merged", {"surprise": 1}, "pr_merged: surprise: Extra inputs are not permitted"),
        ("campaign_opened", {"baseline": None}, "campaign_opened: baseline:"),
    ],
)
def test_an_invalid_payload_is_refused_and_nothing_is_written(
    tmp_path: Path, kind: str, bad: dict[str, object], message: str
) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        with pytest.raises(EventError, match=message):
            ledger.append("c1", kind, payload(kind, **bad))  # type: ignore[arg-type]
        assert ledger.events() == []


def test_a_missing_field_is_refused(tmp_path: Path) -> None:
    incomplete = payload("trial_finished")
    del incomplete["released_at"]
    with (
        Ledger(tmp_path / "ledger.db") as ledger,
        pytest.raises(EventError, match="trial_finished: released_at: Field required"),
    ):
        ledger.append("c1", "trial_finished", incomplete)


def test_typed_events_can_be_appended_and_read_back(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        opened = CampaignOpened.model_validate(payload("campaign_opened"))
        stored = ledger.append("c1", "campaign_opened", opened)
        assert stored.event == opened and stored.payload["v"] == 1
        with pytest.raises(EventError, match="a campaign_opened event appended as pr_closed"):
            ledger.append("c1", "pr_closed", opened)


def test_a_ledger_written_by_attune_0_1_still_reads(tmp_path: Path) -> None:
    copy = tmp_path / "ledger.db"
    shutil.copyfile(LEDGER_01, copy)
    with Ledger(copy) as ledger:
        assert ledger.verify().ok
        (name,) = ledger.campaigns()
        events = ledger.events(name)
        typed = [e.event for e in events]  # every 0.1 payload validates (as version 1)
        assert all("v" not in e.payload for e in events)
        finished = [t for t in typed if isinstance(t, TrialFinished)]
        assert len(finished) == 8 and all(t.device_seconds > 0 for t in finished)
        state = fold(name, events)
        assert state.stopped is not None and state.stopped.reason == "max_trials"
        assert state.incumbent == "c2" and state.noise is not None
        # and the campaign carries on writing current events after them
        ledger.append(name, "campaign_resumed", payload("campaign_resumed"))
        assert ledger.verify().ok


def documented_rows() -> dict[str, str]:
    rows = {}
    for line in (ROOT / "docs" / "ledger-events.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`(\w+)`", cells[0]) if len(cells) == 3 else None
        if match:
            rows[match.group(1)] = cells[2]
    return rows


def test_the_documentation_names_every_kind_and_field() -> None:
    rows = documented_rows()
    assert sorted(rows) == sorted(MODELS)
    missing = {
        kind: [f for f in model.model_fields if f != "v" and _undocumented(model, f, rows[kind])]
        for kind, model in MODELS.items()
    }
    assert {k: v for k, v in missing.items() if v} == {}


def _undocumented(model: type, field: str, row: str) -> bool:
    info = model.model_fields[field]  # type: ignore[attr-defined]
    return f"`{info.alias or field}`" not in row
