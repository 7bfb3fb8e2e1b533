"""GitHub mode under test: the fake GitHub, the real app under uvicorn, and a player of GitHub
Actions that runs the real ``attune gate check`` / ``attune bench`` for what the bot dispatches.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml
from github import Auth, Github

from bot.checks import GATE_CHECK
from bot.github.app import create_app
from bot.github.client import installation_clients
from bot.github.http_limits import uvicorn_config
from bot.github.service import GitHubCampaigns
from bot.github.settings import Settings
from tests.conftest import ATTUNE, SMALL_CONFIG
from tests.fakegithub import FakeGitHub

REPO_ROOT = Path(__file__).resolve().parents[1]
SECRET = "test-webhook-secret"
OWNER, NAME = "octo-org", "models"
FULL = f"{OWNER}/{NAME}"
RECIPE_PATH = "recipes/ported-gpt.yaml"
NO_WAIT: dict[str, Any] = {
    "retry": None,
    "seconds_between_requests": None,
    "seconds_between_writes": None,
}


def recipe_text(**over: Any) -> str:
    body = {"framework": "embedded", "name": "ported-gpt", "config": {**SMALL_CONFIG, **over}}
    return yaml.safe_dump(body, sort_keys=False)


def seed_repo(fake: FakeGitHub) -> int:
    """The repository as ``attune init`` leaves a training repository (its two workflows and
    ``.github/attune.yml``, pinned to ``ActionsPlayer.ATTUNE_REF``) plus a recipe; a tuned PR
    changing that recipe; and users: ``maintainer`` (write), ``reader`` (read). No registry or
    attune code is in it: the pinned attune brings those. Returns the tuned PR's number."""
    import contextlib
    import io
    import tempfile

    from bot.commands.init import init

    with tempfile.TemporaryDirectory() as folder, contextlib.redirect_stdout(io.StringIO()):
        if init(Path(folder), ref=ActionsPlayer.ATTUNE_REF, force=False, check=False) != 0:
            raise RuntimeError("attune init failed")
        installed = {
            path.relative_to(folder).as_posix(): path.read_text()
            for path in sorted(Path(folder).rglob("*"))
            if path.is_file()
        }
    fake.create_repo(OWNER, NAME, files={**installed, RECIPE_PATH: recipe_text()})
    fake.set_permission("maintainer", "write")
    fake.set_permission("reader", "read")
    fake.create_branch("tune-ported")
    fake.commit(
        "tune-ported",
        {RECIPE_PATH: recipe_text(activation_checkpointing=True)},
        message="Port the recipe",
        author="maintainer",
    )
    return fake.open_pull("tune-ported", "main", "Port ported-gpt", user="maintainer")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class App:
    """The real app, served by uvicorn on loopback."""

    def __init__(
        self, fake: FakeGitHub, tmp: Path, *, poll_s: float = 0.2, **overrides: Any
    ) -> None:
        key = tmp / "app.pem"
        key.write_text(fake.private_key_pem)
        self.settings = Settings(
            app_id=fake.app_id,
            private_key_path=key,
            webhook_secret=SECRET,
            ledger_path=tmp / "ledger.db",
            state_dir=tmp / "state",
            default_budget=0.01,
            allowed_repositories=[FULL],
            github_api_url=fake.url,
            poll_seconds=poll_s,
            forecast_seconds=3.0,
            **overrides,
        )
        clients = installation_clients(self.settings, **NO_WAIT)
        self.campaigns = GitHubCampaigns(self.settings, clients)
        app = create_app(self.settings, self.campaigns, clients)
        self.app = app
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(
            uvicorn_config(
                app, self.settings, host="127.0.0.1", port=port, log_level="warning", lifespan="on"
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> App:
        self.thread.start()
        deadline = time.time() + 10
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("the app did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        for running in self.campaigns.running.values():
            running.stop.set()
            running.wake.set()
        self.server.should_exit = True
        self.thread.join(timeout=10)


class ActionsPlayer:
    """Plays GitHub Actions: runs attune-gate for new candidate PRs (a run of the workflow whose
    job posts the ``attune/gate`` check run) and attune-bench for every dispatch (uploading
    ``result.json`` as the artifact and delivering ``workflow_run`` ``completed`` to the app).

    This checkout plays the attune commit the seeded workflows pin: like the actions, the player
    judges with its registry (``--registry REPO_ROOT/registry``), never with a folder of the
    repository, and reads recipes from the repository as data. A bench run is read from the
    dispatched workflow as the repository holds it: its declared inputs and their defaults, the
    ``with:`` of its ``attune/attune/actions/bench`` step and the name of its artifact."""

    ATTUNE_REF = "0123456789abcdef0123456789abcdef01234567"
    """The attune commit ``seed_repo`` pins the workflows to."""
    GATE_ACTION = f"attune/attune/actions/gate@{ATTUNE_REF}"
    BENCH_ACTION = f"attune/attune/actions/bench@{ATTUNE_REF}"

    def __init__(self, fake: FakeGitHub, app: App, tmp: Path) -> None:
        self.fake, self.app, self.tmp = fake, app, tmp
        self.done_runs: set[int] = set()
        self.gated: set[tuple[int, str]] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.errors: list[str] = []
        token = Auth.Token(fake.issue_token()[0])
        self.github = Github(base_url=fake.url, auth=token, **NO_WAIT)

    def __enter__(self) -> ActionsPlayer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=60)

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                self._gate_new_candidates()
                self._run_new_dispatches()
            except Exception as exc:  # recorded: the test asserts there were none
                self.errors.append(repr(exc))
            self.stop.wait(0.1)

    def _attune(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*ATTUNE, *args],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )

    def _workflow_step(self, ref: str, workflow: str, action: str) -> tuple[Any, Any, Any]:
        """(the workflow, the step using ``action``, the steps) of ``.github/workflows/
        <workflow>`` at ``ref``; an error when the file does not pin that action."""
        doc = yaml.safe_load(self.fake.files_at(ref)[f".github/workflows/{workflow}"])
        (job,) = doc["jobs"].values()
        steps = job["steps"]
        found = [s for s in steps if s.get("uses") == action]
        if len(found) != 1:
            raise AssertionError(f"{workflow} at {ref} does not use {action} once")
        return doc, found[0], steps

    def _gate_new_candidates(self) -> None:
        for pull in self.fake.pulls():
            if not pull.head.startswith("attune/") or pull.state != "open":
                continue
            key = (pull.number, pull.head_sha)
            if key in self.gated:
                continue
            self.gated.add(key)
            # the workflow of a pull_request event: the file of the pull request's head
            self._workflow_step(pull.head_sha, "attune-gate.yml", self.GATE_ACTION)
            work = self.tmp / f"gate-{pull.number}"
            work.mkdir(exist_ok=True)
            base = work / "base.yaml"
            cand = work / "cand.yaml"
            base.write_text(self.fake.files_at(self.fake.head(pull.base))[RECIPE_PATH])
            cand.write_text(self.fake.files_at(pull.head_sha)[RECIPE_PATH])
            registry = str(REPO_ROOT / "registry")  # the pinned attune's, as the action passes
            proc = self._attune(
                "gate", "check", str(base), str(cand), "--registry", registry, "--markdown"
            )
            # the check run is the gate job's own, in a run of the gate workflow on the head
            conclusion = "success" if proc.returncode == 0 else "failure"
            run = self.fake.create_run("attune-gate.yml", pull.head_sha, event="pull_request")
            self.fake.start_run(run.id)
            self.fake.job_check_run(run.id, GATE_CHECK, conclusion, proc.stdout or proc.stderr)
            self.fake.complete_run(run.id, conclusion)

    def _bench_run(self, dispatch: Any) -> tuple[dict[str, str], str, str]:
        """(the bench action's inputs, the artifact's name, its file name) of a dispatch, read
        from the dispatched workflow at the dispatch's ref."""
        from tests.fakegithub.state import render_expression

        doc, step, steps = self._workflow_step(dispatch.ref, dispatch.workflow, self.BENCH_ACTION)
        triggers = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True
        declared: dict[str, Any] = triggers["workflow_dispatch"]["inputs"]
        unknown = sorted(set(dispatch.inputs) - set(declared))
        if unknown:
            raise AssertionError(f"{dispatch.workflow} declares no input {unknown}")
        context: dict[str, Any] = {
            f"inputs.{name}": spec.get("default") for name, spec in declared.items()
        }
        context.update({f"inputs.{name}": value for name, value in dispatch.inputs.items()})
        missing = [
            n for n, spec in declared.items() if spec.get("required") and not context[f"inputs.{n}"]
        ]
        if missing:
            raise AssertionError(f"{dispatch.workflow}: required inputs {missing} not given")
        inputs = {k: render_expression(str(v), context) for k, v in step["with"].items()}
        (upload,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/upload-art")]
        name = render_expression(str(upload["with"]["name"]), context)
        return inputs, name, Path(str(upload["with"]["path"])).name

    def _run_new_dispatches(self) -> None:
        for dispatch in self.fake.dispatches():
            run_id = dispatch.run_id
            if run_id in self.done_runs:
                continue
            self.done_runs.add(run_id)
            inputs, artifact, member = self._bench_run(dispatch)
            self.fake.start_run(run_id)
            work = self.tmp / f"run-{run_id}"
            work.mkdir()
            # the action reads the recipe from the commit as data and benches it outside
            recipe = work / Path(inputs["recipe"]).name
            recipe.write_text(self.fake.files_at(inputs["sha"])[inputs["recipe"]])
            out = work / "result.json"
            profile = ["--profile"] if inputs.get("profile") == "true" else []
            proc = self._attune(
                "bench",
                str(recipe),
                *profile,
                "--steps",
                inputs["steps"],
                "--warmup",
                inputs["warmup"],
                "--out",
                str(out),
                "--trial",
                inputs["trial"],
                "--sha",
                inputs["sha"],
                "--workdir",
                str(work / "bench"),
            )
            artifacts: dict[str, bytes | dict[str, bytes]] = {}
            if out.exists():
                artifacts[artifact] = {member: out.read_bytes()}
            conclusion = "success" if proc.returncode == 0 else "failure"
            self.fake.complete_run(run_id, conclusion, artifacts)
            payload = self.fake.webhooks.workflow_run_completed(run_id)
            response = self.fake.webhooks.deliver(
                f"{self.app.url}/webhook", "workflow_run", payload, SECRET
            )
            if response.status_code not in (200, 202):
                self.errors.append(f"workflow_run webhook answered {response.status_code}")


@contextmanager
def serve_process(
    fake: FakeGitHub,
    tmp: Path,
    *,
    argv: Callable[[int], list[str]] | None = None,
    **env_over: str,
) -> Iterator[tuple[str, int]]:
    """``attune serve`` (or ``argv(port)``) as a real process on loopback, configured through
    ``ATTUNE_*`` variables; yields its URL and pid, and kills it with SIGKILL on exit (no clean
    shutdown)."""
    key = tmp / "app.pem"
    key.write_text(fake.private_key_pem)
    port = free_port()
    env = {
        **os.environ,
        "ATTUNE_APP_ID": str(fake.app_id),
        "ATTUNE_PRIVATE_KEY_PATH": str(key),
        "ATTUNE_WEBHOOK_SECRET": SECRET,
        "ATTUNE_LEDGER_PATH": str(tmp / "ledger.db"),
        "ATTUNE_STATE_DIR": str(tmp / "state"),
        "ATTUNE_ALLOWED_REPOSITORIES": FULL,
        "ATTUNE_GITHUB_API_URL": fake.url,
        "ATTUNE_POLL_SECONDS": "0.2",
        "ATTUNE_FORECAST_SECONDS": "3",
        **env_over,
    }
    command = argv(port) if argv else [*ATTUNE, "serve", "--port", str(port)]
    serve = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            return httpx.get(f"{url}/healthz").status_code == 200
        except httpx.ConnectError:
            return False

    try:
        wait_for(up, timeout=30, what="attune serve")
        yield url, serve.pid
    finally:
        serve.kill()
        serve.wait(timeout=10)


def comment(
    fake: FakeGitHub, app: App, number: int, user: str, body: str, action: str = "created"
) -> Any:
    """Deliver an ``issue_comment`` event, as GitHub would, and return the response."""
    payload = fake.webhooks.issue_comment(number, user, body, action=action)
    return fake.webhooks.deliver(f"{app.url}/webhook", "issue_comment", payload, SECRET)


def wait_for(predicate: Any, *, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@contextmanager
def github_mode(
    tmp: Path, *, poll_s: float = 0.2, **overrides: Any
) -> Iterator[tuple[FakeGitHub, App, int]]:
    with FakeGitHub() as fake:
        number = seed_repo(fake)
        with App(fake, tmp, poll_s=poll_s, **overrides) as app:
            yield fake, app, number


def replies(fake: FakeGitHub, number: int) -> list[str]:
    return [c.body for c in fake.comments(number) if c.user == fake.bot_login]


def ledger_events(app: App) -> list[Any]:
    from gate.ledger import Ledger

    with Ledger(app.settings.ledger_path) as ledger:
        return [e for c in ledger.campaigns() for e in ledger.events(c)]


def dumps(value: Any) -> str:
    return json.dumps(value, indent=1, default=str)
