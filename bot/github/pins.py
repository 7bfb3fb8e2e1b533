"""What a trial benchmarks on GitHub, and the checks that it is still what was screened.

The campaign pins the tuned pull request's head when it starts; only its own merges move it.
A candidate is one commit, writing the recipe only, on the pinned head it was cut from. Before
anything is dispatched, the branches on GitHub must still point where the ledger says.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.github.client import RepoClient
from bot.interfaces import HeadMoved
from bot.state.model import CampaignState
from gate.errors import AttuneError


@dataclass(frozen=True)
class Pins:
    recipe_path: str
    tuned: tuple[str, str]
    """(tuned branch, its pinned head when the trial was opened)."""
    candidate: tuple[str, str] | None
    """(candidate branch, its commit) for a candidate; None for a baseline or profile run."""
    pr: int | None
    """The candidate's pull request."""
    baseline: str | None = None
    """A judgement run of the baseline's recipe after merges (the final confirmation's A runs):
    the commit the campaign started from."""

    @property
    def commit(self) -> str:
        """The commit the trial benchmarks: its candidate's, the baseline's, else the tuned
        head."""
        return self.baseline or (self.candidate or self.tuned)[1]


def pins_of(state: CampaignState, trial: str) -> Pins:
    """The trial's pins, from the campaign's folded ledger."""
    if state.params is None or state.tuned_branch is None or state.pinned_sha is None:
        raise AttuneError(f"{trial}: no commit to benchmark (forge not ready)")
    request = state.judgement.runs.get(trial)  # an A/B or confirmation run (docs/judgement.md)
    if request is not None and request.recipe_of not in (state.incumbent, "baseline"):
        return pins_of(state, request.recipe_of)  # a B run: the candidate's own commit
    if request is not None and request.recipe_of == "baseline" and state.candidates:
        base = state.candidates[0].base_sha  # the first candidate was cut from the start
        pins = pins_of(state, "baseline")
        return Pins(pins.recipe_path, pins.tuned, None, None, baseline=base)
    record = state.trials.get(trial)
    if record is None or record.pr is None:
        return Pins(state.params.recipe_path, (state.tuned_branch, state.pinned_sha), None, None)
    assert record.base_sha and record.branch and record.head_sha
    return Pins(
        state.params.recipe_path,
        (state.tuned_branch, record.base_sha),
        (record.branch, record.head_sha),
        record.pr,
    )


def verify_pins(repo: RepoClient, pins: Pins) -> str:
    """The commit to benchmark, after checking its branch still points at it (a push to the
    tuned or candidate branch during the campaign stops it) and, for a candidate, that its pull
    request changes the recipe and nothing else and is one commit on the pinned head."""
    if pins.pr is not None:
        changed = sorted(f.filename for f in repo.pull_files(pins.pr))
        if changed != [pins.recipe_path]:
            raise AttuneError(
                f"candidate #{pins.pr} changes {', '.join(changed)}: a candidate may change "
                f"{pins.recipe_path} only; nothing was launched"
            )
    tuned, candidate = pins.tuned, pins.candidate
    for branch, sha in (tuned, candidate) if candidate else (tuned,):
        found = repo.branch_sha(branch)
        if found != sha:
            raise HeadMoved(
                f"the head of {branch} moved from {sha[:7]} to {found[:7]} during the "
                "campaign; nothing was launched"
            )
    if candidate is None:
        return pins.commit
    parents = repo.parents(candidate[1])
    if parents != [tuned[1]]:
        raise HeadMoved(
            f"candidate {candidate[0]} ({candidate[1][:7]}) is not one commit on the pinned "
            f"{tuned[0]} ({tuned[1][:7]}): its parents are "
            f"{', '.join(p[:7] for p in parents) or 'none'}; nothing was launched"
        )
    return candidate[1]
