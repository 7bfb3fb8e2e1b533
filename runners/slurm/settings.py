"""The Slurm backend's settings: ``ATTUNE_SLURM_*`` variables (``docs/slurm.md``)."""

from __future__ import annotations

import getpass
import ipaddress
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jwt
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gate.errors import AttuneError

SUPPORTED_VERSIONS = ("v0.0.42", "v0.0.41", "v0.0.40", "v0.0.38")
"""slurmrestd API versions this client speaks, preferred first."""


class SlurmSettings(BaseSettings):
    """Where the cluster is and who submits. Every field is ``ATTUNE_SLURM_<FIELD>``."""

    model_config = SettingsConfigDict(env_prefix="ATTUNE_SLURM_", extra="ignore")

    url: str
    """slurmrestd's address, ``http://HOST:PORT`` (``ATTUNE_SLURM_URL``)."""
    user: str = Field(default_factory=getpass.getuser)
    """The Slurm user the token belongs to (``X-SLURM-USER-NAME``); default: this login."""
    token: SecretStr | None = None
    """A JWT (``scontrol token``); or ``token_file``, a file holding one."""
    token_file: Path | None = None
    partition: str | None = None
    account: str | None = None
    api_version: str | None = None
    """Pin an API version (``v0.0.38``...) instead of the newest the server and attune share."""
    poll_s: float = Field(0.5, gt=0)
    """How often a running job is asked for its state."""
    retries: int = Field(5, ge=0)
    """Retries of a request that could not reach slurmrestd, before it fails."""
    retry_wait_s: float = Field(1.0, ge=0)
    """Wait before the first retry; doubled after each, at most 30 s."""
    http_timeout_s: float = Field(10.0, gt=0)
    time_margin_min: int = Field(1, ge=0)
    """Minutes added to Slurm's own time limit beyond the trial's wall-clock limit (attune
    cancels the job at the limit itself; Slurm's limit holds if attune is gone)."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// address, got {value!r}")
        return value.rstrip("/")

    @field_validator("api_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None and value not in SUPPORTED_VERSIONS:
            raise ValueError(f"{value!r} is not one of {', '.join(SUPPORTED_VERSIONS)}")
        return value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SlurmSettings:
        """The settings from ``environ`` (default: the process environment); a missing or bad
        variable is an AttuneError naming it, never showing the token."""
        try:
            if environ is None:
                return cls()
            fields: dict[str, Any] = {
                key[len("ATTUNE_SLURM_") :].lower(): value
                for key, value in environ.items()
                if key.startswith("ATTUNE_SLURM_")
            }
            return cls.model_validate(fields)
        except ValidationError as exc:
            err = exc.errors()[0]
            name = "ATTUNE_SLURM_" + "_".join(str(p) for p in err["loc"]).upper()
            msg = "not set" if err["type"] == "missing" else err["msg"]
            raise AttuneError(f"{name}: {msg} (see docs/slurm.md)") from None

    def read_token(self) -> str:
        """The JWT, from ``token`` or ``token_file``, checked for shape, user and expiry
        without its key: a wrong one fails here, before anything is submitted."""
        if (self.token is None) == (self.token_file is None):
            raise AttuneError(
                "set exactly one of ATTUNE_SLURM_TOKEN and ATTUNE_SLURM_TOKEN_FILE "
                "(a JWT from `scontrol token`)"
            )
        if self.token is not None:
            token, source = self.token.get_secret_value().strip(), "ATTUNE_SLURM_TOKEN"
        else:
            assert self.token_file is not None
            source = f"ATTUNE_SLURM_TOKEN_FILE ({self.token_file})"
            try:
                token = self.token_file.read_text().strip()
            except OSError as exc:
                raise AttuneError(f"{source}: cannot read it: {exc.strerror}") from None
            token = token.removeprefix("SLURM_JWT=")
        check_token(token, user=self.user, source=source)
        self._over_https_or_loopback()
        return token

    def _over_https_or_loopback(self) -> None:
        """The token is a bearer credential: it goes only over https, or over plain http to
        this machine (a tunnel or a local slurmrestd)."""
        parts = urlsplit(self.url)
        host = (parts.hostname or "").lower()
        if parts.scheme == "https" or host == "localhost":
            return
        try:
            if ipaddress.ip_address(host).is_loopback:
                return
        except ValueError:
            pass
        raise AttuneError(
            f"ATTUNE_SLURM_URL: {self.url} is plain http to {host or 'no host'}: the token is "
            "sent only over https, or over http to a loopback address (see docs/slurm.md)"
        )


def check_token(token: str, *, user: str, source: str, now: float | None = None) -> None:
    """Refuse a token that is not a JWT, names another user (``sun``) or has expired
    (``exp``); the token itself never appears in the message."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        raise AttuneError(f"{source}: not a JWT (expected `scontrol token` output)") from None
    sun = claims.get("sun")
    if sun is not None and sun != user:
        raise AttuneError(
            f"{source}: the token is for Slurm user {sun!r}, not {user!r} (ATTUNE_SLURM_USER)"
        )
    exp = claims.get("exp")
    if isinstance(exp, int | float) and exp <= (time.time() if now is None else now):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(exp))
        raise AttuneError(f"{source}: the token expired at {when}; make a new one")
