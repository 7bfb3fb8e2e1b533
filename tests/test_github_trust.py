"""What the bot believes from GitHub, checked against the fake over real HTTP: which check run
is the gate, which bench run is the one it dispatched, what a result artifact may claim, and
which commit a merge lands."""

from __future__ import annotations

import io
import json
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from github import Auth, Github

from bot.forges.github import GitHubForge
from bot.github.client import RepoClient
from bot.github.executor import DISPATCH_FILE, ActionsExecutor, run_title
from bot.github.permissions import PermissionLost, require_write
from bot.interfaces import HeadMoved
from gate.ledger import Ledger
from gate.models import StepRecord, TrialResult
from gate.registry import load_registry
from runners.bench import Launch
from runners.local import RunHandle
from tests.events_factory import payload
from tests.fakegithub import FakeGitHub
from tests.github_harness import FULL, NO_WAIT, RECIPE_PATH, recipe_text, seed_repo

CAMPAIGN = "octo-org-models-pr1-1"


@dataclass
class World:
    fake: FakeGitHub
    repo: RepoClient
    github: Github
    executor: ActionsExecutor
    ledger: Ledger
    tuned: int


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with FakeGitHub() as fake:
        tuned = seed_repo(fake)
        github = Github(base_url=fake.url, auth=Auth.Token(fake.issue_token()[0]), **NO_WAIT)
        repo = RepoClient(github, FULL)
        with Ledger(tmp_path / "ledger.db") as ledger:
            executor = ActionsExecutor(
                repo=repo,
                wake=threading.Event(),
                poll_s=0.05,
                gate_timeout_s=0.0,
                bot_login=fake.bot_login,
                ledger=ledger,
                campaign=CAMPAIGN,
                registry=load_registry("embedded", "1"),
                workdir=tmp_path / "work",
                budget_device_seconds=3600.0,
                steps=4,
                warmup=1,
            )
            yield World(fake, repo, github, executor, ledger, tuned)


def open_candidate(w: World) -> tuple[int, str, str]:
    """A candidate PR as the campaign opens it; returns (number, its head, the pinned head)."""
    pinned = w.fake.head("tune-ported")
    opened = payload("campaign_opened", recipe_path=RECIPE_PATH, head_sha=pinned)
    w.ledger.append(CAMPAIGN, "campaign_opened", opened)
    w.ledger.append(
        CAMPAIGN,
        "forge_ready",
        {"tuned_pr": w.tuned, "tuned_branch": "tune-ported", "base_sha": pinned},
    )
    forge = GitHubForge(w.repo, w.tuned)
    pr = forge.open_candidate(
        branch=f"attune/{CAMPAIGN}/1",
        base="tune-ported",
        base_sha=pinned,
        recipe_path=RECIPE_PATH,
        recipe_text=recipe_text(threads=2),
        title="attune: threads: 1 -> 2",
        body="hypothesis",
        labels=[],
    )
    w.ledger.append(
        CAMPAIGN,
        "pr_opened",
        {"trial": "c1", "pr": pr.number, "branch": pr.head, "head_sha": pr.head_sha},
    )
    return pr.number, pr.head_sha, pinned


# --- the gate check -------------------------------------------------------------------------


def test_only_the_gate_workflows_own_check_run_counts(world: World) -> None:
    _n, head, _pinned = open_candidate(world)
    fake = world.fake
    # a check run of the same name posted through the REST API (the App, any token)
    world.github.get_repo(FULL).create_check_run(
        "attune/gate",
        head,
        status="completed",
        conclusion="success",
        output={"title": "t", "summary": "forged"},
    )
    assert world.executor._workflow_gate(head)[0] == "missing"
    # posted by GitHub Actions, but by a job of another workflow
    bench = fake.create_run("attune-bench.yml", f"attune/{CAMPAIGN}/1", event="pull_request")
    fake.job_check_run(bench.id, "attune/gate", "success", "not the gate")
    assert world.executor._workflow_gate(head)[0] == "missing"
    # the gate workflow's own job
    gate = fake.create_run("attune-gate.yml", f"attune/{CAMPAIGN}/1", event="pull_request")
    fake.job_check_run(gate.id, "attune/gate", "failure", "rejected: semantic change")
    assert world.executor._workflow_gate(head) == ("failure", "rejected: semantic change")


# --- the pinned commits -----------------------------------------------------------------------


def test_a_launch_needs_the_pinned_tuned_head_and_a_candidate_on_it(world: World) -> None:
    _n, head, _pinned = open_candidate(world)
    assert world.executor.pinned_commit("c1") == head
    world.fake.commit("tune-ported", {"notes.md": "pushed\n"}, author="maintainer")
    with pytest.raises(HeadMoved, match="the head of tune-ported moved"):
        world.executor.pinned_commit("c1")


def test_a_candidate_rebuilt_off_the_pinned_commit_is_refused(world: World) -> None:
    number, _head, _pinned = open_candidate(world)
    branch = f"attune/{CAMPAIGN}/1"
    # someone force-pushes the candidate branch to a commit with another parent, and the
    # ledger is made to agree (a forged pr_opened): the parent check still catches it
    other = world.fake.commit("main", {RECIPE_PATH: recipe_text(threads=3)}, author="mallory")
    world.fake.move_branch(world.fake.repo(), branch, other)
    world.ledger.append(
        CAMPAIGN, "pr_opened", {"trial": "c2", "pr": number, "branch": branch, "head_sha": other}
    )
    with pytest.raises(HeadMoved, match="is not one commit on the pinned tune-ported"):
        world.executor.pinned_commit("c2")


# --- the bench run and its artifact ---------------------------------------------------------


def dispatch(w: World, trial: str, head: str) -> Launch:
    trial_dir = w.executor.trial_dir(trial)
    trial_dir.mkdir(parents=True, exist_ok=True)
    main_sha = w.fake.head("main")
    (trial_dir / DISPATCH_FILE).write_text(
        json.dumps({"ref": "main", "ref_sha": main_sha, "actor": w.fake.bot_login, "sha": head})
    )
    return Launch(
        recipe="ported-gpt@" + trial,
        framework="embedded",
        fingerprint="f" * 16,
        steps=4,
        warmup=1,
        devices=1,
        profile_trace=None,
        handle=RunHandle(backend="github-actions", pid=0, workdir=str(trial_dir), allocated_at=0),
    )


def test_only_the_dispatched_run_is_adopted(world: World) -> None:
    _n, head, _pinned = open_candidate(world)
    dispatch(world, "c1", head)
    fake = world.fake
    inputs = {"campaign": CAMPAIGN, "trial": "c1", "sha": head, "recipe": RECIPE_PATH}
    # same title, but started by someone else, or on another branch
    fake.create_run("attune-bench.yml", "main", "workflow_dispatch", inputs, actor="mallory")
    fake.create_run("attune-bench.yml", "tune-ported", "workflow_dispatch", inputs)
    assert world.executor._find_run("c1", since=0) is None
    ours = fake.create_run("attune-bench.yml", "main", "workflow_dispatch", inputs)
    found = world.executor._find_run("c1", since=0)
    assert found is not None and found.id == ours.id
    assert found.display_title == run_title(CAMPAIGN, "c1")


def zipped(result: TrialResult) -> dict[str, bytes]:
    return {"result.json": result.model_dump_json().encode()}


def steps(n: int, seconds: float = 0.5) -> list[StepRecord]:
    return [
        StepRecord(
            step=i,
            loss=5.0 - 0.1 * i,
            grad_norm=1.0,
            tokens=1000,
            step_seconds=seconds,
            peak_memory_bytes=1,
        )
        for i in range(1, n + 1)
    ]


def honest(head: str, **over: object) -> TrialResult:
    fields: dict[str, object] = dict(
        recipe="ported-gpt@c1",
        fingerprint="f" * 16,
        status="ok",
        steps=steps(4),
        warmup=1,
        score=2000.0,
        step1_loss=4.9,
        allocated_at=0.0,
        released_at=1.0,
        devices=1,
        trial="c1",
        sha=head,
    )
    fields.update(over)
    return TrialResult.model_validate(fields)


@pytest.mark.parametrize(
    ("over", "problem"),
    [
        ({"trial": "c9"}, "the result is for trial c9"),
        ({"sha": "0" * 40}, "at 0000000"),
        ({"warmup": 0}, "scores after 0 warm-up steps, not 1"),
        ({"steps": steps(3)}, "it ran 3 steps, not the 4 dispatched"),
        ({"steps": list(reversed(steps(4)))}, "not steps 1, 2, 3"),
        ({"fingerprint": "0" * 16}, "benchmarked config"),
    ],
)
def test_an_artifact_that_does_not_match_the_dispatch_is_a_failed_trial(
    world: World, over: dict[str, object], problem: str
) -> None:
    _n, head, _pinned = open_candidate(world)
    launch = dispatch(world, "c1", head)
    run = world.fake.create_run("attune-bench.yml", "main", "workflow_dispatch", {})
    world.fake.complete_run(run.id, "success", {"attune-result-c1": zipped(honest(head, **over))})
    gh_run = world.repo.workflow_run(run.id)
    result = world.executor._result("c1", gh_run, launch, 0.0, 10.0)
    assert result.status == "failed" and problem in str(result.error)
    assert result.device_seconds > 0  # charged all the same


def test_the_score_is_recomputed_from_the_step_records(world: World) -> None:
    _n, head, _pinned = open_candidate(world)
    launch = dispatch(world, "c1", head)
    run = world.fake.create_run("attune-bench.yml", "main", "workflow_dispatch", {})
    inflated = honest(head, score=10**9, step1_loss=4.0, has_nonfinite=False)
    world.fake.complete_run(run.id, "success", {"attune-result-c1": zipped(inflated)})
    result = world.executor._result("c1", world.repo.workflow_run(run.id), launch, 0.0, 10.0)
    assert result.status == "ok"
    assert result.score == pytest.approx(3 * 1000 / 1.5)  # steps 2-4, 0.5 s each
    assert result.step1_loss == pytest.approx(4.9)


def corrupt_deflate(result: TrialResult) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("result.json", result.model_dump_json().encode() * 50)
    data = bytearray(buffer.getvalue())
    data[60:90] = b"\xff" * 30  # inside the compressed stream: zlib fails while reading
    return bytes(data)


def test_any_failure_reading_an_artifact_is_a_recorded_failed_trial(world: World) -> None:
    _n, head, _pinned = open_candidate(world)
    launch = dispatch(world, "c1", head)
    run = world.fake.create_run("attune-bench.yml", "main", "workflow_dispatch", {})
    world.fake.complete_run(run.id, "success", {"attune-result-c1": corrupt_deflate(honest(head))})
    result = world.executor._result("c1", world.repo.workflow_run(run.id), launch, 0.0, 10.0)
    assert result.status == "failed" and f"run {run.id}:" in str(result.error)


# --- the merge -------------------------------------------------------------------------------


def test_the_merge_lands_only_the_benchmarked_commit(world: World) -> None:
    number, head, pinned = open_candidate(world)
    world.fake.commit(
        f"attune/{CAMPAIGN}/1", {RECIPE_PATH: recipe_text(threads=64)}, author="mallory"
    )
    forge = GitHubForge(world.repo, world.tuned)
    with pytest.raises(HeadMoved, match="Head branch was modified"):
        forge.merge(number, expected_base_sha=pinned, expected_head_sha=head)
    assert world.fake.pull(number).state == "open"
    assert world.fake.head("tune-ported") == pinned  # nothing merged


def test_a_merge_is_refused_once_the_user_lost_write_permission(world: World) -> None:
    number, head, pinned = open_candidate(world)

    def authorize(action: str) -> None:
        require_write(world.repo, "maintainer", action)

    forge = GitHubForge(world.repo, world.tuned, authorize=authorize)
    world.fake.set_permission("maintainer", "read")
    with pytest.raises(PermissionLost, match=r"no longer has write permission .* not merge"):
        forge.merge(number, expected_base_sha=pinned, expected_head_sha=head)
    assert world.fake.pull(number).state == "open"
    world.fake.set_permission("maintainer", "write")
    forge.merge(number, expected_base_sha=pinned, expected_head_sha=head)
    assert world.fake.pull(number).merged


@pytest.mark.parametrize("artifact", ["honest", "corrupt"])
def test_the_charge_is_at_least_the_bench_jobs_duration(world: World, artifact: str) -> None:
    """The artifact says the benchmark held the machine for 1 s; GitHub's jobs API says the
    bench job ran for 30 minutes: the ledger is charged the 30 minutes, whatever the artifact
    holds (an honest one, or one that cannot be read)."""
    _n, head, _pinned = open_candidate(world)
    launch = dispatch(world, "c1", head)
    run = world.fake.create_run("attune-bench.yml", "main", "workflow_dispatch", {})
    world.fake.start_run(run.id)
    content = zipped(honest(head)) if artifact == "honest" else corrupt_deflate(honest(head))
    world.fake.complete_run(run.id, "success", {"attune-result-c1": content})
    (job,) = world.fake.jobs(run.id)
    job.started_at = job.completed_at - timedelta(minutes=30)
    gh_run = world.repo.workflow_run(run.id)
    started = gh_run.started_at.timestamp() if gh_run.started_at else 0.0
    result = world.executor._result("c1", gh_run, launch, started, started + 1.0)
    assert result.status == ("ok" if artifact == "honest" else "failed")
    assert result.device_seconds >= 30 * 60
    assert world.repo.job_seconds(run.id) == pytest.approx(30 * 60)
    assert world.fake.violations == []
