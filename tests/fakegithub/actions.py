"""GitHub Actions in the fake: workflows, dispatches, runs and artifacts.

Workflows are the ``.github/workflows/*.yml`` files on a repository's default branch (``name:``,
``run-name:`` and ``on.workflow_dispatch.inputs`` are read from them), plus any a test registers
with ``register_workflow``. Nothing runs: a dispatch records a queued run, and the test plays the
runner::

    register_workflow(file_name, name=None, run_name=None, inputs=None, repo=None) -> Workflow
    workflows(repo=None) / workflow(id_or_file_name, repo=None)
    dispatches(repo=None) -> list[Dispatch]       # what the bot asked for
    runs(repo=None, workflow=None) / run(run_id)
    create_run(workflow, ref, event="push", inputs=None, repo=None) -> WorkflowRun
    start_run(run_id)                               # in_progress
    complete_run(run_id, conclusion="success", artifacts=None) -> WorkflowRun
    artifacts(run_id) / artifact(artifact_id)

``artifacts`` maps an artifact name to its bytes (served as a zip holding one file named like
the artifact) or to ``{member name: bytes}`` (a zip with those members).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .core import StateCore
from .model import Artifact, CheckRun, Dispatch, Repo, Workflow, WorkflowRun, now

WORKFLOWS_DIR = ".github/workflows/"
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def parse_workflow(path: str, text: str) -> dict[str, Any]:
    """``name``, ``run_name``, ``inputs`` and ``dispatchable`` of a workflow file."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        doc = None
    if not isinstance(doc, dict):
        return {"name": path, "run_name": None, "inputs": {}, "dispatchable": False}
    triggers = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True
    dispatch: Any = None
    if isinstance(triggers, dict):
        dispatch = triggers.get("workflow_dispatch", False)
    elif isinstance(triggers, str | list):
        dispatch = {} if "workflow_dispatch" in triggers else False
    inputs = dispatch.get("inputs") if isinstance(dispatch, dict) else None
    return {
        "name": str(doc.get("name") or path),
        "run_name": doc.get("run-name"),
        "inputs": dict(inputs) if isinstance(inputs, dict) else {},
        "dispatchable": dispatch is not False,
    }


def _stringify(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def render_expression(template: str, context: dict[str, Any]) -> str:
    """``${{ inputs.x }}``-style substitution (unknown expressions render empty, as on
    GitHub). ``context`` maps dotted names (``inputs.x``, ``github.ref_name``) to values."""

    def one(match: re.Match[str]) -> str:
        expression = match.group(1)
        expression = expression.replace("github.event.inputs.", "inputs.")
        return _stringify(context.get(expression))

    return _EXPRESSION.sub(one, template)


class ActionsMixin(StateCore):
    """Workflows, runs and artifacts; mixed into ``FakeState``."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.registered_workflows: dict[tuple[str, str], Workflow] = {}
        self._workflow_ids: dict[tuple[str, str], int] = {}
        self.all_dispatches: list[Dispatch] = []
        self.all_runs: dict[int, WorkflowRun] = {}
        self.all_artifacts: dict[int, Artifact] = {}

    # -- workflows -----------------------------------------------------------------------------

    def _workflow_id(self, target: Repo, path: str) -> int:
        key = (target.full_name, path)
        if key not in self._workflow_ids:
            self._workflow_ids[key] = self.next_id()
        return self._workflow_ids[key]

    def _from_file(self, target: Repo, path: str, text: str) -> Workflow:
        parsed = parse_workflow(path, text)
        return Workflow(self._workflow_id(target, path), target.full_name, path, **parsed)

    def register_workflow(
        self,
        file_name: str,
        name: str | None = None,
        run_name: str | None = None,
        inputs: dict[str, dict[str, Any]] | None = None,
        repo: str | None = None,
    ) -> Workflow:
        """A workflow known without a file in the repository (``inputs=None``: any inputs)."""
        with self.lock:
            target = self.repo(repo)
            path = WORKFLOWS_DIR + file_name
            workflow = Workflow(
                self._workflow_id(target, path),
                target.full_name,
                path,
                name or file_name,
                run_name,
                dict(inputs or {}),
            )
            workflow.inputs_declared = inputs is not None
            self.registered_workflows[(target.full_name, path)] = workflow
            return workflow

    def workflows(self, repo: str | None = None) -> list[Workflow]:
        """Files under ``.github/workflows/`` on the default branch, then registered ones."""
        with self.lock:
            target = self.repo(repo)
            found: dict[str, Workflow] = {}
            snapshot = self.store.commits[target.branches[target.default_branch]].files
            for path, text in snapshot.items():
                rest = path.removeprefix(WORKFLOWS_DIR)
                top_level = path.startswith(WORKFLOWS_DIR) and "/" not in rest
                if top_level and rest.endswith((".yml", ".yaml")):
                    found[path] = self._from_file(target, path, text)
            for (owner, path), workflow in self.registered_workflows.items():
                if owner == target.full_name:
                    found.setdefault(path, workflow)
            return [found[path] for path in sorted(found)]

    def workflow(self, id_or_file_name: str | int, repo: str | None = None) -> Workflow | None:
        """A workflow by id or file name."""
        for workflow in self.workflows(repo):
            if str(id_or_file_name) in (str(workflow.id), workflow.file_name):
                return workflow
        return None

    # -- runs ----------------------------------------------------------------------------------

    def create_run(
        self,
        workflow: Workflow | str,
        ref: str,
        event: str = "push",
        inputs: dict[str, Any] | None = None,
        actor: str | None = None,
        repo: str | None = None,
    ) -> WorkflowRun:
        """A queued run of ``workflow`` (object or file name) at branch or sha ``ref``.
        Its display title is the workflow's ``run-name`` (read from the file at ``ref`` when
        there is one) with ``${{ inputs.* }}`` filled, else the workflow's name."""
        with self.lock:
            target = self.repo(repo)
            if isinstance(workflow, str):
                found = self.workflow(workflow, target.full_name)
                if found is None:
                    raise KeyError(f"no workflow {workflow!r}")
                workflow = found
            sha = self.resolve(ref, target.full_name)
            if sha is None:
                raise KeyError(f"unknown ref {ref!r}")
            definition = workflow
            text = self.store.commits[sha].files.get(workflow.path)
            if text is not None:
                definition = self._from_file(target, workflow.path, text)
            values = {
                key: spec.get("default")
                for key, spec in definition.inputs.items()
                if isinstance(spec, dict) and "default" in spec
            }
            values.update(inputs or {})
            branch = ref.removeprefix("refs/heads/")
            head_branch = branch if branch in target.branches else None
            actor = actor or self.bot_login
            self.user(actor)
            context: dict[str, Any] = {f"inputs.{key}": value for key, value in values.items()}
            context.update(
                {
                    "github.ref_name": head_branch or sha,
                    "github.actor": actor,
                    "github.triggering_actor": actor,
                    "github.event_name": event,
                    "github.workflow": definition.name,
                    "github.sha": sha,
                }
            )
            title = definition.name
            if definition.run_name:
                title = render_expression(str(definition.run_name), context)
            stamp = now()
            number = 1 + sum(1 for r in self.all_runs.values() if r.workflow_id == workflow.id)
            run = WorkflowRun(
                id=self.next_id(),
                repo=target.full_name,
                workflow_id=workflow.id,
                name=definition.name,
                display_title=title,
                event=event,
                head_sha=sha,
                head_branch=head_branch,
                path=workflow.path,
                run_number=number,
                actor=actor,
                created_at=stamp,
                updated_at=stamp,
                inputs=values,
                check_suite_id=self.next_id(),
            )
            self.all_runs[run.id] = run
            return run

    def record_dispatch(
        self, workflow: Workflow, ref: str, inputs: dict[str, Any], repo: str | None = None
    ) -> WorkflowRun:
        """What ``POST .../dispatches`` does: a queued ``workflow_dispatch`` run, recorded."""
        with self.lock:
            run = self.create_run(workflow, ref, "workflow_dispatch", inputs, repo=repo)
            self.all_dispatches.append(
                Dispatch(run.repo, workflow.file_name, ref, dict(inputs), run.id, run.created_at)
            )
            return run

    def dispatches(self, repo: str | None = None) -> list[Dispatch]:
        with self.lock:
            key = self.repo(repo).full_name
            return [d for d in self.all_dispatches if d.repo == key]

    def runs(self, repo: str | None = None, workflow: str | None = None) -> list[WorkflowRun]:
        """Runs, oldest first; ``workflow`` filters by file name."""
        with self.lock:
            key = self.repo(repo).full_name
            return [
                r
                for r in self.all_runs.values()
                if r.repo == key and (workflow is None or r.path.endswith("/" + workflow))
            ]

    def run(self, run_id: int) -> WorkflowRun:
        return self.all_runs[run_id]

    def job_check_run(self, run_id: int, name: str, conclusion: str, summary: str = "") -> CheckRun:
        """A completed check run posted by a job of workflow run ``run_id``, as GitHub Actions
        does: app ``github-actions``, in the run's check suite, on the run's head commit."""
        with self.lock:
            run = self.all_runs[run_id]
            return self.add_check_run(
                self.repo(run.repo),
                name,
                run.head_sha,
                status="completed",
                conclusion=conclusion,
                summary=summary,
                title=name,
                started_at=now(),
                completed_at=now(),
                actions=True,
                check_suite_id=run.check_suite_id,
            )

    def start_run(self, run_id: int) -> WorkflowRun:
        with self.lock:
            run = self.all_runs[run_id]
            run.status, run.run_started_at, run.updated_at = "in_progress", now(), now()
            return run

    def complete_run(
        self,
        run_id: int,
        conclusion: str = "success",
        artifacts: dict[str, bytes | dict[str, bytes]] | None = None,
    ) -> WorkflowRun:
        """Finish a run with ``conclusion`` and upload ``artifacts``."""
        with self.lock:
            run = self.all_runs[run_id]
            stamp = now()
            run.status, run.conclusion, run.updated_at = "completed", conclusion, stamp
            run.run_started_at = run.run_started_at or stamp
            for name, content in (artifacts or {}).items():
                files = dict(content) if isinstance(content, dict) else {name: content}
                made = Artifact(self.next_id(), run.id, run.repo, name, files, stamp)
                self.all_artifacts[made.id] = made
            return run

    def artifacts(self, run_id: int) -> list[Artifact]:
        with self.lock:
            return [a for a in self.all_artifacts.values() if a.run_id == run_id]

    def artifact(self, artifact_id: int) -> Artifact:
        return self.all_artifacts[artifact_id]
