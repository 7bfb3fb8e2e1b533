"""One contract, two forges: the local forge (git + SQLite) and the GitHub forge (PyGithub over
HTTP against the fake GitHub) behave the same to the campaign."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from github import Auth, Github

from bot.checks import BASELINE_GATE_CHECK, GATE_CHECK
from bot.forges.github import GitHubForge
from bot.forges.local import LocalForge
from bot.github.client import RepoClient
from bot.interfaces import CheckResult, Forge, ForgeError, HeadMoved, PullRequest
from tests.fakegithub import FakeGitHub
from tests.github_harness import FULL, NO_WAIT, RECIPE_PATH, recipe_text, seed_repo
from tests.test_forge_local import git


@dataclass
class World:
    """A forge with its tuned pull request open, and a way to push behind the forge's back."""

    forge: Forge
    tuned: PullRequest
    push: Callable[[str], str]
    """Push a commit onto a branch as someone else would; returns its sha."""
    text_at: Callable[[str], str]
    """The recipe's text at a commit."""


def _local(tmp_path: Path) -> Iterator[World]:
    with LocalForge(tmp_path / "forge") as forge:
        tuned = forge.open_tuned(RECIPE_PATH, recipe_text(), "Tune it", "body")

        def push(branch: str) -> str:
            head = forge.head_sha(branch)
            moved = git(forge.repo, "commit-tree", f"{head}^{{tree}}", "-p", head, "-m", "push")
            git(forge.repo, "update-ref", f"refs/heads/{branch}", moved)
            return moved

        def text_at(sha: str) -> str:
            return git(forge.repo, "show", f"{sha}:{RECIPE_PATH}") + "\n"

        yield World(forge, tuned, push, text_at)


def _github(_tmp_path: Path) -> Iterator[World]:
    with FakeGitHub() as fake:
        number = seed_repo(fake)
        github = Github(base_url=fake.url, auth=Auth.Token(fake.issue_token()[0]), **NO_WAIT)
        forge = GitHubForge(RepoClient(github, FULL), number)
        tuned = forge.open_tuned(RECIPE_PATH, "", "Tune it", "body")

        def push(branch: str) -> str:
            return fake.commit(branch, {"notes.md": "pushed\n"}, author="someone")

        def text_at(sha: str) -> str:
            return fake.files_at(sha)[RECIPE_PATH]

        yield World(forge, tuned, push, text_at)


@pytest.fixture(params=["local", "github"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    make = _local if request.param == "local" else _github
    yield from make(tmp_path)


def candidate(w: World, n: int = 1, threads: int = 2) -> PullRequest:
    pinned = w.forge.head_sha(w.tuned.head)
    return w.forge.open_candidate(
        branch=f"attune/contract/{n}",
        base=w.tuned.head,
        base_sha=pinned,
        recipe_path=RECIPE_PATH,
        recipe_text=recipe_text(threads=threads),
        title=f"attune: threads: 1 -> {threads}",
        body="hypothesis",
        labels=["attune", "attune:candidate"],
    )


def test_the_tuned_pull_request_is_open_and_found_again(world: World) -> None:
    assert world.tuned.state == "open"
    assert world.tuned.head_sha == world.forge.head_sha(world.tuned.head)
    assert world.forge.get(world.tuned.number) == world.tuned


def test_a_candidate_is_one_commit_on_the_pinned_head_and_opening_it_again_reuses_it(
    world: World,
) -> None:
    pinned = world.forge.head_sha(world.tuned.head)
    pr = candidate(world)
    assert (pr.base, pr.head, pr.state) == (world.tuned.head, "attune/contract/1", "open")
    assert world.text_at(pr.head_sha) == recipe_text(threads=2)
    assert world.text_at(pinned) != recipe_text(threads=2)
    assert candidate(world) == pr
    numbers = [p.number for p in world.forge.pulls()]
    assert numbers == sorted(numbers) and {world.tuned.number, pr.number} <= set(numbers)


def test_a_candidate_is_refused_when_the_tuned_head_moved(world: World) -> None:
    pinned = world.forge.head_sha(world.tuned.head)
    world.push(world.tuned.head)
    with pytest.raises(HeadMoved):
        world.forge.open_candidate(
            branch="attune/contract/9",
            base=world.tuned.head,
            base_sha=pinned,
            recipe_path=RECIPE_PATH,
            recipe_text=recipe_text(threads=4),
            title="t",
            body="b",
            labels=[],
        )
    assert all(p.head != "attune/contract/9" for p in world.forge.pulls())


def test_merge_lands_the_benchmarked_commit_once(world: World) -> None:
    pinned = world.forge.head_sha(world.tuned.head)
    pr = candidate(world)
    merged = world.forge.merge(pr.number, expected_base_sha=pinned, expected_head_sha=pr.head_sha)
    assert world.forge.head_sha(world.tuned.head) == merged != pinned
    assert world.text_at(merged) == recipe_text(threads=2)
    assert world.forge.get(pr.number).state == "merged"
    again = world.forge.merge(pr.number, expected_base_sha=pinned, expected_head_sha=pr.head_sha)
    assert again == merged


def test_merge_refuses_a_head_that_moved_after_the_benchmark(world: World) -> None:
    pinned = world.forge.head_sha(world.tuned.head)
    pr = candidate(world)
    world.push(pr.head)
    with pytest.raises(HeadMoved):
        world.forge.merge(pr.number, expected_base_sha=pinned, expected_head_sha=pr.head_sha)
    assert world.forge.get(pr.number).state == "open"
    assert world.forge.head_sha(world.tuned.head) == pinned


def test_close_is_idempotent_and_a_closed_candidate_cannot_be_merged(world: World) -> None:
    pinned = world.forge.head_sha(world.tuned.head)
    pr = candidate(world)
    world.forge.close(pr.number)
    world.forge.close(pr.number)
    assert world.forge.get(pr.number).state == "closed"
    with pytest.raises(ForgeError):
        world.forge.merge(pr.number, expected_base_sha=pinned, expected_head_sha=pr.head_sha)


def test_a_check_is_added_then_replaced(world: World) -> None:
    pr = candidate(world)
    name = BASELINE_GATE_CHECK
    world.forge.set_check(pr.number, CheckResult(name=name, conclusion="failure", summary="a"))
    world.forge.set_check(pr.number, CheckResult(name=name, conclusion="success", summary="b"))
    checks = [c for c in world.forge.get(pr.number).checks if c.name == name]
    assert [(c.conclusion, c.summary) for c in checks] == [("success", "b")]


def test_a_check_keeps_the_name_it_was_given(world: World) -> None:
    """The caller names the check (``bot.checks``): no forge renames one, the gate's included."""
    pr = candidate(world)
    for name in (GATE_CHECK, BASELINE_GATE_CHECK):
        world.forge.set_check(pr.number, CheckResult(name=name, conclusion="success", summary=""))
    names = [c.name for c in world.forge.get(pr.number).checks]
    assert sorted(names) == sorted([GATE_CHECK, BASELINE_GATE_CHECK])


def test_a_marked_comment_is_edited_in_place(world: World) -> None:
    pr = candidate(world)
    world.forge.comment(pr.number, "spent 0.01", marker="attune:cost")
    world.forge.comment(pr.number, "plain words")
    world.forge.comment(pr.number, "spent 0.02", marker="<!-- attune:cost -->")
    comments = world.forge.comments(pr.number)
    assert [(c.marker, c.body) for c in comments] == [
        ("attune:cost", "spent 0.02"),
        (None, "plain words"),
    ]
    assert "threads" in world.forge.diff(pr.number)
