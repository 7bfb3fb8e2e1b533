"""One ``attune serve`` per state directory: a second server on the same ``ATTUNE_STATE_DIR``
exits 2 before it binds its port, naming the directory and the pid of the server holding it;
one on another state directory starts. Real processes against the test GitHub."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from bot.campaign.lock import SERVE_LOCK_FILE
from tests.conftest import ATTUNE
from tests.fakegithub.server import FakeGitHub
from tests.github_harness import FULL, SECRET, free_port, wait_for

pytestmark = pytest.mark.slow  # attune serve as processes


def _env(fake: FakeGitHub, tmp: Path, state: Path) -> dict[str, str]:
    key = tmp / "app.pem"
    key.write_text(fake.private_key_pem)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTUNE_")}
    return env | {
        "ATTUNE_APP_ID": str(fake.app_id),
        "ATTUNE_PRIVATE_KEY_PATH": str(key),
        "ATTUNE_WEBHOOK_SECRET": SECRET,
        "ATTUNE_STATE_DIR": str(state),
        "ATTUNE_ALLOWED_REPOSITORIES": FULL,
        "ATTUNE_GITHUB_API_URL": fake.url,
    }


@contextmanager
def _serving(env: dict[str, str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    server = subprocess.Popen(
        [*ATTUNE, "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def up() -> bool:
            assert server.poll() is None, "attune serve exited"
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
            except httpx.ConnectError:
                return False

        wait_for(up, timeout=60, what="attune serve")
        yield server
    finally:
        server.kill()
        server.wait(timeout=30)


def _serve_once(env: dict[str, str], port: int) -> subprocess.CompletedProcess[str]:
    args = [*ATTUNE, "serve", "--host", "127.0.0.1", "--port", str(port)]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)


def test_a_second_server_on_one_state_dir_is_refused_before_it_binds(tmp_path: Path) -> None:
    state = tmp_path / "srv" / "attune"
    with FakeGitHub() as fake:
        env = _env(fake, tmp_path, state)
        port = free_port()
        with _serving(env, port) as first:
            assert (state / SERVE_LOCK_FILE).read_text().strip() == str(first.pid)
            # the same port too: refused for the state directory, not for the address in use
            second = _serve_once(env, port)
            assert second.returncode == 2, second.stderr
            assert f"{state}: the App's state directory is held by pid {first.pid}" in (
                second.stderr
            )
            assert "another `attune serve`" in second.stderr
            assert "address already in use" not in second.stderr.lower()
            # the first one is untouched and still answers
            assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
            # another state directory is another server
            other = tmp_path / "srv" / "other"
            with _serving({**env, "ATTUNE_STATE_DIR": str(other)}, free_port()) as third:
                assert (other / SERVE_LOCK_FILE).read_text().strip() == str(third.pid)
    # the kernel drops the lock with its holder, killed or not: the next server starts
    with FakeGitHub() as fake, _serving(_env(fake, tmp_path, state), free_port()) as again:
        assert (state / SERVE_LOCK_FILE).read_text().strip() == str(again.pid)
