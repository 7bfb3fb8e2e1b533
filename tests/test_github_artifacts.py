"""Bench results come back from a runner as artifacts: untrusted input, read defensively."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import time
import zipfile
from pathlib import Path

import httpx
import pytest

from bot.github.executor import run_title
from bot.github.results import MAX_RESULT_BYTES, read_result
from gate.errors import AttuneError
from gate.models import TrialResult
from tests.conftest import ATTUNE

REPO = Path(__file__).resolve().parents[1]
RESULT = TrialResult(
    recipe="ported-gpt@c1",
    fingerprint="0123456789abcdef",
    status="ok",
    warmup=1,
    score=1234.5,
    step1_loss=5.5,
    allocated_at=100.0,
    released_at=104.0,
    devices=1,
)


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def test_a_result_artifact_round_trips() -> None:
    assert read_result(zipped({"result.json": RESULT.model_dump_json().encode()})) == RESULT
    assert run_title("c-1", "baseline-2") == "attune-bench c-1 baseline-2"


@pytest.mark.parametrize(
    ("archive", "message"),
    [
        (b"not a zip at all", "not a zip holding result.json"),
        (zipped({"other.json": b"{}"}), "not a zip holding result.json"),
        (zipped({"result.json": b'{"status": "ok"}'}), "result.json is not a TrialResult"),
        (zipped({"result.json": b"[1, 2"}), "result.json is not a TrialResult"),
        # a zip bomb: tiny archive, huge file
        (zipped({"result.json": b" " * (MAX_RESULT_BYTES + 1)}), "unpacks to"),
        (b"\0" * (MAX_RESULT_BYTES + 1), "result artifact is"),
    ],
)
def test_bad_artifacts_are_refused_with_a_reason(archive: bytes, message: str) -> None:
    with pytest.raises(AttuneError, match=message):
        read_result(archive)


def test_attune_serve_starts_and_answers(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = tmp_path / "app.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "ATTUNE_APP_ID": "1",
        "ATTUNE_PRIVATE_KEY_PATH": str(pem),
        "ATTUNE_WEBHOOK_SECRET": "s3cret",
        "ATTUNE_STATE_DIR": str(tmp_path / "state"),
        "ATTUNE_LEDGER_PATH": str(tmp_path / "ledger.db"),
        "ATTUNE_ALLOWED_REPOSITORIES": "org/models",
        "ATTUNE_OPERATOR_TOKEN": "op-token",
    }
    proc = subprocess.Popen(
        [*ATTUNE, "serve", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 30
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/healthz")
                break
            except httpx.ConnectError:
                if time.time() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        assert response.json() == {"status": "ok"}
        campaigns = f"http://127.0.0.1:{port}/campaigns"
        assert httpx.get(campaigns).status_code == 401
        operator = {"Authorization": "Bearer op-token"}
        assert httpx.get(campaigns, headers=operator).json() == []
        unsigned = httpx.post(f"http://127.0.0.1:{port}/webhook", content=b"{}")
        assert unsigned.status_code == 401
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_attune_serve_names_missing_settings() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTUNE_")}
    proc = subprocess.run(
        [*ATTUNE, "serve"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "ATTUNE_APP_ID: Field required" in proc.stderr
    assert "ATTUNE_WEBHOOK_SECRET: Field required" in proc.stderr
