"""The GitHub app's settings, read from ``ATTUNE_*`` environment variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    """``attune serve`` configuration. Every field is ``ATTUNE_<FIELD>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="ATTUNE_", extra="ignore")

    app_id: int
    """The GitHub App's id."""
    private_key_path: Path
    """PEM private key of the App (signs the JWT exchanged for installation tokens)."""
    webhook_secret: SecretStr = Field(min_length=1)
    """Secret the App's webhooks are signed with (X-Hub-Signature-256)."""
    state_dir: Path = Field(default_factory=lambda: default_state_dir())
    """Campaign work directories and the delivery log: an absolute path (a relative one is
    refused: the service must not depend on the folder it was started from). Default:
    ``$XDG_STATE_HOME/attune``, else ``~/.local/state/attune``."""
    ledger_path: Path = Field(default_factory=lambda data: data["state_dir"] / "ledger.db")
    """The append-only ledger every campaign charges, an absolute path; unset:
    ``<state_dir>/ledger.db``."""
    default_budget: float = Field(1.0, gt=0, allow_inf_nan=False)
    """GPU-hours a campaign may spend when ``/attune tune`` gives no ``budget=``."""
    allowed_repositories: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """``owner/name`` of the repositories the App acts on (comma-separated); empty: none."""
    github_api_url: str = "https://api.github.com"
    """REST API root (GitHub Enterprise: ``https://HOST/api/v3``)."""
    forecast_seconds: float = Field(600.0, gt=0)
    """Device-seconds per device a trial is assumed to cost before any trial finished (the
    budget check needs a forecast before the first run)."""
    slurm_url: str | None = None
    """``ATTUNE_SLURM_URL``: when set, campaigns run their trials as jobs on this Slurm cluster
    (through slurmrestd; the other ``ATTUNE_SLURM_*`` settings apply, see docs/slurm.md)
    instead of dispatching the bench workflow to a self-hosted runner."""
    poll_seconds: float = Field(15.0, gt=0)
    """How often a waiting campaign asks GitHub for its workflow runs and checks."""
    app_slug: str | None = None
    """The App's slug (its runs' actor is ``<slug>[bot]``); unset, it is asked of GitHub."""
    operator_token: SecretStr | None = None
    """Bearer token for ``GET /campaigns``; unset, that endpoint answers 404."""
    workers: int = Field(1, ge=0)
    """Threads handling queued commands. 0 accepts and queues commands without handling them
    (maintenance: a later start with workers handles what was queued)."""
    delivery_retention_s: float = Field(30 * 86400.0, gt=0)
    """How long delivery ids and handled commands are kept for de-duplication."""
    max_budget_hours: float = Field(4.0, gt=0, allow_inf_nan=False)
    """The most GPU-hours one ``/attune tune`` may ask for (``budget=``); a larger ask is
    refused with a reply that states this cap."""
    max_steps: int = Field(2000, ge=2, le=10_000)
    """The most steps per benchmark ``/attune tune`` may ask for (``steps=``)."""
    max_body_bytes: int = Field(1024 * 1024, ge=64 * 1024)
    """Webhook bodies larger than this are answered 413 and never read whole. The consumed
    events fit: an ``issue_comment`` carries a comment and the pull request's description,
    each at most 65,536 characters (under 400 kB each even fully escaped in JSON)."""
    read_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False)
    """A request's headers and body must arrive within this many seconds of its first byte;
    a connection still sending then is closed."""
    max_buffered_bytes: int = Field(16 * 1024 * 1024, ge=1024 * 1024)
    """Bytes of webhook bodies held at once across all connections; a body waits for room up
    to its read deadline, then is answered 503."""
    max_connections: int = Field(100, ge=1)
    """Open connections (and requests in flight) served at once; uvicorn answers 503 beyond."""
    keepalive_timeout_s: int = Field(5, ge=1)
    """An idle kept-alive connection is closed after this many seconds."""

    @field_validator("allowed_repositories", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return [r.strip() for r in value.split(",") if r.strip()]
        return value

    @field_validator("allowed_repositories")
    @classmethod
    def _owner_name(cls, value: list[str]) -> list[str]:
        for repo in value:
            owner, sep, name = repo.partition("/")
            if not (owner and sep and name) or "/" in name:
                raise ValueError(f"{repo!r} is not owner/name")
        return value

    @field_validator("state_dir", "ledger_path")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        if not value.expanduser().is_absolute():
            raise ValueError(
                f"{str(value)!r} is relative: give an absolute path (the service must not "
                "depend on the folder it is started from)"
            )
        return value.expanduser()

    @model_validator(mode="after")
    def _the_default_budget_is_within_the_cap(self) -> Settings:
        if self.default_budget > self.max_budget_hours:
            raise ValueError(
                f"default_budget ({self.default_budget:g}) is over max_budget_hours "
                f"({self.max_budget_hours:g})"
            )
        return self

    @model_validator(mode="after")
    def _a_body_fits_the_buffer(self) -> Settings:
        if self.max_buffered_bytes < self.max_body_bytes:
            raise ValueError(
                f"max_buffered_bytes ({self.max_buffered_bytes}) is below max_body_bytes "
                f"({self.max_body_bytes}): no body could be read"
            )
        return self

    def private_key(self) -> str:
        return self.private_key_path.read_text()


def default_state_dir() -> Path:
    """Where ``attune serve`` keeps its state when ``ATTUNE_STATE_DIR`` is unset: an absolute
    path, never one relative to the current directory."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base).expanduser().resolve() / "attune"
