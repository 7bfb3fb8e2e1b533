"""GitHub's REST description (``rest-api-subset.json``, OpenAPI 3.0): the operations the fake
routes requests to, the schemas requests and responses are checked against, the examples bodies
start from. To JSON Schema: ``nullable: true`` becomes a ``null`` type (or enum member), and
``#/components/...`` references absolute ones, resolved through one ``referencing.Registry``.
"""

from __future__ import annotations

import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from referencing import Registry
from referencing.jsonschema import DRAFT7

ROOT = "urn:github-rest-api-subset"
KNOWN_GAPS = r"(^|/)requested_teams/\d+:type$|^(user)?:role_name$|(^|/)source:language$"
"""``<path>:<missing property>`` of the ``required`` errors GitHub's own examples have."""
_R, _NAMES = "/repos/{owner}/{repo}", {"type": "array", "items": {"type": "string"}}
_LABELS = {"oneOf": [{"properties": {"labels": _NAMES}, "required": ["labels"]}, _NAMES]}
_DISPATCH = {"type": "object", "properties": {"inputs": {"maxProperties": 25}}, "required": ["ref"]}
_WF = _R + "/actions/workflows/{workflow_id}"
EXTRA_OPERATIONS: dict[tuple[str, str], tuple[str, Any]] = {
    ("GET", _R + "/commits/{ref}"): ("repos/get-commit", None),
    ("GET", _R + "/issues/{issue_number}/labels"): ("issues/list-labels-on-issue", None),
    ("POST", _R + "/issues/{issue_number}/labels"): ("issues/add-labels", _LABELS),
    ("GET", _WF): ("actions/get-workflow", None),
    ("POST", _WF + "/dispatches"): ("actions/create-workflow-dispatch", _DISPATCH),
    ("GET", _WF + "/runs"): ("actions/list-workflow-runs", None),
    ("GET", _R + "/actions/runs"): ("actions/list-workflow-runs-for-repo", None),
    ("GET", _R + "/actions/runs/{run_id}/jobs"): ("actions/list-jobs-for-workflow-run", None),
    ("GET", _R + "/activity"): ("repos/list-activities", None),
    ("GET", _R + "/actions/artifacts/{artifact_id}/zip"): ("actions/download-artifact", None),
}
"""Real GitHub operations the subset lacks: their ``operationId`` and JSON body (or ``None``)."""


def fixtures_dir() -> Path:
    """``$ATTUNE_GITHUB_FIXTURES``, else ``tests/fixtures/github`` (see its SOURCES.md)."""
    override = os.environ.get("ATTUNE_GITHUB_FIXTURES")
    return Path(override) if override else Path(__file__).resolve().parents[1] / "fixtures/github"


def _to_json_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: ROOT + v if k == "$ref" else _to_json_schema(v) for k, v in node.items()}
    if isinstance(node.get("nullable"), bool) and out.pop("nullable"):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif "type" not in out:
            out = {"anyOf": [out, {"type": "null"}]}
        if None not in out.get("enum", [None]):
            out["enum"] = [*out["enum"], None]
    return out


def _pattern(template: str) -> re.Pattern[str]:
    """A template's regular expression: file paths and refs hold slashes, ids are numbers."""
    pieces = re.split(r"\{(\w+)\}", template)
    for i in range(1, len(pieces), 2):
        number = pieces[i].endswith(("_number", "_id")) and pieces[i] != "workflow_id"
        kind = {"path": ".*", "ref": ".+"}.get(pieces[i], "[0-9]+" if number else "[^/]+")
        pieces[i] = f"(?P<{pieces[i]}>{kind})"
    return re.compile("".join(p if i % 2 else re.escape(p) for i, p in enumerate(pieces)) + "$")


class Spec:
    """The loaded description: routes, converted schemas, examples and validators."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.examples: dict[str, Any] = document["components"]["examples"]
        parts = {k: v for k, v in document["components"].items() if k != "examples"}
        self.converted: dict[str, Any] = _to_json_schema({**document, "components": parts})
        resource = DRAFT7.create_resource(self.converted)
        self.registry: Registry[Any] = Registry().with_resource(ROOT, resource)
        self._validators: dict[str, Draft7Validator] = {}
        ops = {key: operation for key, (operation, _) in EXTRA_OPERATIONS.items()}
        for template, item in document["paths"].items():
            methods = {m: o for m, o in item.items() if m != "parameters"}
            ops |= {(m.upper(), template): o["operationId"] for m, o in methods.items()}
        literal = {key: len(re.sub(r"\{\w+\}", "", key[1])) for key in ops}
        ordered = sorted(ops, key=literal.__getitem__, reverse=True)
        self.routes = [(*key, ops[key], _pattern(key[1])) for key in ordered]
        """(method, template, ``operationId``, pattern), the most specific first."""

    def route(self, method: str, path: str) -> tuple[str, str, dict[str, str]] | None:
        """The path template, ``operationId`` and path parameters of a request, if known."""
        for verb, template, operation, pattern in self.routes:
            if verb == method and (found := pattern.match(path)):
                return template, operation, found.groupdict()
        return None

    def operation(self, method: str, template: str) -> Any:
        return self.converted["paths"].get(template, {}).get(method.lower())

    def _resolve(self, node: Any) -> Any:
        while "$ref" in node:
            node = self.registry.resolver().lookup(node["$ref"]).contents
        return node

    def problems(self, key: str, schema: Any, instance: Any, where: str) -> list[str]:
        """What is wrong with ``instance`` against ``schema`` (validator cached as ``key``)."""
        if key not in self._validators:
            self._validators[key] = Draft7Validator(schema, registry=self.registry)
        found = []
        for error in self._validators[key].iter_errors(instance):
            path = "/".join(str(part) for part in error.absolute_path)
            if error.validator == "oneOf" and "is valid under each of" in error.message:
                continue  # the description's loose oneOf (e.g. two all-optional error shapes)
            missing = re.match(r"'(.+)' is a required property", error.message)
            if missing and re.search(KNOWN_GAPS, f"{path}:{missing.group(1)}"):
                continue
            found.append(f"{f'{where}/{path}' if path else where}: {error.message[:300]}")
        return found

    def validate_request(self, method: str, template: str, query: dict[str, Any], body: Any) -> Any:
        """Problems of the query parameters and the JSON body (``[]`` when valid)."""
        found, op = [], self.operation(method, template)
        if op is None:
            schema = EXTRA_OPERATIONS[method, template][1]
            return self.problems(f"{method} {template}", schema, body, "body") if schema else []
        for param in map(self._resolve, op.get("parameters", [])):
            name, schema = param["name"], param.get("schema", {})
            if param.get("in") != "query" or name not in query:
                continue
            value: Any = query[name]
            if schema.get("type") == "integer" and re.fullmatch(r"-?\d+", value):
                value = int(value)
            elif schema.get("type") == "boolean":
                value = {"true": True, "false": False}.get(value, value)
            found += self.problems(f"{method} {template} {name}", schema, value, f"query/{name}")
        spec = op.get("requestBody") or {}
        schema = spec.get("content", {}).get("application/json", {}).get("schema")
        if schema is not None and (body is not None or spec.get("required")):
            found += self.problems(f"{method} {template} body", schema, body, "body")
        return found

    def validate_response(self, method: str, template: str, status: int, body: Any) -> list[str]:
        """Problems of a JSON answer against the schema for ``status`` (``[]``: none)."""
        responses = (self.operation(method, template) or {}).get("responses", {})
        content = self._resolve(responses.get(str(status), {})).get("content", {})
        schema = content.get("application/json", {}).get("schema")
        where = f"{method} {template} {status}"
        return self.problems(where, schema, body, where) if schema else []

    def validate_schema(self, name: str, instance: Any) -> list[str]:
        """Problems of ``instance`` against ``#/components/schemas/<name>``."""
        return self.problems(name, {"$ref": f"{ROOT}#/components/schemas/{name}"}, instance, name)


@cache
def load_spec() -> Spec:
    """The fixtures' description, parsed once per process."""
    return Spec(json.loads((fixtures_dir() / "rest-api-subset.json").read_text(encoding="utf-8")))
