"""The Slurm token is a bearer credential: it is sent only over https, or over plain http to a
loopback address (a local slurmrestd or a tunnel)."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
import pytest

from gate.errors import AttuneError
from runners.slurm.settings import SlurmSettings


def _token() -> str:
    claims = {"sun": "ana", "exp": int(time.time()) + 600, "iat": int(time.time())}
    return jwt.encode(claims, "k" * 32)


@pytest.mark.parametrize(
    "url",
    [
        "https://slurm.example.org:6820",
        "http://127.0.0.1:6820",
        "http://localhost:6820",
        "http://[::1]:6820",
        "http://127.0.0.2:6820",
    ],
)
def test_the_token_goes_over_https_or_to_loopback(url: str) -> None:
    token = _token()
    settings = SlurmSettings.from_env(
        {"ATTUNE_SLURM_URL": url, "ATTUNE_SLURM_USER": "ana", "ATTUNE_SLURM_TOKEN": token}
    )
    assert settings.read_token() == token


@pytest.mark.parametrize(
    "url", ["http://slurm.example.org:6820", "http://10.0.0.5:6820", "http://localhost.evil:1"]
)
def test_the_token_is_never_sent_over_plain_http_elsewhere(url: str, tmp_path: Path) -> None:
    token = _token()
    token_file = tmp_path / "token"
    token_file.write_text(token)
    for source in ({"ATTUNE_SLURM_TOKEN": token}, {"ATTUNE_SLURM_TOKEN_FILE": str(token_file)}):
        settings = SlurmSettings.from_env(
            {"ATTUNE_SLURM_URL": url, "ATTUNE_SLURM_USER": "ana", **source}
        )
        with pytest.raises(AttuneError, match="only over https") as err:
            settings.read_token()
        assert token not in str(err.value)
