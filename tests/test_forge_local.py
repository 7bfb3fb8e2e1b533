"""The local forge on real git repositories: PRs, squash merges, comments, checks, `attune pr`."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import main
from bot.forges.local import LocalForge
from bot.interfaces import CheckResult, ForgeError, HeadMoved, PullRequest

RECIPE = "recipes/ported-gpt.yaml"
BASELINE = "framework: embedded\nname: ported-gpt\nconfig:\n  threads: 1\n  micro_batch_size: 1\n"


def recipe(threads: int = 1, micro: int = 1) -> str:
    return BASELINE.replace("threads: 1", f"threads: {threads}").replace(
        "micro_batch_size: 1", f"micro_batch_size: {micro}"
    )


def git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t")
    env.update(GIT_COMMITTER_EMAIL="t@t")
    cmd = ["git", "-C", str(repo), *args]
    return subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def forge(tmp_path: Path) -> Iterator[LocalForge]:
    with LocalForge(tmp_path / "forge") as f:
        yield f


def tuned(forge: LocalForge) -> PullRequest:
    return forge.open_tuned(RECIPE, recipe(), "Tune ported-gpt", "Please tune this recipe.")


def candidate(forge: LocalForge, n: int, *, threads: int = 2, micro: int = 1) -> PullRequest:
    return forge.open_candidate(
        branch=f"attune/c1/{n}",
        base="tune/ported-gpt",
        base_sha=forge.head_sha("tune/ported-gpt"),
        recipe_path=RECIPE,
        recipe_text=recipe(threads, micro),
        title=f"attune: threads: 1 -> {threads}",
        body="Hypothesis: more intra-op threads.",
        labels=["attune", "candidate"],
    )


def test_tuned_pr_is_created_once(forge: LocalForge) -> None:
    first = tuned(forge)
    assert (first.number, first.base, first.head, first.state) == (
        1,
        "main",
        "tune/ported-gpt",
        "open",
    )
    assert first.labels == ["attune"]
    again = forge.open_tuned(RECIPE, recipe(threads=8), "other title", "other body")
    assert again == first
    assert [pr.number for pr in forge.pulls()] == [1]
    assert git(forge.repo, "log", "--format=%s", "main") == f"Add {RECIPE}"
    assert forge.head_sha("main") == forge.head_sha("tune/ported-gpt") == first.head_sha
    # the checked-out branch's files are there for a person reading the repository
    assert (forge.repo / RECIPE).read_text() == recipe()
    assert git(forge.repo, "status", "--porcelain") == ""


def test_candidate_is_one_commit_touching_only_the_recipe(forge: LocalForge) -> None:
    base_sha = tuned(forge).head_sha
    pr = candidate(forge, 1)
    assert (pr.number, pr.base, pr.head, pr.state) == (2, "tune/ported-gpt", "attune/c1/1", "open")
    assert pr.labels == ["attune", "candidate"]
    assert git(forge.repo, "rev-list", f"{base_sha}..{pr.head_sha}").split() == [pr.head_sha]
    assert git(forge.repo, "rev-parse", f"{pr.head_sha}^") == base_sha
    assert git(forge.repo, "log", "-1", "--format=%s", pr.head_sha) == pr.title
    changed = git(forge.repo, "diff", "--name-only", base_sha, pr.head_sha)
    assert changed == RECIPE
    diff = forge.diff(pr.number)
    assert "-  threads: 1\n" in diff
    assert "+  threads: 2\n" in diff


def test_open_candidate_is_idempotent_and_repairs_a_crashed_branch(forge: LocalForge) -> None:
    tuned(forge)
    first = candidate(forge, 1)
    assert candidate(forge, 1, threads=4) == first
    assert len(forge.pulls()) == 2
    # crash after the branch, before the record: same tree is reused, another one is rebuilt
    base = forge.head_sha("tune/ported-gpt")
    stray = git(forge.repo, "commit-tree", f"{base}^{{tree}}", "-p", base, "-m", "stray")
    git(forge.repo, "update-ref", "refs/heads/attune/c1/2", stray)
    rebuilt = candidate(forge, 2, threads=4)
    assert rebuilt.head_sha != stray
    assert git(forge.repo, "rev-parse", f"{rebuilt.head_sha}^") == base
    assert git(forge.repo, "show", f"{rebuilt.head_sha}:{RECIPE}") == recipe(4).strip()
    kept = forge.open_candidate(
        branch="attune/c1/3",
        base="tune/ported-gpt",
        base_sha=forge.head_sha("tune/ported-gpt"),
        recipe_path=RECIPE,
        recipe_text=recipe(8),
        title="t",
        body="b",
        labels=[],
    )
    forge._db.execute("DELETE FROM prs WHERE number = ?", (kept.number,))
    forge._db.commit()
    again = forge.open_candidate(
        branch="attune/c1/3",
        base="tune/ported-gpt",
        base_sha=forge.head_sha("tune/ported-gpt"),
        recipe_path=RECIPE,
        recipe_text=recipe(8),
        title="t",
        body="b",
        labels=[],
    )
    assert again.head_sha == kept.head_sha


def test_merge_squashes_onto_the_base(forge: LocalForge) -> None:
    base_sha = tuned(forge).head_sha
    pr = candidate(forge, 1)
    new_base = forge.merge(pr.number, expected_base_sha=base_sha, expected_head_sha=pr.head_sha)
    assert forge.head_sha("tune/ported-gpt") == new_base
    assert git(forge.repo, "rev-list", f"{base_sha}..{new_base}").split() == [new_base]
    assert git(forge.repo, "rev-parse", f"{new_base}^{{tree}}") == git(
        forge.repo, "rev-parse", f"{pr.head_sha}^{{tree}}"
    )
    assert git(forge.repo, "log", "-1", "--format=%s", new_base) == f"{pr.title} (#{pr.number})"
    merged = forge.get(pr.number)
    assert (merged.state, merged.merged_sha) == ("merged", new_base)
    assert "+  threads: 2\n" in forge.diff(pr.number)
    # the tuned PR now shows the candidate's change against main; main is untouched
    assert "+  threads: 2\n" in forge.diff(1)
    assert git(forge.repo, "rev-list", "--count", "main") == "1"


def test_merge_refuses_when_the_base_moved(forge: LocalForge) -> None:
    base_sha = tuned(forge).head_sha
    first, stale = candidate(forge, 1), candidate(forge, 2, threads=1, micro=2)
    new_base = forge.merge(
        first.number, expected_base_sha=base_sha, expected_head_sha=first.head_sha
    )
    with pytest.raises(ForgeError, match=f"base moved: expected {base_sha}, found {new_base}"):
        forge.merge(stale.number, expected_base_sha=base_sha, expected_head_sha=stale.head_sha)
    # even with the right base head, squashing a stale branch would revert the first merge
    with pytest.raises(ForgeError, match="not based on the head of tune/ported-gpt"):
        forge.merge(stale.number, expected_base_sha=new_base, expected_head_sha=stale.head_sha)
    assert forge.head_sha("tune/ported-gpt") == new_base
    assert forge.get(stale.number).state == "open"


def test_merge_and_close_are_idempotent(forge: LocalForge) -> None:
    base_sha = tuned(forge).head_sha
    win, lose = candidate(forge, 1), candidate(forge, 2, threads=4)
    merged_sha = forge.merge(win.number, expected_base_sha=base_sha, expected_head_sha=win.head_sha)
    assert (
        forge.merge(win.number, expected_base_sha=base_sha, expected_head_sha=win.head_sha)
        == merged_sha
    )
    assert (
        forge.merge(win.number, expected_base_sha="f" * 40, expected_head_sha=win.head_sha)
        == merged_sha
    )
    assert git(forge.repo, "rev-list", "--count", "tune/ported-gpt") == "2"
    forge.close(lose.number)
    forge.close(lose.number)
    assert forge.get(lose.number).state == "closed"
    with pytest.raises(ForgeError, match="is merged; it cannot be closed"):
        forge.close(win.number)
    with pytest.raises(ForgeError, match="is closed; it cannot be merged"):
        forge.merge(lose.number, expected_base_sha=merged_sha, expected_head_sha=lose.head_sha)


def test_merge_recorded_after_a_crash_between_ref_and_record(forge: LocalForge) -> None:
    base_sha = tuned(forge).head_sha
    pr = candidate(forge, 1)
    merged_sha = forge.merge(pr.number, expected_base_sha=base_sha, expected_head_sha=pr.head_sha)
    forge._db.execute("UPDATE prs SET state = 'open', merged_sha = NULL")
    forge._db.commit()
    assert (
        forge.merge(pr.number, expected_base_sha=base_sha, expected_head_sha=pr.head_sha)
        == merged_sha
    )
    assert forge.get(pr.number).state == "merged"


def test_marker_comment_is_edited_in_place(forge: LocalForge) -> None:
    number = tuned(forge).number
    forge.comment(number, "Starting.")
    for spent in (0.1, 0.2, 0.3):
        forge.comment(number, f"GPU-hours: {spent}", marker="attune:cost")
    forge.comment(number, "Done.")
    comments = forge.comments(number)
    assert [c.id for c in comments] == sorted(c.id for c in comments)
    cost = [c for c in comments if c.marker == "attune:cost"]
    assert len(cost) == 1
    assert cost[0].body == "GPU-hours: 0.3"
    assert [c.body for c in comments] == ["Starting.", cost[0].body, "Done."]
    # a marker given in its hidden form, and a body that already carries it, are not doubled
    again = forge.comment(
        number, "<!-- attune:cost -->\nGPU-hours: 0.4", marker="<!-- attune:cost -->"
    )
    assert (again.id, again.marker, again.body) == (cost[0].id, "attune:cost", "GPU-hours: 0.4")
    (stored,) = forge._db.execute("SELECT body FROM comments WHERE id = ?", (again.id,))
    assert stored[0].count("<!--") == 1  # the marker is not doubled


def test_checks_are_upserted_by_name(forge: LocalForge) -> None:
    number = tuned(forge).number
    forge.set_check(number, CheckResult(name="attune/gate", conclusion="failure", summary="no"))
    forge.set_check(number, CheckResult(name="attune/bench", conclusion="neutral", summary="..."))
    forge.set_check(number, CheckResult(name="attune/gate", conclusion="success", summary="ok"))
    checks = forge.get(number).checks
    assert [(c.name, c.conclusion, c.summary) for c in checks] == [
        ("attune/gate", "success", "ok"),
        ("attune/bench", "neutral", "..."),
    ]
    assert forge.pulls()[0].checks == checks


def test_errors_name_the_problem(forge: LocalForge, tmp_path: Path) -> None:
    with pytest.raises(ForgeError, match="no pull request #9"):
        forge.get(9)
    with pytest.raises(ForgeError, match="no branch 'nope'"):
        forge.head_sha("nope")
    tuned(forge)
    with pytest.raises(ForgeError, match=r"'bad\.\.name' is not a valid branch name"):
        candidate_on(forge, "bad..name")
    with pytest.raises(ForgeError, match="no local forge here"):
        LocalForge(tmp_path / "elsewhere", create=False)


def candidate_on(forge: LocalForge, branch: str) -> PullRequest:
    return forge.open_candidate(
        branch=branch,
        base="tune/ported-gpt",
        base_sha=forge.head_sha("tune/ported-gpt"),
        recipe_path=RECIPE,
        recipe_text=recipe(2),
        title="t",
        body="b",
        labels=[],
    )


def test_state_survives_reopening(tmp_path: Path) -> None:
    with LocalForge(tmp_path / "forge") as forge:
        pr = tuned(forge)
        forge.comment(pr.number, "hello")
    with LocalForge(tmp_path / "forge", create=False) as forge:
        assert forge.get(pr.number) == pr
        assert [c.body for c in forge.comments(pr.number)] == ["hello"]


def test_pr_list_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with LocalForge(tmp_path / "forge") as forge:
        base_sha = tuned(forge).head_sha
        pr = candidate(forge, 1)
        forge.set_check(
            pr.number, CheckResult(name="attune/gate", conclusion="success", summary="allow")
        )
        forge.comment(pr.number, "cost so far: 0.01 GPU-hours", marker="attune:cost")
        forge.merge(pr.number, expected_base_sha=base_sha, expected_head_sha=pr.head_sha)
    assert main(["pr", "list", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for text in ("Tune ported-gpt", "attune: threads: 1 -> 2", "merged", "attune/gate: success"):
        assert text in out
    assert "attune/c1/1 -> tune/ported-gpt" in out
    assert main(["pr", "show", "2", "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "#2 attune: threads: 1 -> 2 [merged]" in out
    assert "attune/c1/1 -> tune/ported-gpt" in out
    assert "labels: attune, candidate" in out
    assert "Hypothesis: more intra-op threads." in out
    assert "-  threads: 1" in out
    assert "+  threads: 2" in out
    assert "allow" in out
    assert "<!-- attune:cost -->" in out
    assert "cost so far: 0.01 GPU-hours" in out


def test_pr_show_missing_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pr", "list", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no local forge here" in err
    assert not (tmp_path / "forge").exists()
    with LocalForge(tmp_path / "forge") as forge:
        tuned(forge)
    assert main(["pr", "show", "7", "--workdir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1
    assert "no pull request #7" in captured.err
    assert captured.out == ""


def test_relative_root_works_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with LocalForge(Path("runs") / "forge") as forge:
        pr = forge.open_tuned("recipes/r.yaml", "framework: embedded\n", "Tune r", "body")
        assert forge.head_sha(pr.head) == pr.head_sha


def test_merge_names_the_benchmarked_head_and_refuses_a_moved_one(forge: LocalForge) -> None:
    base_sha = tuned(forge).head_sha
    pr = candidate(forge, 1)
    benchmarked = pr.head_sha
    pushed = git(forge.repo, "commit-tree", f"{benchmarked}^{{tree}}", "-p", benchmarked, "-m", "x")
    git(forge.repo, "update-ref", f"refs/heads/{pr.head}", pushed)
    with pytest.raises(HeadMoved, match=f"head moved from {benchmarked} .* to {pushed}"):
        forge.merge(pr.number, expected_base_sha=base_sha, expected_head_sha=benchmarked)
    assert forge.get(pr.number).state == "open"
    assert forge.head_sha("tune/ported-gpt") == base_sha  # nothing merged


def test_candidates_are_cut_from_the_pinned_commit_only(forge: LocalForge) -> None:
    pinned = tuned(forge).head_sha
    moved = git(forge.repo, "commit-tree", f"{pinned}^{{tree}}", "-p", pinned, "-m", "push")
    git(forge.repo, "update-ref", "refs/heads/tune/ported-gpt", moved)
    with pytest.raises(HeadMoved, match=f"tune/ported-gpt moved from {pinned} to {moved}"):
        forge.open_candidate(
            branch="attune/c1/1",
            base="tune/ported-gpt",
            base_sha=pinned,
            recipe_path=RECIPE,
            recipe_text=recipe(2),
            title="t",
            body="b",
            labels=[],
        )
    assert forge.pulls() == [forge.get(1)]  # no candidate was opened
