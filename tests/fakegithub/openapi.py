"""GitHub's REST description (``rest-api-subset.json``, a trimmed OpenAPI 3.0 subset): the
operations the fake may serve, the schemas requests and responses are checked against, and the
examples response bodies start from.

OpenAPI 3.0 is not JSON Schema: ``nullable: true`` becomes a ``null`` member of ``type`` (or of
``enum``), and every ``#/components/...`` reference is made absolute so that any sub-schema
resolves through one ``referencing.Registry``.
"""

from __future__ import annotations

import copy
import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator
from referencing import Registry
from referencing.jsonschema import DRAFT7

ROOT_URI = "urn:github-rest-api-subset"
KNOWN_GAPS = (
    r"(^|/)requested_teams/\d+:type$",
    r"^(user)?:role_name$",
    r"(^|/)source:language$",
    r"(^|/)required_status_checks:checks$",
)
"""``<path>:<missing property>`` of ``required`` errors GitHub's own examples have (SOURCES.md)."""

_LABELS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
EXTRA_OPERATIONS: dict[tuple[str, str], dict[str, Any] | None] = {
    ("GET", "/repos/{owner}/{repo}/commits/{ref}"): None,
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/labels"): None,
    ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels"): {
        "oneOf": [
            {"type": "object", "properties": {"labels": _LABELS}, "required": ["labels"]},
            _LABELS,
        ]
    },
    ("GET", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}"): None,
    ("POST", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches"): {
        "type": "object",
        "properties": {
            "ref": {"type": "string"},
            "inputs": {"type": "object", "maxProperties": 25},
            "return_run_details": {"type": "boolean"},
        },
        "required": ["ref"],
    },
    ("GET", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs"): None,
    ("GET", "/repos/{owner}/{repo}/actions/runs"): None,
    ("GET", "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/zip"): None,
}
"""Real GitHub operations the fake serves that the subset lacks, with the JSON body schema
each accepts (``None``: no body)."""


def fixtures_dir() -> Path:
    """``$ATTUNE_GITHUB_FIXTURES``, else ``tests/fixtures/github`` (``SOURCES.md`` there says
    where each file came from)."""
    override = os.environ.get("ATTUNE_GITHUB_FIXTURES")
    return Path(override) if override else Path(__file__).resolve().parents[1] / "fixtures/github"


def _to_json_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith("#/"):
            out[key] = ROOT_URI + value
        elif not (key == "nullable" and isinstance(value, bool)):
            out[key] = _to_json_schema(value)
    if node.get("nullable") is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif "type" not in out:
            out = {"anyOf": [out, {"type": "null"}]}
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


class Spec:
    """The loaded description: operations, converted schemas, examples and validators."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.examples: dict[str, Any] = document["components"].get("examples", {})
        self.converted: dict[str, Any] = _to_json_schema(
            {"paths": document["paths"], "components": document["components"]}
        )
        self.registry: Registry[Any] = Registry().with_resource(
            ROOT_URI, DRAFT7.create_resource(self.converted)
        )
        self._validators: dict[str, Draft7Validator] = {}

    def operation(self, method: str, template: str) -> dict[str, Any] | None:
        item = self.converted["paths"].get(template)
        return None if item is None else item.get(method.lower())

    def example(self, name: str) -> Any:
        """A deep copy of the value of ``#/components/examples/<name>``."""
        return copy.deepcopy(self.examples[name]["value"])

    def _resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target: Any = self.converted
            for part in node["$ref"].removeprefix(ROOT_URI + "#/").split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def problems(self, key: str, schema: dict[str, Any], instance: Any, where: str) -> list[str]:
        """What is wrong with ``instance`` against ``schema`` (validator cached as ``key``)."""
        if key not in self._validators:
            self._validators[key] = Draft7Validator(schema, registry=self.registry)
        found = []
        for error in self._validators[key].iter_errors(instance):
            path = "/".join(str(part) for part in error.absolute_path)
            if error.validator == "oneOf" and "is valid under each of" in error.message:
                continue  # the description's loose oneOf (e.g. two all-optional error shapes)
            missing = re.match(r"'(.+)' is a required property", error.message)
            if missing and any(re.search(g, f"{path}:{missing.group(1)}") for g in KNOWN_GAPS):
                continue
            found.append(f"{f'{where}/{path}' if path else where}: {error.message[:300]}")
        return found

    def validate_request(
        self, method: str, template: str, query: dict[str, str], body: Any, has_body: bool
    ) -> list[str]:
        """Problems of the query parameters and the JSON body (``[]`` when valid)."""
        op = self.operation(method, template)
        if op is None:
            schema = EXTRA_OPERATIONS.get((method, template))
            if schema is None:
                return []
            if not has_body:
                return ["body: a JSON body is required"]
            return self.problems(f"extra {method} {template}", schema, body, "body")
        found: list[str] = []
        for param in map(self._resolve, op.get("parameters", [])):
            name = param["name"]
            if param.get("in") != "query" or name not in query:
                continue
            schema, value = param.get("schema", {}), query[name]
            typed: Any = value
            if schema.get("type") == "integer":
                if not value.lstrip("-").isdigit():
                    found.append(f"query/{name}: {value!r} is not an integer")
                    continue
                typed = int(value)
            elif schema.get("type") == "boolean":
                typed = {"true": True, "false": False}.get(value, value)
            found += self.problems(f"{method} {template} {name}", schema, typed, f"query/{name}")
        spec = op.get("requestBody") or {}
        schema = spec.get("content", {}).get("application/json", {}).get("schema")
        if schema is not None and has_body:
            found += self.problems(f"request {method} {template}", schema, body, "body")
        elif schema is not None and spec.get("required"):
            found.append("body: a JSON body is required")
        return found

    def validate_response(self, method: str, template: str, status: int, body: Any) -> list[str]:
        """Problems of a JSON response body against the description's schema for ``status``
        (``[]`` when it has none)."""
        response = ((self.operation(method, template) or {}).get("responses") or {}).get(
            str(status)
        )
        content = self._resolve(response or {}).get("content", {})
        schema = content.get("application/json", {}).get("schema")
        if schema is None:
            return []
        where = f"{method} {template} {status}"
        return self.problems(f"response {where}", schema, body, where)

    def validate_schema(self, name: str, instance: Any) -> list[str]:
        """Problems of ``instance`` against ``#/components/schemas/<name>``."""
        schema = {"$ref": f"{ROOT_URI}#/components/schemas/{name}"}
        return self.problems(f"schema {name}", schema, instance, name)


@cache
def load_spec(path: str | None = None) -> Spec:
    """The description at ``path`` (default: the fixtures' ``rest-api-subset.json``), parsed
    once per process."""
    source = Path(path) if path else fixtures_dir() / "rest-api-subset.json"
    return Spec(json.loads(source.read_text(encoding="utf-8")))
