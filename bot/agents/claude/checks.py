"""The playbook's rules as checks: pure functions, each returning what is wrong (for the
model to correct) or nothing. ``tools.py`` gathers their inputs and sends a refusal back as a
``tool_result`` with ``is_error``; nothing the model says can get past them."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from gate import prelaunch
from gate.models import EffectiveConfig, ProfileBreakdown
from gate.registry import Registry

BOTTLENECKS = ("compute", "communication", "memory_copy", "cpu", "idle", "memory")
HYPOTHESIS = ("changes", "bottleneck", "mechanism", "expected_gain_pct", "source_refs")
"""The fields of a hypothesis, every one required."""

Cite = Callable[[str, str], "tuple[str, int] | str"]
"""(citation, key) -> (path, line) of a line where the key is read, defined or consumed, or
why not."""
MAX_GAIN_PCT = 100.0
"""The largest expected gain a hypothesis may claim. The score is tokens per second per
device, so no layout move of one lever can more than double it in expectation without
evidence; a bigger claim is refused, not launched on a promise."""
MIN_SHARE = 0.05
"""A profile share below this is no bottleneck, whatever the model says."""


def missing_fields(args: Mapping[str, Any]) -> list[str]:
    """A hypothesis field absent or empty: the bottleneck, the mechanism, the expected gain,
    the changes and a source for them are all required."""
    problems = [f"{name} is missing" for name in HYPOTHESIS if args.get(name) in (None, "", [], {})]
    neck = args.get("bottleneck")
    if neck and neck not in BOTTLENECKS:
        problems.append(f"bottleneck {neck!r} is not one of {', '.join(BOTTLENECKS)}")
    gain = args.get("expected_gain_pct")
    if isinstance(gain, int | float) and gain <= 0:
        problems.append(f"expected_gain_pct must be a positive percentage, got {gain}")
    mechanism = args.get("mechanism")
    if isinstance(mechanism, str) and mechanism and len(mechanism.split()) < 5:
        problems.append("mechanism must say why the change relieves the bottleneck (a sentence)")
    return problems


def lever_problem(
    keys: Collection[str], coupled: bool, splits: Iterable[frozenset[str]]
) -> str | None:
    """More than one key moves only as one declared coupled split the catalogue knows."""
    if len(keys) <= 1:
        return None
    known = [s for s in splits]
    if not coupled:
        return (
            f"{len(keys)} levers moved at once ({', '.join(sorted(keys))}): change one, or "
            "declare coupled=true for a coupled parallel split"
        )
    if frozenset(keys) not in known:
        names = "; ".join("{" + ", ".join(sorted(s)) + "}" for s in known) or "none"
        return (
            f"{{{', '.join(sorted(keys))}}} is not a coupled split of this framework "
            f"(coupled splits here: {names}): change one lever"
        )
    return None


def split_problem(changes: Mapping[str, Any], old: Mapping[str, Any]) -> str | None:
    """A declared coupled split moves devices between its axes: its values are positive
    integers whose product (the ranks x threads, or the world size, it preserves) is the
    incumbent's. Called once ``lever_problem`` accepted the key set."""
    if len(changes) <= 1:
        return None
    new_values, old_values = [changes[k] for k in changes], [old.get(k) for k in changes]
    if not all(_count(v) for v in (*new_values, *old_values)):
        return "a coupled split's values are positive whole numbers: " + ", ".join(
            f"{k} {old.get(k)!r} -> {v!r}" for k, v in changes.items()
        )
    before = math.prod([int(str(v)) for v in old_values])
    after = math.prod([int(str(v)) for v in new_values])
    if before != after:
        moves = ", ".join(f"{k} {old.get(k)} -> {v}" for k, v in changes.items())
        return (
            f"{moves} is not a split: the product of {', '.join(changes)} goes from {before} "
            f"to {after}; a coupled split keeps it (halve one, double the other)"
        )
    return None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def hypothesis_problems(
    bottleneck: str | None,
    gain_pct: float | None,
    profile: ProfileBreakdown | None,
    why: str | None = None,
) -> list[str]:
    """The bottleneck agrees with the profile and the expected gain is bounded.

    The gain is at most ``MAX_GAIN_PCT``; with a profile, at most what removing the named
    bottleneck entirely could give (Amdahl: share s of the step -> s / (1 - s)). The named
    bottleneck must be a share of at least ``MIN_SHARE``, and the profile's largest share
    unless ``why`` says why not."""
    problems = []
    if gain_pct is not None and (not math.isfinite(gain_pct) or gain_pct > MAX_GAIN_PCT):
        problems.append(
            f"expected_gain_pct {gain_pct:g} is beyond what one layout move can claim "
            f"(at most {MAX_GAIN_PCT:g}%)"
        )
    if profile is None or bottleneck is None or bottleneck == "memory":
        return problems
    shares = {
        "compute": profile.compute,
        "communication": profile.communication,
        "memory_copy": profile.memory_copy,
        "cpu": profile.cpu,
        "idle": profile.idle,
    }
    share = shares.get(bottleneck)
    if share is None:
        return problems
    top = max(shares, key=lambda k: shares[k])
    listed = ", ".join(f"{k} {v:.0%}" for k, v in shares.items())
    if share < MIN_SHARE:
        problems.append(
            f"the profile gives {bottleneck} {share:.0%} of the step ({listed}): it is not the "
            "bottleneck"
        )
        return problems
    if top != bottleneck and not (why and len(why.split()) >= 5):
        problems.append(
            f"the profile's largest share is {top} ({listed}), not {bottleneck}: name it, or "
            "say in bottleneck_why why this move targets a smaller share"
        )
    ceiling = 100.0 * share / (1.0 - share) if share < 1 else math.inf
    if gain_pct is not None and math.isfinite(gain_pct) and gain_pct > ceiling:
        problems.append(
            f"expected_gain_pct {gain_pct:g} exceeds what removing all {bottleneck} time "
            f"({share:.0%} of the step) could give: {ceiling:.0f}%"
        )
    return problems


def gate_problems(
    baseline: EffectiveConfig, candidate: EffectiveConfig, registry: Registry
) -> list[str]:
    """The pre-launch gate's own judgement (``gate.prelaunch.judge``, the registry's ``when:``
    conditions applied to the baseline/candidate pair): any finding that is not layout is a
    refusal here, before a pull request or a trial slot is spent on it."""
    report = prelaunch.judge(baseline, candidate, registry)
    return [
        f"the gate would {'reject' if f.key_class != 'unknown' else 'send to review'} it: "
        f"{f.key} {f.baseline!r} -> {f.candidate!r} is {f.key_class} ({f.reason})"
        for f in report.findings
        if f.key_class != "layout"
    ]


def layout_problems(keys: Iterable[str], layout: Collection[str]) -> list[str]:
    """Every changed key must be classified layout by the registry."""
    return [
        f"{k} is not a layout key in the registry (get_registry('{k}') says why)"
        for k in keys
        if k not in layout
    ]


def citation_problems(
    keys: Collection[str],
    refs: Iterable[str],
    cite: Cite,
    read: Collection[tuple[str, int]],
    same_turn: Collection[tuple[str, int]] = (),
) -> list[str]:
    """Each citation resolves to a line of the framework source where a changed key is read,
    defined or consumed, a line returned to the model in an earlier turn (``read``; one
    shown in this same turn, ``same_turn``, it had not seen when it wrote the citation);
    each changed key has one."""
    problems, cited = [], set()
    for ref in refs:
        answers = {key: cite(ref, key) for key in keys}
        hits = {k: a for k, a in answers.items() if isinstance(a, tuple)}
        if not hits:
            problems.append(str(next(iter(answers.values()), f"{ref!r} cites nothing")))
            continue
        for key, (path, line) in hits.items():
            if (path, line) in same_turn and (path, line) not in read:
                problems.append(
                    f"{ref!r}: {path}:{line} was returned in this same turn, after you wrote "
                    "the citation: cite it in a later turn"
                )
            elif (path, line) not in read:
                problems.append(f"{ref!r}: read {path} around line {line} before citing it")
            else:
                cited.add(key)
    problems += [f"no citation read and resolving for {k}" for k in keys if k not in cited]
    return problems


def rerun_problem(fingerprint: str, failed: Mapping[str, str]) -> str | None:
    """An exact rerun (same effective configuration) of a recipe that failed."""
    if fingerprint in failed:
        return (
            f"this is exactly the configuration of {failed[fingerprint]}, which failed: change it"
        )
    return None


def tried_problem(fingerprint: str, tried: Collection[str]) -> str | None:
    if fingerprint in tried:
        return "this effective configuration was already tried (get_history lists the trials)"
    return None


def lessons_problem(used: Iterable[str], known: Collection[str]) -> str | None:
    unknown = [u for u in used if u not in known]
    if unknown:
        ids = "unknown lesson id" + ("" if len(unknown) == 1 else "s")
        return f"{ids} {', '.join(unknown)} (known: {', '.join(known) or 'none'})"
    return None


def stop_problem(
    *,
    budget_left_s: float,
    forecast_s: float,
    evidence: Collection[str],
    finished: Collection[str],
    remaining: Collection[str],
) -> str | None:
    """A stop stands when the budget cannot cover another trial, or when the evidence names
    finished trials and no move of the catalogue is left that they do not rule out."""
    if forecast_s > budget_left_s:
        return None
    budget = (
        f"the budget still covers a trial ({budget_left_s:.0f} device-seconds left, the next "
        f"is forecast at {forecast_s:.0f})"
    )
    if not evidence:
        return f"{budget}, and the stop names no finished trial as evidence"
    unknown = [t for t in evidence if t not in finished]
    if unknown:
        return (
            f"{budget}; {', '.join(unknown)} is not a finished trial "
            f"(finished: {', '.join(finished) or 'none'})"
        )
    if remaining:
        return f"{budget}, and moves remain that no finished trial rules out: " + "; ".join(
            remaining
        )
    return None
