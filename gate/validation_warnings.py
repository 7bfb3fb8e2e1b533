"""Warnings the framework's validation raised, judged: which ones a candidate introduces, and
which of those matter.

The rule (documented in docs/megatron.md): a warning the candidate's validation raised and the
baseline's did not (same message and source) *counts* when it is about numerical stability or
correctness: its category is not a deprecation notice (``DeprecationWarning``,
``PendingDeprecationWarning``, ``FutureWarning``) and its message names a numerical or
correctness concern (``NUMERICAL``: NaN/Inf, overflow, precision, stability, accuracy,
divergence, loss scaling, determinism, "incorrect"...). Informational warnings (an option
switched off because it has no effect, a default filled in, a deprecation) do not count.

A warning that counts is a finding with key ``warning:<id>`` (``warning_id``), judged by the
registry like any key: a ``known_bugs`` entry whose keys match it rejects it as ``known_bug``,
an entry for it gives its class; otherwise it is ``unknown`` (review) with the warning's text as
the reason.
"""

from __future__ import annotations

import re

from gate.models import EffectiveConfig, Finding, ValidationWarning
from gate.registry import Registry

IGNORED_CATEGORIES = frozenset({"DeprecationWarning", "PendingDeprecationWarning", "FutureWarning"})
NUMERICAL = re.compile(
    r"\b(nan|inf|overflow\w*|underflow\w*|precision|numeric\w*|(un)?stab\w*|accura\w*|"
    r"diverg\w*|incorrect\w*|wrong|correctness|converge\w*|loss.scal\w*|determinis\w*|"
    r"non-?deterministic|rounding|mismatch\w*|corrupt\w*|silently|not (be )?(the )?same)\b",
    re.IGNORECASE,
)
"""Words that make a warning one about numerical stability or correctness."""
_WORDS = re.compile(r"[a-z0-9_]+")


def warning_id(message: str) -> str:
    """A short stable id: the message's first eight words, lower case, joined by ``-``."""
    return "-".join(_WORDS.findall(message.lower())[:8]) or "empty"


def counts(warning: ValidationWarning) -> bool:
    """Whether ``warning`` is about numerical stability or correctness (the rule above)."""
    if warning.category in IGNORED_CATEGORIES:
        return False
    return NUMERICAL.search(warning.message) is not None


def introduced(baseline: EffectiveConfig, candidate: EffectiveConfig) -> list[ValidationWarning]:
    """The candidate's warnings the baseline did not raise (same message and source)."""
    seen = {(w.message, w.source) for w in baseline.warnings}
    return [w for w in candidate.warnings if (w.message, w.source) not in seen]


def warning_findings(
    baseline: EffectiveConfig, candidate: EffectiveConfig, registry: Registry
) -> list[Finding]:
    """One finding per introduced warning that counts (or that the registry names)."""
    findings = []
    for warning in introduced(baseline, candidate):
        key = f"warning:{warning_id(warning.message)}"
        judged = registry.classify(key, baseline, candidate)
        named = judged.key_class == "known_bug" or registry.entry(key) is not None
        if not named and not counts(warning):
            continue
        where = f"{warning.source}@{candidate.framework_version}" if warning.source != "-" else "-"
        text = f"validation warns ({warning.category}): {warning.message}"
        findings.append(
            Finding(
                key=key,
                baseline=None,
                candidate=warning.message,
                key_class=judged.key_class if named else "unknown",
                reason=f"{judged.reason}; {text}" if named else text,
                source=judged.source if named else where,
                derived=True,
            )
        )
    return findings
