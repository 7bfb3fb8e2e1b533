"""The experience bank in a campaign: the view gets the matching accepted lessons (none with
--no-lessons), a real campaign's proposal names the lesson it used in its pull request and the
report, and the end-of-campaign lessons pull request is opened once, even across restarts."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bot.campaign import candidates
from bot.campaign.executor import LocalExecutor
from bot.campaign.loop import Campaign
from bot.campaign.setup import build_campaign
from bot.commands.parser import build_parser
from bot.commands.tune import open_new, run_campaign
from bot.forges.local import LocalForge
from bot.github.commands import Command, CommandError, parse
from bot.interfaces import Proposal
from bot.lessons.bank import CampaignFacts, parse_lessons
from bot.lessons.campaign import open_lessons_pr
from bot.lessons.mining import propose
from bot.report.build import build_report, render_markdown
from bot.state.fold import fold
from gate.ledger import Ledger
from tests.conftest import ROOT, SMALL_CONFIG
from tests.test_forge_contract import World, _github, _local
from tests.test_rules_agent import COMPUTE_BOUND

LEDGER_01 = ROOT / "tests" / "fixtures" / "ledgers" / "attune-0.1.db"
"""A real campaign on examples/ported-gpt.yaml (2 candidates: c1 threads 1 -> 2 closed at
-40.3% within its 73.4% threshold, c2 recompute off merged at +126.7%), stopped at max_trials."""
LEVERS = {
    "activation_checkpointing": True,
    "attention": "math",
    "optimizer_impl": "for_loop",
    "micro_batch_size": 1,
    "threads": 1,
}
SDPA_LESSON = """\
lessons:
  - id: small-sdpa
    status: accepted
    claim: fused SDPA attention beats the explicit math path on small CPU models
    levers: {attention: "=sdpa"}
    effect: faster
    min_gain_pct: 3
    scope: {framework: embedded, versions: "==1", hardware: [cpu],
            model_params: {min: 50K, max: 500K}}
    evidence:
      - {ledger: tests/fixtures/ledgers/attune-0.1.db, campaign: v01run, trial: c2,
         delta_pct: 126.7}
"""


@pytest.fixture
def bank(tmp_path: Path) -> Path:
    (tmp_path / "bank").mkdir()
    (tmp_path / "bank" / "small.yaml").write_text(SDPA_LESSON)
    return tmp_path / "bank"


def open_small(tmp: Path, write_recipe: Any, *, lessons: bool, name: str) -> Path:
    recipe = write_recipe(tmp, "small", **{**SMALL_CONFIG, **LEVERS})
    workdir = tmp / name
    open_new(
        workdir,
        recipe_path=recipe,
        budget_hours=1.0,
        agent="rules",
        steps=4,
        warmup=1,
        max_trials=1,
        calibration_runs=5,
        lessons=lessons,
    )
    return workdir


@contextmanager
def built(workdir: Path, bank: Path) -> Iterator[Campaign]:
    """The campaign in ``workdir`` as ``attune tune`` builds it, with the bank in ``bank``."""
    with Ledger(workdir / "ledger.db") as ledger, LocalForge(workdir / "forge") as forge:
        name = ledger.campaigns()[0]

        def executor(registry: Any, params: Any) -> LocalExecutor:
            return LocalExecutor(
                ledger=ledger,
                campaign=name,
                registry=registry,
                workdir=workdir,
                budget_device_seconds=3600,
                steps=4,
                warmup=1,
            )

        yield build_campaign(ledger, name, forge=forge, executor=executor, lessons_dir=bank)


def lessons_seen(workdir: Path, bank: Path) -> tuple[list[str], bool]:
    """(ids in the campaign's agent view, campaign_opened.lessons), nothing run."""
    with built(workdir, bank) as campaign:
        state = campaign.state()
        assert state.params is not None
        return [x.id for x in campaign.view(state).lessons], state.params.lessons


def test_no_lessons_opens_a_campaign_without_the_bank(
    tmp_path: Path, write_recipe: Any, bank: Path
) -> None:
    assert lessons_seen(open_small(tmp_path, write_recipe, lessons=True, name="on"), bank) == (
        ["small-sdpa"],
        True,
    )
    off = open_small(tmp_path, write_recipe, lessons=False, name="off")
    assert lessons_seen(off, bank) == ([], False)
    assert build_parser().parse_args(["tune", "r.yaml", "--no-lessons"]).no_lessons


def test_the_proposal_names_the_lesson_in_its_pull_request_and_the_report(
    tmp_path: Path, write_recipe: Any, bank: Path
) -> None:
    """The campaign's own steps from view to pull request; the profile the rules agent needs
    first is given in the view instead of measured, so nothing trains here."""
    workdir = open_small(tmp_path, write_recipe, lessons=True, name="uses")
    with built(workdir, bank) as campaign:
        params = campaign.state().params
        assert params is not None
        tuned = campaign.ctx.forge.open_tuned(params.recipe_path, params.recipe_text, "Tune", "-")
        ready = {"tuned_pr": tuned.number, "tuned_branch": tuned.head, "base_sha": tuned.head_sha}
        campaign.ctx.ledger.append(campaign.ctx.name, "forge_ready", ready)
        state = campaign.state()
        view = campaign.view(state).model_copy(update={"profile": COMPUTE_BOUND})
        proposal = campaign.ctx.agent.decide(view, campaign.probe_of(state), state.tried)
        assert isinstance(proposal, Proposal)
        candidates.propose(campaign.ctx, state, proposal)
        candidates.advance(campaign.ctx, "c1")  # opens the candidate pull request
        body = campaign.ctx.forge.get(2).body
        events = campaign.ctx.ledger.events(campaign.ctx.name)
    [proposed] = [e.payload for e in events if e.kind == "candidate_proposed"]
    assert proposed["changes"] == {"attention": ["math", "sdpa"]}  # not threads: the lesson first
    assert proposed["lessons_used"] == ["small-sdpa"]
    assert "lesson small-sdpa (1 trial, +126.7%)" in proposed["mechanism"]
    assert "**Lessons used:** `small-sdpa`" in body
    report = render_markdown(build_report(events))
    assert "- used `small-sdpa`: c1" in report and "(lessons: small-sdpa)" in report


def finished_campaign(tmp: Path) -> Path:
    """The committed 0.1 campaign in a work directory, with a forge holding its tuned PR (the
    forge's own files were never committed with the ledger)."""
    workdir = tmp / "v01run"
    workdir.mkdir()
    shutil.copy(LEDGER_01, workdir / "ledger.db")
    with Ledger(workdir / "ledger.db") as ledger:
        opened = ledger.events("v01run")[0].payload
    with LocalForge(workdir / "forge") as forge:
        forge.open_tuned(opened["recipe_path"], opened["recipe_text"], "Tune", "body")
    return workdir


def lessons_prs(workdir: Path) -> list[Any]:
    with LocalForge(workdir / "forge", create=False) as forge:
        return [p for p in forge.pulls() if "attune:lessons" in p.labels]


def proposed_events(workdir: Path) -> list[dict[str, Any]]:
    with Ledger(workdir / "ledger.db") as ledger:
        return [e.payload for e in ledger.events() if e.kind == "lessons_proposed"]


def test_the_end_of_a_campaign_proposes_its_lessons_once(tmp_path: Path) -> None:
    workdir = finished_campaign(tmp_path)
    report = run_campaign(workdir, live=False)
    [pr] = lessons_prs(workdir)
    assert (pr.base, pr.head, pr.state) == ("main", "attune-lessons/v01run", "open")
    [event] = proposed_events(workdir)
    assert event == {
        "lessons": ["activation_checkpointing-false-faster-v01run-c2"],
        "pr": pr.number,
        "branch": pr.head,
        "path": "registry/lessons/v01run-proposed.yaml",
        "v": 1,
    }
    with LocalForge(workdir / "forge", create=False) as forge:
        text = forge.git.cmd("show", f"{pr.head_sha}:registry/lessons/v01run-proposed.yaml")
        assert "registry/lessons/v01run-proposed.yaml" in forge.diff(pr.number)
    [lesson] = parse_lessons(text, "proposed.yaml")
    assert (lesson.status, lesson.effect, lesson.levers) == (
        "proposed",
        "faster",
        {"activation_checkpointing": "=false"},
    )
    assert [(e.trial, e.delta_pct) for e in lesson.evidence] == [("c2", 126.7)]
    assert lesson.min_gain_pct == 73.4  # the campaign's noise threshold: the claim's size
    assert (
        "activation_checkpointing-false-faster-v01run-c2" in pr.body
        and "status: accepted" in pr.body
    )
    assert f"lessons proposed for review in #{pr.number}" in report.read_text()
    run_campaign(workdir, live=False)  # a restart after the end step
    assert len(lessons_prs(workdir)) == 1 and len(proposed_events(workdir)) == 1


def test_a_bot_killed_before_recording_the_pr_finds_it_again(tmp_path: Path) -> None:
    workdir = finished_campaign(tmp_path)
    with LocalForge(workdir / "forge") as forge:  # what the killed bot had already done
        head = forge.head_sha("main")
        early = forge.open_candidate(
            branch="attune-lessons/v01run",
            base="main",
            base_sha=head,
            recipe_path="registry/lessons/v01run-proposed.yaml",
            recipe_text="lessons: []\n",
            title="attune: lessons",
            body="-",
            labels=["attune", "attune:lessons"],
        )
    run_campaign(workdir, live=False)
    assert [p.number for p in lessons_prs(workdir)] == [early.number]
    assert [e["pr"] for e in proposed_events(workdir)] == [early.number]


def test_the_tune_command_takes_lessons_off() -> None:
    assert parse("/attune tune lessons=off budget=1") == Command(
        verb="tune", budget_hours=1.0, lessons=False
    )
    assert parse("/attune tune") == Command(verb="tune")  # lessons None: the bank is read
    with pytest.raises(CommandError, match="`lessons=maybe` is not `on` or `off`"):
        parse("/attune tune lessons=maybe")


@pytest.fixture(params=["local", "github"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    """A forge with its tuned pull request open (``tests/test_forge_contract.py``)."""
    yield from (_local if request.param == "local" else _github)(tmp_path)


def test_both_forges_open_the_lessons_pull_request_once(world: World, tmp_path: Path) -> None:
    """The end step's forge call on the local forge and on the GitHub forge (PyGithub against
    the fake GitHub): a new file on a branch from the tuned PR's base, reused when repeated."""
    shutil.copy(LEDGER_01, tmp_path / "l.db")
    with Ledger(tmp_path / "l.db") as ledger:
        state = fold("v01run", ledger.events("v01run"))
    facts = CampaignFacts(framework="embedded", version="1", hardware="cpu", model_params=3.2e6)
    lessons = propose(state, facts, "tests/fixtures/ledgers/attune-0.1.db")
    first = open_lessons_pr(world.forge, "v01run", world.tuned.number, lessons, facts)
    again = open_lessons_pr(world.forge, "v01run", world.tuned.number, lessons, facts)
    assert first == again and first["lessons"] == [
        "activation_checkpointing-false-faster-v01run-c2"
    ]
    pr = world.forge.get(first["pr"])
    assert (pr.base, pr.head, pr.state) == (world.tuned.base, "attune-lessons/v01run", "open")
    assert (
        "attune:lessons" in pr.labels
        and "activation_checkpointing-false-faster-v01run-c2" in pr.body
    )
    assert "+++ b/registry/lessons/v01run-proposed.yaml" in world.forge.diff(pr.number)
