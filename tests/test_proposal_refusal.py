"""A proposal the memory model predicts not to fit the device is refused before it becomes a
candidate: ``proposal_refused`` (reason ``predicted_oom``), no candidate id, no pull request,
nothing launched or charged; candidate ids stay dense (c1, c2, ...) whatever the agent proposes.
A whole simulated campaign (``--backend sim``) on the Megatron-LM Llama-3 8B example, with a
scripted agent that ignores the memory model."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.commands.tune import open_new, run_campaign
from bot.forges.local import LocalForge
from bot.interfaces import AgentView, ProbeOf, ProfileRequest, Proposal, Stop
from bot.state.fold import fold
from gate.ledger import Ledger
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # a whole (simulated) campaign


def _move(key: str, new: int) -> Proposal:
    return Proposal(
        lever=[key],
        changes={key: (1, new)},
        bottleneck="compute",
        mechanism="scripted",
        expected_gain_pct=5.0,
        sources=["megatron/training/arguments.py:1"],
    )


class ProposesInOrder:
    """A TEST DOUBLE of an agent: proposes each of ``proposals`` once, in order, then stops;
    it never asks the memory model (the probe) whether a move fits."""

    name = "scripted"

    def __init__(self, proposals: list[Proposal]) -> None:
        self.proposals = list(proposals)

    def decide(
        self, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        if not self.proposals:
            return Stop(reason="exhausted", evidence=["scripted agent: done"])
        return self.proposals.pop(0)


def test_a_proposal_predicted_not_to_fit_takes_no_candidate_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTUNE_SIM_SEED", "3")
    workdir = tmp_path / "run"
    open_new(
        workdir,
        recipe_path=ROOT / "examples" / "megatron" / "llama3-8b.yaml",
        budget_hours=500.0,
        agent="rules",
        steps=6,
        warmup=3,
        max_trials=3,
        calibration_runs=5,
        backend="sim",
        pairs=(0, 0),
    )
    # micro-batch 8 or 16 of an 8B model at sequence 8192 does not fit an 80 GiB H100; the
    # model's weights split over 2 tensor-parallel ranks do
    oom, fits, oom_again = (
        _move("micro_batch_size", 8),
        _move("tensor_model_parallel_size", 2),
        _move("micro_batch_size", 16),
    )
    agent = ProposesInOrder([oom, fits, oom_again])
    run_campaign(workdir, live=False, agent=agent)
    with Ledger(workdir / "ledger.db") as ledger:
        events = ledger.events()
    state = fold(events[0].campaign, events)

    refused = state.refused_proposals
    assert [r.reason for r in refused] == ["predicted_oom", "predicted_oom"]
    assert [r.changes["micro_batch_size"][1] for r in refused] == [8, 16]
    assert all("exceeds" in r.message and "less a 10% margin" in r.message for r in refused)
    assert all(r.fingerprint in state.tried for r in refused)  # not proposed again

    # the one move that fits is c1: the refused ones took no id before or after it
    proposed = [e.payload for e in events if e.kind == "candidate_proposed"]
    assert [(p["trial"], p["n"]) for p in proposed] == [("c1", 1)]
    assert proposed[0]["changes"] == {"tensor_model_parallel_size": [1, 2]}
    assert [t.trial for t in state.candidates] == ["c1"]
    assert not [e for e in events if e.kind == "launch_refused"]
    c1 = state.trials["c1"]
    assert c1.finished is not None  # it ran
    started = [e.payload["trial"] for e in events if e.kind == "trial_started"]
    assert started.count("c1") == 1 and all(t in state.trials for t in started)
    with LocalForge(workdir / "forge", create=False) as forge:
        titles = [p.title for p in forge.pulls()]
    assert not any("-> 8" in t or "-> 16" in t for t in titles)
