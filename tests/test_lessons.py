"""The experience bank's lessons: the model and loader (malformed lessons name file and field),
the facts a campaign is matched on, and scope matching."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.lessons.audit import check_claim
from bot.lessons.bank import (
    BANK_DIR,
    CampaignFacts,
    Lesson,
    campaign_facts,
    load_bank,
    matching,
    parse_lessons,
    scope_mismatch,
)
from bot.lessons.mining import lesson_file, lesson_id, propose
from bot.state.model import CampaignState, TrialRecord
from gate.errors import AttuneError
from gate.models import EffectiveConfig
from tests.events_factory import payload


def lesson(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "embedded-threads-up",
        "status": "accepted",
        "claim": "more intra-op threads make the embedded workload faster on a CPU",
        "levers": {"threads": "up"},
        "effect": "faster",
        "min_gain_pct": 3.0,
        "bottleneck": "compute",
        "scope": {
            "framework": "embedded",
            "versions": "==1",
            "hardware": ["cpu"],
            "model_params": {"min": "1M", "max": "10M"},
        },
        "evidence": [
            {"ledger": "l.db", "campaign": "c", "trial": "c1", "delta_pct": 30.0},
        ],
    }
    body.update(over)
    return body


def text(*lessons: dict[str, Any]) -> str:
    return yaml.safe_dump({"lessons": list(lessons)}, sort_keys=False)


def facts(**over: Any) -> CampaignFacts:
    base: dict[str, Any] = {
        "framework": "embedded",
        "version": "1",
        "hardware": "cpu",
        "model_params": 3.2e6,
    }
    return CampaignFacts(**{**base, **over})


def test_a_lesson_file_loads_with_sizes_in_words() -> None:
    [parsed] = parse_lessons(text(lesson()), "bank/a.yaml")
    assert parsed.scope.model_params is not None
    assert (parsed.scope.model_params.min, parsed.scope.model_params.max) == (1e6, 1e7)
    view = parsed.view()
    assert (view.id, view.levers, view.gain_pct, view.trials) == (
        "embedded-threads-up",
        {"threads": "up"},
        30.0,
        1,
    )


@pytest.mark.parametrize(
    ("body", "where", "message"),
    [
        ("lessons: [", "bank/a.yaml: malformed lesson YAML", "expected"),
        ("- id: x", "bank/a.yaml: a lesson file is a mapping", "'lessons:' list"),
        (text(lesson(status="maybe")), "bank/a.yaml: lessons[0].status:", "'accepted'"),
        (text(lesson(), lesson(levers={"threads": "sideways"})), "lessons[1].levers", "sideways"),
        (
            text(lesson(scope={**lesson()["scope"], "versions": "one"})),
            "lessons[0].scope.versions",
            "not a version specifier",
        ),
        (
            text(lesson(scope={**lesson()["scope"], "model_params": {"min": "big"}})),
            "lessons[0].scope.model_params.min",
            "not a parameter count",
        ),
        (text(lesson(evidence=[])), "lessons[0].evidence", "at least 1"),
        (text(lesson(surprise=1)), "lessons[0].surprise", "Extra inputs"),
        (text(lesson(id="Has Spaces")), "lessons[0].id", "pattern"),
    ],
)
def test_a_malformed_lesson_names_its_file_and_field(body: str, where: str, message: str) -> None:
    with pytest.raises(AttuneError) as err:
        parse_lessons(body, "bank/a.yaml")
    assert where in str(err.value) and message in str(err.value)


def test_lesson_ids_are_unique_across_the_bank(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(text(lesson()))
    (tmp_path / "b.yaml").write_text(text(lesson()))
    with pytest.raises(AttuneError, match=r"b.yaml: lesson id 'embedded-threads-up' is also in"):
        load_bank(tmp_path)
    assert load_bank(tmp_path / "missing") == []


def test_the_bank_in_the_repository_loads() -> None:
    bank = load_bank(BANK_DIR)
    assert bank and all(isinstance(x, Lesson) for _, x in bank)
    assert any(x.status == "accepted" for _, x in bank)


@pytest.mark.parametrize(
    ("over", "why"),
    [
        ({}, None),
        ({"framework": "megatron"}, "framework megatron, not embedded"),
        ({"version": "2"}, "embedded 2 is outside ==1"),
        ({"hardware": "sm90"}, "hardware sm90, not cpu"),
        ({"hardware": None}, "hardware unknown, not cpu"),
        ({"model_params": 1.2e5}, "outside the lesson's sizes"),
        ({"model_params": None}, "size is unknown"),
    ],
)
def test_scope_matching(over: dict[str, Any], why: str | None) -> None:
    [parsed] = parse_lessons(text(lesson()), "a.yaml")
    found = scope_mismatch(parsed.scope, facts(**over))
    assert found == why if why is None else why in str(found)


def test_only_accepted_lessons_in_scope_reach_the_agent() -> None:
    wide = {"framework": "embedded", "versions": ">=1", "hardware": ["any"]}
    parsed = parse_lessons(
        text(
            lesson(),
            lesson(id="proposed-one", status="proposed"),
            lesson(id="retired-one", status="retired"),
            lesson(id="any-size", scope=wide),
            lesson(id="gpu-only", scope={**wide, "hardware": ["sm90"]}),
        ),
        "a.yaml",
    )
    assert [v.id for v in matching(parsed, facts())] == ["embedded-threads-up", "any-size"]
    assert [v.id for v in matching(parsed, facts(model_params=1e5))] == ["any-size"]


def effective(framework: str, values: dict[str, Any]) -> EffectiveConfig:
    return EffectiveConfig(
        framework=framework, framework_version="0.19.2", values=values, devices=8
    )


def test_campaign_facts_per_framework() -> None:
    gpt = effective("megatron", {"num_layers": 32, "hidden_size": 4096, "ffn_hidden_size": 14336})
    found = campaign_facts(
        gpt.model_copy(update={"values": {**gpt.values, "padded_vocab_size": 128256}}),
        {"gpu_arch": "sm90"},
    )
    assert found.hardware == "sm90" and found.version == "0.19.2"
    assert found.model_params is not None and 6e9 < found.model_params < 9e9  # a Llama-3-8B shape
    titan = campaign_facts(effective("torchtitan", {"model_spec.flavor": "8B"}), {})
    assert (titan.hardware, titan.model_params) == (None, 8e9)
    small = effective("embedded", {"n_layer": 4, "d_model": 256, "vocab_size": 256})
    assert campaign_facts(small, {}).hardware == "cpu"
    assert campaign_facts(small, {}).model_params == 4 * (4 * 256**2 + 2 * 256 * 1024) + 256**2
    assert campaign_facts(effective("torchtitan", {}), {}).model_params is None


def test_mined_lessons_claim_only_what_their_trial_measured() -> None:
    def trial(name: str, changes: dict[str, Any], status: str, **judged: Any) -> TrialRecord:
        proposal = payload("candidate_proposed", trial=name, changes=changes)
        finished = payload("trial_finished", trial=name, status=status)
        verdict = payload("trial_judged", trial=name, **{"reason": "", **judged})
        return TrialRecord(
            trial=name, role="candidate", proposal=proposal, finished=finished, judged=verdict
        )

    ab = "re-measured A/B: +18% beats 9%"  # a merge decided by re-measurement
    records = [
        trial("c1", {"compile": [False, True]}, "ok", decision="merge", gain=0.2, threshold=0.5,
              reason=ab),
        trial("c2", {"attention": ["sdpa", "math"]}, "ok", decision="close", gain=-0.6,
              threshold=0.5),
        trial("c3", {"micro_batch_size": [8, 16]}, "oom", decision="close", threshold=0.5),
        trial("c4", {"threads": [1, 2]}, "ok", decision="close", gain=0.01, threshold=0.5),
    ]  # fmt: skip
    state = CampaignState(campaign="Run 7", trials={r.trial: r for r in records})
    lessons = propose(state, facts(), "l.db")
    assert [(x.id, x.effect, x.min_gain_pct, x.levers) for x in lessons] == [
        ("compile-true-faster-run-7-c1", "faster", 20.0, {"compile": "=true"}),
        ("attention-math-slower-run-7-c2", "slower", 50.0, {"attention": "=math"}),
        ("micro_batch_size-up-fails-run-7-c3", "fails", 0.0, {"micro_batch_size": "up"}),
    ]  # c4 is within the noise: nothing learnt
    assert all(x.status == "proposed" for x in lessons)
    assert ab in lessons[0].claim
    for x in lessons:  # each is consistent with its own evidence
        assert check_claim(x, [e.delta_pct for e in x.evidence if e.delta_pct is not None]) == []
    assert parse_lessons(lesson_file(lessons), "proposed.yaml") == lessons


def test_a_lesson_id_says_what_was_learnt_and_names_its_campaign_once() -> None:
    assert lesson_id("c2", "c2", "threads-up-faster") == "threads-up-faster-c2"
    assert lesson_id("Run 7", "c1", "compile-true-faster") == "compile-true-faster-run-7-c1"
    assert lesson_id("v01run", "proposed") == "v01run-proposed"  # the proposal file's name
