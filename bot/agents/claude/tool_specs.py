"""The tools the model gets, and nothing else: no shell, no writes. Each input is validated
by its model here before anything runs; a malformed input goes back as a tool error."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReadSource(_Input):
    path: str
    start: int = Field(ge=1)
    end: int = Field(ge=1)


class GrepSource(_Input):
    pattern: str
    path: str | None = None


class GetRegistry(_Input):
    key: str


class NoInput(_Input):
    pass


class GetProfile(_Input):
    trial: str


class GetMemory(_Input):
    changes: dict[str, Any]


class Predict(_Input):
    changes: dict[str, Any]


class Propose(_Input):
    """Every hypothesis field is optional here so a missing one is named by the playbook's
    check (``checks.missing_fields``), not by a type error."""

    changes: dict[str, Any] | None = None
    coupled: bool = False
    bottleneck: str | None = None
    mechanism: str | None = None
    expected_gain_pct: float | None = None
    bottleneck_why: str | None = None
    """Why the move targets a share that is not the profile's largest (only then needed)."""
    source_refs: list[str] | None = None
    lessons_used: list[str] = Field(default_factory=list)


class RequestProfile(_Input):
    reason: str


class StopInput(_Input):
    reason: str
    evidence_trial_ids: list[str] = Field(default_factory=list)


INPUTS: dict[str, type[_Input]] = {
    "read_source": ReadSource,
    "grep_source": GrepSource,
    "get_registry": GetRegistry,
    "get_history": NoInput,
    "get_profile": GetProfile,
    "get_memory": GetMemory,
    "predict": Predict,
    "propose": Propose,
    "request_profile": RequestProfile,
    "stop": StopInput,
}

_S = {"type": "string"}
_CHANGES = {
    "type": "object",
    "description": "registry key -> new value (the incumbent's value is known)",
    "additionalProperties": True,
}


def _tool(
    name: str, description: str, props: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    schema = {"type": "object", "properties": props, "required": required}
    return {"name": name, "description": description, "input_schema": schema}


TOOLS: list[dict[str, Any]] = [
    _tool(
        "read_source",
        "Read lines start..end (1-based, at most 200) of a file of the framework source the "
        "recipe runs. Paths are relative to the source root, as in the registry's sources.",
        {"path": _S, "start": {"type": "integer"}, "end": {"type": "integer"}},
        ["path", "start", "end"],
    ),
    _tool(
        "grep_source",
        "Search the framework source for a regular expression (RE2 syntax: no backreferences "
        "or lookaround, at most 200 characters); optional path narrows it to a file or "
        "directory. Returns path:line: text, at most 60 hits.",
        {"pattern": _S, "path": _S},
        ["pattern"],
    ),
    _tool(
        "get_registry",
        "The registry's classification of a configuration key: layout (may be tuned), "
        "semantic (changes what is trained), known_bug; its reason and source line.",
        {"key": _S},
        ["key"],
    ),
    _tool(
        "get_history",
        "Every trial so far: calibration, profiles, candidates with their changes, gate "
        "verdicts, status, score, gain, decision and failure; the budget and the forecast.",
        {},
        [],
    ),
    _tool(
        "get_profile",
        "The profile breakdown (compute, communication, memory_copy, cpu, idle fractions of "
        "the step) of a trial, or of an incumbent by its id (baseline, c3).",
        {"trial": _S},
        ["trial"],
    ),
    _tool(
        "get_memory",
        "The memory model's prediction for the incumbent with these changes (where the "
        "framework has one), and whether the framework's validation accepts them.",
        {"changes": _CHANGES},
        ["changes"],
    ),
    _tool(
        "predict",
        "What-if: the campaign's step-time model, calibrated on this campaign's finished runs, "
        "for the incumbent with these changes: predicted gain in tokens/s/device over the "
        "incumbent (percent), the model's error band (percent: a gain inside it is no "
        "evidence), predicted tokens/s/device, one trial's device-hours and peak memory. "
        "Read-only; nothing is launched.",
        {"changes": _CHANGES},
        ["changes"],
    ),
    _tool(
        "propose",
        "Propose the next candidate: ONE layout lever (or one declared coupled split, whose "
        "values keep the product of its keys), the bottleneck it relieves (the profile's "
        "largest share, or say why not in bottleneck_why), the mechanism, the expected gain "
        "in percent (at most 100, and at most what removing the whole bottleneck share could "
        "give), and for every changed key a source_ref path:line where the key is read, "
        "defined or consumed, a line returned to you in an EARLIER turn. lessons_used: ids "
        "of the lessons the hypothesis relies on.",
        {
            "changes": _CHANGES,
            "coupled": {"type": "boolean"},
            "bottleneck": {
                "type": "string",
                "enum": ["compute", "communication", "memory_copy", "cpu", "idle", "memory"],
            },
            "mechanism": _S,
            "expected_gain_pct": {"type": "number"},
            "bottleneck_why": _S,
            "source_refs": {"type": "array", "items": _S},
            "lessons_used": {"type": "array", "items": _S},
        },
        ["changes", "bottleneck", "mechanism", "expected_gain_pct", "source_refs"],
    ),
    _tool(
        "request_profile",
        "Ask for a profiled run of the incumbent when the bottleneck is unclear.",
        {"reason": _S},
        ["reason"],
    ),
    _tool(
        "stop",
        "End the campaign: only when the budget cannot cover another trial, or when the "
        "finished trials named in evidence_trial_ids rule out every remaining move.",
        {"reason": _S, "evidence_trial_ids": {"type": "array", "items": _S}},
        ["reason", "evidence_trial_ids"],
    ),
]
"""The ``tools`` parameter of every call."""
