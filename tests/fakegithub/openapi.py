"""GitHub's REST description (a trimmed OpenAPI 3.0 subset) as validators and response templates.

``Spec`` loads ``rest-api-subset.json`` from the GitHub fixtures folder (see ``fixtures_dir``)
once per process. It answers:

* ``operation(method, template)``: the description's operation, or ``None``;
* ``validate_request(method, template, query, body)``: problems with the query parameters and the
  JSON body, checked against the operation's parameter and ``requestBody`` schemas (the
  operations the fake serves beyond the description declare their own body schema in
  ``EXTRA_OPERATIONS``);
* ``validate_response(method, template, status, body)``: problems of a response body against the
  schema of that status, minus the known gaps of GitHub's own examples (``KNOWN_GAPS``);
* ``validate_schema(name, instance)``: problems against ``#/components/schemas/<name>``;
* ``example(name)``: a fresh copy of ``#/components/examples/<name>``'s value.

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

FIXTURES_ENV = "ATTUNE_GITHUB_FIXTURES"
ROOT_URI = "urn:github-rest-api-subset"

KNOWN_GAPS: tuple[str, ...] = (
    r"(^|/)requested_teams/\d+:type$",
    r"^(user)?:role_name$",
    r"(^|/)source:language$",
    r"(^|/)required_status_checks:checks$",
)
"""``<path>:<missing property>`` of ``required`` errors GitHub's own examples have (SOURCES.md)."""

_STRING_LIST = {"type": "array", "items": {"type": "string"}}
_LABELS_BODY: dict[str, Any] = {
    "oneOf": [
        {"type": "object", "properties": {"labels": _STRING_LIST}, "required": ["labels"]},
        _STRING_LIST,
    ]
}

EXTRA_OPERATIONS: dict[tuple[str, str], dict[str, Any] | None] = {
    ("GET", "/repos/{owner}/{repo}/branches/{branch}"): None,
    ("GET", "/repos/{owner}/{repo}/commits/{ref}"): None,
    ("DELETE", "/repos/{owner}/{repo}/git/refs/{ref}"): None,
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}"): None,
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/labels"): None,
    ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/labels"): _LABELS_BODY,
    ("PUT", "/repos/{owner}/{repo}/issues/{issue_number}/labels"): _LABELS_BODY,
    ("DELETE", "/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}"): None,
    ("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}"): None,
    ("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions"): None,
    ("GET", "/repos/{owner}/{repo}/actions/workflows"): None,
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
    ("GET", "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}"): None,
    ("GET", "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/zip"): None,
}
"""Operations the fake serves that the description subset lacks (real GitHub endpoints), with
the JSON body schema each accepts (``None``: no body)."""

EXTRA_MULTI_SEGMENT = frozenset({"branch", "ref"})
"""Path parameters of extra operations that may contain slashes (branch names, refs)."""


def fixtures_dir() -> Path:
    """The GitHub fixtures folder: ``$ATTUNE_GITHUB_FIXTURES``, else ``tests/fixtures/github``
    (in the repository; ``SOURCES.md`` there says where each file came from)."""
    override = os.environ.get(FIXTURES_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1] / "fixtures" / "github"


def _to_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema objects to JSON Schema: ``nullable`` and absolute refs."""
    if isinstance(node, list):
        return [_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "nullable" and isinstance(value, bool):
            continue
        if key == "$ref" and isinstance(value, str) and value.startswith("#/"):
            out[key] = ROOT_URI + value
        else:
            out[key] = _to_json_schema(value)
    if node.get("nullable") is True:
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif kind is None:
            out = {"anyOf": [out, {"type": "null"}]}
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    return out


def _error_path(path: Any) -> str:
    return "/".join(str(part) for part in path)


class Spec:
    """The loaded description: operations, converted schemas, examples and validators."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.examples: dict[str, Any] = document["components"].get("examples", {})
        converted = {
            "paths": _to_json_schema(document["paths"]),
            "components": {
                key: _to_json_schema(value)
                for key, value in document["components"].items()
                if key != "examples"
            },
        }
        self.converted = converted
        self.registry: Registry[Any] = Registry().with_resource(
            ROOT_URI, DRAFT7.create_resource(converted)
        )
        self._validators: dict[str, Draft7Validator] = {}

    # -- lookups -------------------------------------------------------------------------------

    def templates(self) -> list[tuple[str, str]]:
        """Every ``(METHOD, path template)`` of the description."""
        return [
            (method.upper(), path)
            for path, item in self.document["paths"].items()
            for method in item
            if method != "parameters"
        ]

    def operation(self, method: str, template: str) -> dict[str, Any] | None:
        item = self.converted["paths"].get(template)
        return None if item is None else item.get(method.lower())

    def multi_segment(self, template: str) -> set[str]:
        """Path parameters of ``template`` that may hold slashes (``x-multi-segment``)."""
        names: set[str] = set()
        for method, path in self.templates():
            if path != template:
                continue
            for param in self._parameters(method, template):
                if param.get("in") == "path" and param.get("x-multi-segment"):
                    names.add(param["name"])
        return names

    def example(self, name: str) -> Any:
        """A deep copy of the value of ``#/components/examples/<name>``."""
        return copy.deepcopy(self.examples[name]["value"])

    def _resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            pointer = node["$ref"].removeprefix(ROOT_URI + "#/").split("/")
            target: Any = self.converted
            for part in pointer:
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def _parameters(self, method: str, template: str) -> list[dict[str, Any]]:
        op = self.operation(method, template) or {}
        return [self._resolve(param) for param in op.get("parameters", [])]

    def _validator(self, key: str, schema: dict[str, Any]) -> Draft7Validator:
        validator = self._validators.get(key)
        if validator is None:
            validator = Draft7Validator(schema, registry=self.registry)
            self._validators[key] = validator
        return validator

    def _problems(self, validator: Draft7Validator, instance: Any, where: str) -> list[str]:
        problems = []
        for error in validator.iter_errors(instance):
            path = _error_path(error.absolute_path)
            message = error.message if len(error.message) < 300 else error.message[:300] + "..."
            if error.validator == "oneOf" and "is valid under each of" in error.message:
                continue  # the description's loose oneOf (e.g. two all-optional error shapes)
            if error.validator == "required":
                match = re.match(r"'(.+)' is a required property", error.message)
                missing = match.group(1) if match else ""
                if any(re.search(gap, f"{path}:{missing}") for gap in KNOWN_GAPS):
                    continue
            problems.append(f"{where}/{path}: {message}" if path else f"{where}: {message}")
        return problems

    # -- validation ----------------------------------------------------------------------------

    def validate_request(
        self, method: str, template: str, query: dict[str, str], body: Any, has_body: bool
    ) -> list[str]:
        """Problems of the query parameters and the JSON body (``[]`` when valid)."""
        problems: list[str] = []
        op = self.operation(method, template)
        if op is None:
            extra = EXTRA_OPERATIONS.get((method, template))
            if extra is not None and has_body:
                key = f"extra {method} {template}"
                problems += self._problems(self._validator(key, extra), body, "body")
            elif extra is not None:
                problems.append("body: a JSON body is required")
            return problems
        for param in self._parameters(method, template):
            if param.get("in") != "query" or param["name"] not in query:
                continue
            schema = param.get("schema", {})
            value: Any = query[param["name"]]
            if schema.get("type") == "integer":
                try:
                    value = int(value)
                except ValueError:
                    problems.append(f"query/{param['name']}: {value!r} is not an integer")
                    continue
            elif schema.get("type") == "boolean":
                value = {"true": True, "false": False}.get(value, value)
            key = f"param {method} {template} {param['name']}"
            problems += self._problems(
                self._validator(key, schema), value, f"query/{param['name']}"
            )
        body_spec = op.get("requestBody")
        if body_spec is None:
            return problems
        schema = body_spec.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            return problems
        if not has_body:
            if body_spec.get("required"):
                problems.append("body: a JSON body is required")
            return problems
        key = f"request {method} {template}"
        return problems + self._problems(self._validator(key, schema), body, "body")

    def response_schema(self, method: str, template: str, status: int) -> dict[str, Any] | None:
        op = self.operation(method, template)
        if op is None:
            return None
        response = op.get("responses", {}).get(str(status))
        if response is None:
            return None
        schema: dict[str, Any] | None = (
            self._resolve(response).get("content", {}).get("application/json", {}).get("schema")
        )
        return schema

    def validate_response(self, method: str, template: str, status: int, body: Any) -> list[str]:
        """Problems of a JSON response body against the description ( ``[]`` when valid or
        when the description has no JSON schema for that status)."""
        schema = self.response_schema(method, template, status)
        if schema is None:
            return []
        key = f"response {method} {template} {status}"
        return self._problems(self._validator(key, schema), body, f"{method} {template} {status}")

    def validate_schema(self, name: str, instance: Any) -> list[str]:
        """Problems of ``instance`` against ``#/components/schemas/<name>``."""
        schema = {"$ref": f"{ROOT_URI}#/components/schemas/{name}"}
        return self._problems(self._validator(f"schema {name}", schema), instance, name)


@cache
def load_spec(path: str | None = None) -> Spec:
    """The description at ``path`` (default: ``fixtures_dir() / 'rest-api-subset.json'``)."""
    source = Path(path) if path else fixtures_dir() / "rest-api-subset.json"
    return Spec(json.loads(source.read_text(encoding="utf-8")))
