"""Carry out one tool call of the model against the campaign (read-only) and the checks.

A call returns an ``Outcome``: the ``tool_result`` text, whether it is an error the model
should correct, and for ``propose``, ``request_profile`` and ``stop`` the decision once every
check passed. Tool calls are pure reads, so replaying a conversation runs them again.

Every call runs in a worker thread under a deadline (``READ_DEADLINE_S`` for the reads, the
box's ``deadline_s`` for the tools that resolve candidates) and polls ``should_stop`` while it
waits: past the deadline the model is told the call timed out, and ``attune stop`` interrupts
it. Its output is capped (``MAX_RESULT_CHARS``).
"""

from __future__ import annotations

import difflib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from bot.agents.claude import checks
from bot.agents.claude.catalogue import coupled_splits, remaining_moves
from bot.agents.claude.prediction import prediction_answer, with_prediction
from bot.agents.claude.source_tree import SourceError, SourceTree
from bot.agents.claude.tool_specs import INPUTS, GetMemory, Predict, Propose, StopInput
from bot.interfaces import AgentView, ProbeOf, ProfileRequest, Proposal, Stop
from bot.state.model import CampaignState
from bot.state.views import trial_summary
from gate.budget import failed_on_its_own
from gate.registry import Registry

Decision = Proposal | ProfileRequest | Stop

READ_DEADLINE_S = 15.0
"""Seconds a read (source, registry, history, profile) may take."""
DEADLINE_S = 300.0
"""Seconds a tool that resolves candidates (get_memory, predict, propose, stop) may take by
default."""
READS = ("read_source", "grep_source", "get_registry", "get_history", "get_profile")
MAX_RESULT_CHARS = 20_000
"""Characters of one tool result; the rest is cut with a note."""
POLL_S = 0.05


@dataclass
class Outcome:
    text: str
    is_error: bool = False
    decision: Decision | None = None
    shown: list[tuple[str, int]] = field(default_factory=list)
    """Source lines this result shows the model: citable from its next turn on."""
    timed_out: bool = False
    interrupted: bool = False
    """``attune stop`` asked the campaign to stop while the call ran."""


def _json(value: Any) -> str:
    return json.dumps(value, indent=1, default=str)


@dataclass
class ToolBox:
    view: AgentView
    probe_of: ProbeOf
    tried: set[str]
    registry: Registry
    tree: SourceTree
    state: CampaignState
    read: set[tuple[str, int]] = field(default_factory=set)
    """Source lines returned to the model in earlier turns: only those may be cited."""
    this_turn: set[tuple[str, int]] = field(default_factory=set)
    """Lines returned in the current turn: the model wrote its citations before seeing them."""
    deadline_s: float = DEADLINE_S
    should_stop: Callable[[], bool] = lambda: False

    def begin_turn(self) -> None:
        """A new model turn: what the last one returned has now been seen."""
        self.read |= self.this_turn
        self.this_turn = set()

    def call(self, name: str, raw: Any) -> Outcome:
        """Run one tool call under its deadline; a stop request interrupts the wait."""
        limit = min(READ_DEADLINE_S, self.deadline_s) if name in READS else self.deadline_s
        box: list[Outcome] = []
        worker = threading.Thread(
            target=lambda: box.append(self._call(name, raw)), daemon=True, name=f"tool-{name}"
        )
        start = time.monotonic()
        worker.start()
        while worker.is_alive():
            worker.join(POLL_S)
            if self.should_stop():
                return Outcome(
                    f"{name} was interrupted: the campaign was asked to stop",
                    True,
                    interrupted=True,
                )
            if time.monotonic() - start > limit:
                # the thread is abandoned (daemon): a read is bounded by its own caps, and a
                # resolve by its subprocess's timeout
                return Outcome(
                    f"{name} did not finish within {limit:g} s and was abandoned: narrow it "
                    "(a smaller range, a narrower path or pattern)",
                    True,
                    timed_out=True,
                )
        if not box:
            return Outcome(f"{name} failed inside attune; it was not run", True)
        outcome = box[0]
        if len(outcome.text) > MAX_RESULT_CHARS:
            cut = len(outcome.text) - MAX_RESULT_CHARS
            outcome.text = outcome.text[:MAX_RESULT_CHARS] + f"\n[cut: {cut:,} more characters]"
        self.this_turn.update(outcome.shown)
        return outcome

    def _call(self, name: str, raw: Any) -> Outcome:
        model = INPUTS.get(name)
        if model is None:
            return Outcome(f"no tool {name!r}; the tools are {', '.join(INPUTS)}", True)
        try:
            args = model.model_validate(raw if isinstance(raw, dict) else {"": raw})
        except ValidationError as exc:
            errs = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
            )
            return Outcome(f"malformed input for {name}: {errs}", True)
        try:
            handler = getattr(self, f"_{name}")
            result: Outcome = handler(args)
        except SourceError as exc:
            return Outcome(str(exc), True)
        return result

    # --- reads ---

    def _read_source(self, a: Any) -> Outcome:
        text, shown = self.tree.read(a.path, a.start, a.end)
        path = self.tree.file(a.path).relative_to(self.tree.root.resolve()).as_posix()
        return Outcome(text, shown=[(path, n) for n in shown])

    def _grep_source(self, a: Any) -> Outcome:
        found = self.tree.grep(a.pattern, a.path)
        shown = [(p, n) for p, n, _ in found.hits]
        note = f"\n[{found.cut}]" if found.cut else ""
        if not found.hits:
            where = a.path or self.tree.package
            return Outcome(f"no line of {where} matches {a.pattern!r}{note}")
        lines = "\n".join(f"{p}:{n}: {t}" for p, n, t in found.hits)
        return Outcome(lines + note, shown=shown)

    def _get_registry(self, a: Any) -> Outcome:
        entry = self.registry.entry(a.key)
        if entry is None:
            close = difflib.get_close_matches(a.key, list(self.registry.data.keys), n=5)
            return Outcome(f"{a.key} is not in the registry; close: {', '.join(close)}", True)
        info: dict[str, Any] = entry.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        bugs = [f"{b}: {bug.reason}" for b, bug in self.registry.bugs.items() if bug.matches(a.key)]
        if bugs:
            info["known_bugs"] = bugs
        return Outcome(_json({a.key: info}))

    def _get_history(self, a: Any) -> Outcome:
        trials = [trial_summary(t) for t in self.state.trials.values()]
        v = self.view
        summary = {
            "incumbent": v.incumbent,
            "noise_threshold": v.threshold,
            "budget_left_device_s": round(v.budget_left_s, 1),
            "next_trial_forecast_device_s": round(v.forecast_s, 1),
            "trials": trials,
        }
        return Outcome(_json(summary))

    def _get_profile(self, a: Any) -> Outcome:
        profile = self.state.profiles.get(a.trial)
        record = self.state.trials.get(a.trial)
        if profile is None and record and record.finished and record.finished.profile:
            return Outcome(_json(record.finished.profile.model_dump(mode="json")))
        if profile is None:
            have = ", ".join(self.state.profiles) or "none"
            return Outcome(f"no profile of {a.trial} (profiled incumbents: {have})", True)
        return Outcome(_json(profile.model_dump()))

    def _get_memory(self, a: GetMemory) -> Outcome:
        probe = self.probe_of(dict(a.changes))
        if probe is None:
            return Outcome("the framework's validation rejects these changes", True)
        verdict = probe.memory or "no memory model for this framework"
        return Outcome(_json({"fits": probe.fits, "memory": verdict}))

    def _predict(self, a: Predict) -> Outcome:
        probe = self.probe_of(dict(a.changes))
        if probe is None:
            return Outcome("the framework's validation rejects these changes", True)
        if probe.predicted_gain_pct is None:
            return Outcome("the step-time model has no prediction for this configuration", True)
        return Outcome(_json(prediction_answer(probe)))

    # --- decisions ---

    def _propose(self, a: Propose) -> Outcome:
        problems = checks.missing_fields(a.model_dump())
        changes = a.changes or {}
        keys = list(changes)
        values = self.view.incumbent_values
        problems += [f"{k} is already {v!r}" for k, v in changes.items() if values.get(k) == v]
        lever = checks.lever_problem(keys, a.coupled, coupled_splits(self.view))
        lever = lever or checks.split_problem(changes, values)
        problems += [lever] if lever else []
        problems += checks.hypothesis_problems(
            a.bottleneck, a.expected_gain_pct, self.view.profile, a.bottleneck_why
        )
        problems += checks.layout_problems(keys, set(self.view.layout_sources))
        bugs = [k for k in keys if any(b.matches(k) for b in self.registry.bugs.values())]
        problems += [f"{k} has a known bug at this version (get_registry)" for k in bugs]
        if a.source_refs and keys:
            problems += checks.citation_problems(
                keys, a.source_refs, self._cite, self.read, self.this_turn
            )
        lessons = checks.lessons_problem(a.lessons_used, [x.id for x in self.view.lessons])
        problems += [lessons] if lessons else []
        if problems:
            return _refused(problems)
        probe = self.probe_of(dict(changes))
        if probe is None:
            return _refused(["the framework's validation rejects these changes"])
        failed = {
            t.finished.fingerprint: t.trial
            for t in self.state.trials.values()
            if t.finished and failed_on_its_own(t.finished)
        }
        if probe.effective is not None and probe.baseline is not None:
            gate = checks.gate_problems(probe.baseline, probe.effective, self.registry)
            if gate:
                return _refused(gate)
        late = [checks.rerun_problem(probe.fingerprint, failed)]
        late.append(checks.tried_problem(probe.fingerprint, self.tried))
        if not probe.fits:
            late.append(f"the memory model predicts it does not fit: {probe.memory}")
        if any(late):
            return _refused([p for p in late if p])
        mechanism = with_prediction(str(a.mechanism), probe)
        proposal = Proposal(
            lever=keys,
            changes={k: (values.get(k), v) for k, v in changes.items()},
            coupled=a.coupled,
            bottleneck=str(a.bottleneck),
            mechanism=mechanism,
            expected_gain_pct=float(a.expected_gain_pct or 0.0),
            sources=list(a.source_refs or []),
            lessons_used=a.lessons_used,
        )
        return Outcome(f"accepted: {proposal.title}", decision=proposal)

    def _cite(self, ref: str, key: str) -> tuple[str, int] | str:
        """The tree's citation check, the registry's own source for ``key`` accepted too."""
        entry = self.registry.entry(key)
        source = entry.source.partition("@")[0] if entry and entry.source else ""
        return self.tree.cite(ref, key, frozenset({source} if source else ()))

    def _request_profile(self, a: Any) -> Outcome:
        if not a.reason.strip():
            return Outcome("say why the bottleneck is unclear", True)
        if self.view.profile is not None:
            return Outcome(
                f"the incumbent {self.view.incumbent} has a profile: get_profile("
                f"'{self.view.incumbent}') and name its bottleneck",
                True,
            )
        return Outcome("accepted: a profiled run follows", decision=ProfileRequest(reason=a.reason))

    def _stop(self, a: StopInput) -> Outcome:
        v = self.view
        finished = [t.trial for t in self.state.trials.values() if t.finished]
        remaining = (
            [] if v.forecast_s > v.budget_left_s else remaining_moves(v, self.probe_of, self.tried)
        )
        problem = checks.stop_problem(
            budget_left_s=v.budget_left_s,
            forecast_s=v.forecast_s,
            evidence=a.evidence_trial_ids,
            finished=finished,
            remaining=remaining,
        )
        if problem:
            return Outcome(f"stop refused: {problem}", True)
        reason = "budget" if v.forecast_s > v.budget_left_s else "exhausted"
        evidence = [a.reason, *(f"evidence: {t}" for t in a.evidence_trial_ids)]
        return Outcome(
            "accepted: the campaign stops", decision=Stop(reason=reason, evidence=evidence)
        )


def _refused(problems: list[str]) -> Outcome:
    return Outcome("proposal refused:\n- " + "\n- ".join(problems), True)
