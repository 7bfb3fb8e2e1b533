"""The App host as docs/github-app.md sets it up, against the test GitHub: a repository that
``attune init`` wrote, ``attune serve`` started from some other folder with absolute state
paths, webhooks to ``/webhook`` as ``application/json``, and the first ``/attune tune``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from bot.cli import main
from bot.github.settings import Settings
from bot.github.signature import sign
from tests.conftest import ATTUNE
from tests.fakegithub.server import FakeGitHub
from tests.github_harness import FULL, SECRET, free_port, replies, seed_repo, wait_for


@pytest.fixture
def app_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The settings docs/github-app.md lists, in the environment; the key file."""
    for name in [n for n in os.environ if n.startswith("ATTUNE_")]:
        monkeypatch.delenv(name)
    key = tmp_path / "app.pem"
    key.write_text("not read: the settings are refused first\n")
    monkeypatch.setenv("ATTUNE_APP_ID", "1")
    monkeypatch.setenv("ATTUNE_PRIVATE_KEY_PATH", str(key))
    monkeypatch.setenv("ATTUNE_WEBHOOK_SECRET", "s")
    return key


def test_state_paths_default_to_an_absolute_folder(
    tmp_path: Path, app_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    settings = Settings()  # the fields come from ATTUNE_* variables
    assert settings.state_dir == tmp_path / "xdg" / "attune"
    assert settings.ledger_path == tmp_path / "xdg" / "attune" / "ledger.db"
    monkeypatch.setenv("ATTUNE_STATE_DIR", str(tmp_path / "srv"))
    assert Settings().ledger_path == tmp_path / "srv" / "ledger.db"


@pytest.mark.parametrize("name", ["ATTUNE_STATE_DIR", "ATTUNE_LEDGER_PATH"])
def test_serve_refuses_a_relative_state_path(
    app_env: Path, name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "state")
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert f"{name}: Value error, 'state' is relative: give an absolute path" in err
    assert "default factory" not in err


def test_serve_says_the_private_key_path_is_a_directory(
    tmp_path: Path,
    app_env: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ATTUNE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("ATTUNE_PRIVATE_KEY_PATH", str(tmp_path))
    assert main(["serve"]) == 2
    assert "is a directory; ATTUNE_PRIVATE_KEY_PATH takes the App's .pem file" in (
        capsys.readouterr().err
    )


def deliver(url: str, event: str, payload: object) -> httpx.Response:
    """A webhook as GitHub sends it with the content type the docs say to choose."""
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": os.urandom(8).hex(),
        "X-Hub-Signature-256": sign(body, SECRET),
    }
    return httpx.post(f"{url}/webhook", content=body, headers=headers, timeout=10)


@pytest.mark.slow  # attune serve as a process, then a campaign's first steps
def test_the_documented_app_host_takes_the_first_tune(tmp_path: Path) -> None:
    started_in = tmp_path / "elsewhere"  # the service's folder must not matter
    started_in.mkdir()
    state = tmp_path / "srv" / "attune"
    with FakeGitHub() as fake:
        number = seed_repo(fake)  # the training repository as `attune init` writes it
        assert ".github/actionlint.yaml" in fake.files_at("main")
        key = tmp_path / "app.pem"
        key.write_text(fake.private_key_pem)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("ATTUNE_")}
        env |= {
            "ATTUNE_APP_ID": str(fake.app_id),
            "ATTUNE_PRIVATE_KEY_PATH": str(key),
            "ATTUNE_WEBHOOK_SECRET": SECRET,
            "ATTUNE_STATE_DIR": str(state),  # the ledger goes inside it
            "ATTUNE_ALLOWED_REPOSITORIES": FULL,
            "ATTUNE_GITHUB_API_URL": fake.url,
            "ATTUNE_POLL_SECONDS": "0.2",
            "ATTUNE_FORECAST_SECONDS": "3",
        }
        serve = subprocess.Popen(
            [*ATTUNE, "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=started_in,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:

            def up() -> bool:
                try:
                    return httpx.get(f"{url}/healthz").status_code == 200
                except httpx.ConnectError:
                    return False

            wait_for(up, timeout=60, what="attune serve")
            tune = fake.webhooks.issue_comment(number, "maintainer", "/attune tune budget=0.05")
            assert deliver(url, "issue_comment", tune).status_code == 202
            wait_for(lambda: replies(fake, number), timeout=60, what="the start reply")
            assert replies(fake, number)[0].startswith("Started campaign")
            wait_for(fake.dispatches, timeout=60, what="the first bench dispatch")
            assert fake.dispatches()[0].workflow.endswith("attune-bench.yml")
        finally:
            serve.kill()
            serve.wait(timeout=30)
    assert (state / "ledger.db").is_file()
    assert list(started_in.iterdir()) == []  # nothing relative to where it was started
