"""Handlers: check runs, workflows, dispatches, workflow runs and artifacts."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import datetime
from typing import Any

from .model import Artifact, CheckRun, Workflow, WorkflowRun, now
from .routing import ROUTER, ApiError, Ctx, Reply, not_found

REPO = "/repos/{owner}/{repo}"
DOWNLOAD_PREFIX = "/_fake/artifacts/"
"""Where ``actions/artifacts/{id}/zip`` redirects (GitHub sends a signed blob-storage URL)."""


def artifact_zip(artifact: Artifact) -> bytes:
    """The artifact's files in a zip, byte-for-byte stable."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(artifact.files.items()):
            archive.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


def _timestamp(value: Any) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


# -- check runs --------------------------------------------------------------------------------


def _apply_check_fields(run: CheckRun, body: dict[str, Any]) -> None:
    for key in ("name", "details_url", "external_id", "status"):
        if key in body:
            setattr(run, key, body[key])
    if "started_at" in body:
        run.started_at = _timestamp(body["started_at"])
    if "completed_at" in body:
        run.completed_at = _timestamp(body["completed_at"])
    output = body.get("output") or {}
    for key in ("title", "summary", "text"):
        if key in output:
            setattr(run, key, output[key])
    if body.get("conclusion") is not None:
        run.conclusion, run.status = body["conclusion"], "completed"
    if run.status == "completed":
        run.completed_at = run.completed_at or now()
    elif run.status == "in_progress":
        run.started_at = run.started_at or now()


@ROUTER.route("POST", REPO + "/check-runs")
def create_check_run(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    body = ctx.body if isinstance(ctx.body, dict) else {}
    if ctx.state.store.get(body.get("head_sha", "")) is None:
        raise ApiError(422, f"No commit found for SHA: {body.get('head_sha')}")
    run = ctx.state.add_check_run(repo, body["name"], body["head_sha"], started_at=now())
    _apply_check_fields(run, body)
    return Reply(201, ctx.render.check_run(run))


@ROUTER.route("PATCH", REPO + "/check-runs/{check_run_id}")
def update_check_run(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    run = ctx.state.all_check_runs.get(int(ctx.params["check_run_id"]))
    if run is None or run.repo != repo.full_name:
        raise not_found()
    _apply_check_fields(run, ctx.body if isinstance(ctx.body, dict) else {})
    return Reply(200, ctx.render.check_run(run))


@ROUTER.route("GET", REPO + "/commits/{ref}/check-runs")
def list_check_runs(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    sha = ctx.state.resolve(ctx.params["ref"], repo.full_name)
    if sha is None:
        raise ApiError(422, f"No commit found for SHA: {ctx.params['ref']}")
    runs = sorted(ctx.state.check_runs(sha, repo.full_name), key=lambda r: r.id, reverse=True)
    if "check_name" in ctx.query:
        runs = [r for r in runs if r.name == ctx.query["check_name"]]
    if "status" in ctx.query:
        runs = [r for r in runs if r.status == ctx.query["status"]]
    if ctx.query.get("filter", "latest") == "latest":
        latest: dict[str, CheckRun] = {}
        for run in runs:
            latest.setdefault(run.name, run)
        runs = list(latest.values())
    return ctx.paginate([ctx.render.check_run(r) for r in runs], wrap="check_runs")


# -- workflows and dispatches ------------------------------------------------------------------


def _workflow(ctx: Ctx) -> Workflow:
    found = ctx.state.workflow(ctx.params["workflow_id"], ctx.repo().full_name)
    if found is None:
        raise not_found()
    return found


@ROUTER.route("GET", REPO + "/actions/workflows")
def list_workflows(ctx: Ctx) -> Reply:
    workflows = ctx.state.workflows(ctx.repo().full_name)
    return ctx.paginate([ctx.render.workflow(w) for w in workflows], wrap="workflows")


@ROUTER.route("GET", REPO + "/actions/workflows/{workflow_id}")
def get_workflow(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.workflow(_workflow(ctx)))


@ROUTER.route("POST", REPO + "/actions/workflows/{workflow_id}/dispatches")
def dispatch_workflow(ctx: Ctx) -> Reply:
    repo = ctx.repo()
    workflow = _workflow(ctx)
    ref = ctx.field("ref", "")
    inputs: dict[str, Any] = dict(ctx.field("inputs") or {})
    if not workflow.dispatchable:
        raise ApiError(422, "Workflow does not have 'workflow_dispatch' trigger")
    if ctx.state.resolve(ref, repo.full_name) is None:
        raise ApiError(422, f"No ref found for: {ref}")
    if workflow.inputs_declared:
        unexpected = sorted(set(inputs) - set(workflow.inputs))
        if unexpected:
            raise ApiError(422, f"Unexpected inputs provided: {json.dumps(unexpected)}")
        for name, spec in workflow.inputs.items():
            spec = spec if isinstance(spec, dict) else {}
            if spec.get("required") and "default" not in spec and name not in inputs:
                raise ApiError(422, f"Required input '{name}' not provided")
    run = ctx.state.record_dispatch(workflow, ref, inputs, repo.full_name)
    if ctx.field("return_run_details"):
        body = {
            "workflow_run_id": run.id,
            "run_url": f"{ctx.render.repo_api(repo)}/actions/runs/{run.id}",
            "html_url": f"{ctx.render.repo_html(repo)}/actions/runs/{run.id}",
        }
        return Reply(200, body)
    return Reply(204)


# -- runs and artifacts ------------------------------------------------------------------------


def _filter_runs(ctx: Ctx, runs: list[WorkflowRun]) -> Reply:
    query = ctx.query
    if "event" in query:
        runs = [r for r in runs if r.event == query["event"]]
    if "branch" in query:
        runs = [r for r in runs if r.head_branch == query["branch"]]
    if "status" in query:
        runs = [r for r in runs if query["status"] in (r.status, r.conclusion)]
    if "head_sha" in query:
        runs = [r for r in runs if r.head_sha == query["head_sha"]]
    if "actor" in query:
        runs = [r for r in runs if r.actor.lower() == query["actor"].lower()]
    if "check_suite_id" in query:
        runs = [r for r in runs if str(r.check_suite_id) == query["check_suite_id"]]
    runs = sorted(runs, key=lambda r: r.id, reverse=True)
    return ctx.paginate([ctx.render.workflow_run(r) for r in runs], wrap="workflow_runs")


@ROUTER.route("GET", REPO + "/actions/workflows/{workflow_id}/runs")
def list_workflow_runs(ctx: Ctx) -> Reply:
    workflow = _workflow(ctx)
    runs = ctx.state.runs(ctx.repo().full_name)
    return _filter_runs(ctx, [r for r in runs if r.workflow_id == workflow.id])


@ROUTER.route("GET", REPO + "/actions/runs")
def list_repo_runs(ctx: Ctx) -> Reply:
    return _filter_runs(ctx, ctx.state.runs(ctx.repo().full_name))


def _run(ctx: Ctx) -> WorkflowRun:
    found = ctx.state.all_runs.get(int(ctx.params["run_id"]))
    if found is None or found.repo != ctx.repo().full_name:
        raise not_found()
    return found


@ROUTER.route("GET", REPO + "/actions/runs/{run_id}")
def get_run(ctx: Ctx) -> Reply:
    return Reply(200, ctx.render.workflow_run(_run(ctx)))


@ROUTER.route("GET", REPO + "/actions/runs/{run_id}/artifacts")
def list_run_artifacts(ctx: Ctx) -> Reply:
    artifacts = ctx.state.artifacts(_run(ctx).id)
    if "name" in ctx.query:
        artifacts = [a for a in artifacts if a.name == ctx.query["name"]]
    rendered = [ctx.render.artifact(a, artifact_zip(a)) for a in artifacts]
    return ctx.paginate(rendered, wrap="artifacts")


def _artifact(ctx: Ctx) -> Artifact:
    found = ctx.state.all_artifacts.get(int(ctx.params["artifact_id"]))
    if found is None or found.repo != ctx.repo().full_name:
        raise not_found()
    return found


@ROUTER.route("GET", REPO + "/actions/artifacts/{artifact_id}")
def get_artifact(ctx: Ctx) -> Reply:
    artifact = _artifact(ctx)
    return Reply(200, ctx.render.artifact(artifact, artifact_zip(artifact)))


@ROUTER.route("GET", REPO + "/actions/artifacts/{artifact_id}/zip")
def download_artifact(ctx: Ctx) -> Reply:
    artifact = _artifact(ctx)
    signature = ctx.state.sign(f"artifact:{artifact.id}")
    location = f"{ctx.base}{DOWNLOAD_PREFIX}{artifact.id}.zip?sig={signature}"
    return Reply(302, None, {"Location": location})


def serve_download(ctx: Ctx) -> Reply:
    """The redirect target: no token needed, the signature is the credential."""
    name = ctx.path.removeprefix(DOWNLOAD_PREFIX).removesuffix(".zip")
    artifact = ctx.state.all_artifacts.get(int(name)) if name.isdigit() else None
    if artifact is None or ctx.query.get("sig") != ctx.state.sign(f"artifact:{artifact.id}"):
        raise ApiError(404, "Not Found")
    return Reply(200, raw=artifact_zip(artifact), media_type="application/zip")
