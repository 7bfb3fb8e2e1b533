"""GitHub's REST description (``rest-api-subset.json``, a trimmed OpenAPI 3.0 subset): the
operations the fake may serve, the schemas requests and responses are checked against and the
examples bodies start from. OpenAPI 3.0 is not JSON Schema: ``nullable: true`` becomes a
``null`` type (or enum member), and ``#/components/...`` references are made absolute so that
any sub-schema resolves through one ``referencing.Registry``.
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
_R, _LABELS = "/repos/{owner}/{repo}", {"type": "array", "items": {"type": "string"}}
EXTRA_OPERATIONS: dict[tuple[str, str], Any] = {
    ("GET", _R + "/commits/{ref}"): None,
    ("GET", _R + "/issues/{issue_number}/labels"): None,
    ("POST", _R + "/issues/{issue_number}/labels"): {
        "oneOf": [{"properties": {"labels": _LABELS}, "required": ["labels"]}, _LABELS]
    },
    ("GET", _R + "/actions/workflows/{workflow_id}"): None,
    ("POST", _R + "/actions/workflows/{workflow_id}/dispatches"): {
        "type": "object",
        "properties": {"ref": {"type": "string"}, "inputs": {"maxProperties": 25}},
        "required": ["ref"],
    },
    ("GET", _R + "/actions/workflows/{workflow_id}/runs"): None,
    ("GET", _R + "/actions/runs"): None,
    ("GET", _R + "/actions/artifacts/{artifact_id}/zip"): None,
}
"""Real GitHub operations the subset lacks, with the JSON body each takes (``None``: none)."""


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


class Spec:
    """The loaded description: operations, converted schemas, examples and validators."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.examples: dict[str, Any] = document["components"]["examples"]
        parts = {k: v for k, v in document["components"].items() if k != "examples"}
        self.converted: dict[str, Any] = _to_json_schema({**document, "components": parts})
        resource = DRAFT7.create_resource(self.converted)
        self.registry: Registry[Any] = Registry().with_resource(ROOT, resource)
        self._validators: dict[str, Draft7Validator] = {}

    def operation(self, method: str, template: str) -> Any:
        return self.converted["paths"].get(template, {}).get(method.lower())

    def _resolve(self, node: Any) -> Any:
        while "$ref" in node:
            pointer, node = node["$ref"].removeprefix(ROOT + "#/"), self.converted
            for part in pointer.split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
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
            schema = EXTRA_OPERATIONS.get((method, template))
            return (
                []
                if schema is None
                else self.problems(f"{method} {template}", schema, body, "body")
            )
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
        return [] if schema is None else self.problems(where, schema, body, where)

    def validate_schema(self, name: str, instance: Any) -> list[str]:
        """Problems of ``instance`` against ``#/components/schemas/<name>``."""
        schema = {"$ref": f"{ROOT}#/components/schemas/{name}"}
        return self.problems(f"schema {name}", schema, instance, name)


@cache
def load_spec(path: str | None = None) -> Spec:
    """The description at ``path`` (default: the fixtures'), parsed once per process."""
    source = Path(path) if path else fixtures_dir() / "rest-api-subset.json"
    return Spec(json.loads(source.read_text(encoding="utf-8")))
