"""The playbook's rules as checks: pure functions, each returning what is wrong (for the
model to correct) or nothing. ``tools.py`` gathers their inputs and sends a refusal back as a
``tool_result`` with ``is_error``; nothing the model says can get past them."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

BOTTLENECKS = ("compute", "communication", "memory_copy", "cpu", "idle", "memory")
HYPOTHESIS = ("changes", "bottleneck", "mechanism", "expected_gain_pct", "source_refs")
"""The fields of a hypothesis, every one required."""

Cite = Callable[[str, str], "tuple[str, int] | str"]
"""(citation, key) -> (path, line) of a real line naming the key, or why not."""


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


def layout_problems(keys: Iterable[str], layout: Collection[str]) -> list[str]:
    """Every changed key must be classified layout by the registry."""
    return [
        f"{k} is not a layout key in the registry (get_registry('{k}') says why)"
        for k in keys
        if k not in layout
    ]


def citation_problems(
    keys: Collection[str], refs: Iterable[str], cite: Cite, read: Collection[tuple[str, int]]
) -> list[str]:
    """Each citation resolves to a real line of the framework source naming a changed key, a
    line this conversation has read; each changed key has one."""
    problems, cited = [], set()
    for ref in refs:
        answers = {key: cite(ref, key) for key in keys}
        hits = {k: a for k, a in answers.items() if isinstance(a, tuple)}
        if not hits:
            problems.append(str(next(iter(answers.values()), f"{ref!r} cites nothing")))
            continue
        for key, (path, line) in hits.items():
            if (path, line) not in read:
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
        return f"unknown lesson id(s) {', '.join(unknown)} (known: {', '.join(known) or 'none'})"
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
