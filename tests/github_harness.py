"""GitHub mode under test: the fake GitHub, the real app under uvicorn, and a player of GitHub
Actions that runs the real ``attune gate check`` / ``attune bench`` for what the bot dispatches.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
import yaml
from github import Auth, Github

from bot.github.app import create_app, installation_client
from bot.github.service import GitHubCampaigns
from bot.github.settings import Settings
from tests.conftest import SMALL_CONFIG
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
    """The repository with its workflows and a recipe, a tuned PR changing that recipe, and
    users: ``maintainer`` (write), ``reader`` (read). Returns the tuned PR's number."""
    workflows = REPO_ROOT / ".github" / "workflows"
    fake.create_repo(
        OWNER,
        NAME,
        files={
            RECIPE_PATH: recipe_text(),
            ".github/workflows/attune-bench.yml": (workflows / "attune-bench.yml").read_text(),
            ".github/workflows/attune-gate.yml": (workflows / "attune-gate.yml").read_text(),
            "registry/embedded.yaml": (REPO_ROOT / "registry" / "embedded.yaml").read_text(),
        },
    )
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

    def __init__(self, fake: FakeGitHub, tmp: Path, *, poll_s: float = 0.2) -> None:
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
        )
        github_for = installation_client(self.settings, **NO_WAIT)
        self.campaigns = GitHubCampaigns(self.settings, github_for)
        app = create_app(self.settings, self.campaigns, github_for)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
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
    """Plays GitHub Actions: runs attune-gate for new candidate PRs (posting the ``attune/gate``
    check run) and attune-bench for every dispatch (uploading ``result.json`` as the artifact
    and delivering ``workflow_run`` ``completed`` to the app)."""

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
            [sys.executable, "-m", "bot.cli", *args],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )

    def _gate_new_candidates(self) -> None:
        for pull in self.fake.pulls():
            if not pull.head.startswith("attune/") or pull.state != "open":
                continue
            key = (pull.number, pull.head_sha)
            if key in self.gated:
                continue
            self.gated.add(key)
            work = self.tmp / f"gate-{pull.number}"
            work.mkdir(exist_ok=True)
            base = work / "base.yaml"
            cand = work / "cand.yaml"
            base.write_text(self.fake.files_at(self.fake.head(pull.base))[RECIPE_PATH])
            cand.write_text(self.fake.files_at(pull.head_sha)[RECIPE_PATH])
            proc = self._attune("gate", "check", str(base), str(cand), "--markdown")
            repo = self.github.get_repo(FULL)
            repo.create_check_run(
                "attune/gate",
                pull.head_sha,
                status="completed",
                conclusion="success" if proc.returncode == 0 else "failure",
                output={"title": "attune/gate", "summary": proc.stdout or proc.stderr},
            )

    def _run_new_dispatches(self) -> None:
        for dispatch in self.fake.dispatches():
            run_id = dispatch.run_id
            if run_id in self.done_runs:
                continue
            self.done_runs.add(run_id)
            inputs = dispatch.inputs
            self.fake.start_run(run_id)
            work = self.tmp / f"run-{run_id}"
            work.mkdir()
            recipe = work / "recipe.yaml"
            recipe.write_text(self.fake.files_at(inputs["sha"])[inputs["recipe"]])
            out = work / "result.json"
            profile = ["--profile"] if str(inputs.get("profile")).lower() == "true" else []
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
                "--workdir",
                str(work / "bench"),
            )
            artifacts = {}
            if out.exists():
                artifacts[f"attune-result-{inputs['trial']}"] = {"result.json": out.read_bytes()}
            conclusion = "success" if proc.returncode == 0 else "failure"
            self.fake.complete_run(run_id, conclusion, artifacts)
            payload = self.fake.webhooks.workflow_run_completed(run_id)
            response = self.fake.webhooks.deliver(
                f"{self.app.url}/webhook", "workflow_run", payload, SECRET
            )
            if response.status_code not in (200, 202):
                self.errors.append(f"workflow_run webhook answered {response.status_code}")


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
def github_mode(tmp: Path, *, poll_s: float = 0.2) -> Iterator[tuple[FakeGitHub, App, int]]:
    with FakeGitHub() as fake:
        number = seed_repo(fake)
        with App(fake, tmp, poll_s=poll_s) as app:
            yield fake, app, number


def replies(fake: FakeGitHub, number: int) -> list[str]:
    return [c.body for c in fake.comments(number) if c.user == fake.bot_login]


def ledger_events(app: App) -> list[Any]:
    from gate.ledger import Ledger

    with Ledger(app.settings.ledger_path) as ledger:
        return [e for c in ledger.campaigns() for e in ledger.events(c)]


def dumps(value: Any) -> str:
    return json.dumps(value, indent=1, default=str)
