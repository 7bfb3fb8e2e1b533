"""A small typed client for slurmrestd over httpx.

    client = SlurmClient(SlurmSettings.from_env())
    job_id = client.submit(request)       # POST /slurm/<v>/job/submit
    client.job(job_id)                    # GET /slurm/<v>/job/{job_id}
    client.cancel(job_id)                 # DELETE /slurm/<v>/job/{job_id}

The API version is discovered from the server (``GET /openapi/v3`` lists its paths), not
assumed. Authentication is JWT: ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN`` on every
request (slurmrestd ``-a rest_auth/jwt``). Errors are read from the body's ``errors[]`` as well
as the HTTP status (an unknown job is HTTP 500 with error 2017); each names the endpoint, the
job and Slurm's message, never the token. A request that cannot reach slurmrestd is retried
with backoff, then raised as ``SlurmUnreachable``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import Any

import httpx

from gate.errors import AttuneError
from runners.slurm.api import SlurmJob, SlurmNode, parse_errors, parse_job, parse_node
from runners.slurm.jobdesc import JobRequest
from runners.slurm.settings import SUPPORTED_VERSIONS, SlurmSettings

RETRY_STATUS = frozenset({502, 503, 504})
"""HTTP statuses of a proxy or server that is not there (yet): retried like no connection."""
AUTH_SYMPTOMS = (
    "Zero Bytes were transmitted or received",
    "slurmctld config is unable to load",
    "Protocol authentication error",
)
"""What slurmrestd 22.05 relays when slurmctld cannot verify the request's token (it reports
no authentication error as such)."""
_VERSION = re.compile(r"^/slurm/(v\d+\.\d+\.\d+)/")


def offered_versions(paths: Iterable[str]) -> set[str]:
    """The API versions of an OpenAPI description's paths (``/slurm/v0.0.38/ping``...)."""
    return {m.group(1) for p in paths if (m := _VERSION.match(p))}


def pick_version(offered: Iterable[str]) -> str | None:
    """The newest version both sides speak, or None."""
    offered = set(offered)
    return next((v for v in SUPPORTED_VERSIONS if v in offered), None)


class SlurmApiError(AttuneError):
    """slurmrestd answered, and refused or failed the request."""

    def __init__(self, message: str, *, status: int, numbers: list[int]) -> None:
        super().__init__(message)
        self.status = status
        self.numbers = numbers
        """Slurm's error numbers in ``errors[]`` (2017: no such job)."""


class SlurmUnreachable(AttuneError):
    """slurmrestd could not be reached, even after the retries."""


class SlurmClient:
    """Requests to one slurmrestd as one user."""

    def __init__(
        self, settings: SlurmSettings, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.settings = settings
        self._token = settings.read_token()
        self._http = httpx.Client(
            base_url=settings.url,
            headers={
                "X-SLURM-USER-NAME": settings.user,
                "X-SLURM-USER-TOKEN": self._token,
                "Accept": "application/json",
            },
            timeout=settings.http_timeout_s,
            transport=transport,
        )
        self._version = settings.api_version
        self.release: str | None = None
        """Slurm's release as the server reports it (``22.05.8``), once known."""

    def close(self) -> None:
        self._http.close()

    # --- versions ---

    @property
    def version(self) -> str:
        """The API version in use: pinned in the settings or discovered from the server."""
        if self._version is None:
            self._version = self.discover()
        return self._version

    def discover(self) -> str:
        """The newest version both the server (its OpenAPI description's paths) and attune
        speak."""
        body = self._request("GET", "/openapi/v3", what="list the API versions")
        paths = body.get("paths") if isinstance(body, dict) else None
        offered = offered_versions(paths or {})
        version = pick_version(offered)
        if version is not None:
            return version
        raise AttuneError(
            f"slurmrestd at {self.settings.url} offers API versions "
            f"{', '.join(sorted(offered)) or '(none)'}; attune speaks "
            f"{', '.join(SUPPORTED_VERSIONS)} (start slurmrestd with one of them, `-s openapi/...`)"
        )

    # --- endpoints ---

    def ping(self) -> dict[str, Any]:
        """``GET /slurm/<v>/ping``: slurmctld answers through slurmrestd as this user."""
        body = self._request("GET", f"/slurm/{self.version}/ping", what="ping slurmctld")
        meta = body.get("meta", {}) if isinstance(body, dict) else {}
        release = meta.get("Slurm", meta.get("slurm", {})).get("release")
        self.release = str(release) if release else self.release
        return body if isinstance(body, dict) else {}

    def submit(self, request: JobRequest) -> tuple[int, list[str]]:
        """The new job's id, and Slurm's warnings. A job Slurm queued with an error beside
        its id (22.05 answers "Required node not available" with the id of a job it queued
        while every node is down) exists: it is the submission's result, not a failure."""
        body = self._request(
            "POST",
            f"/slurm/{self.version}/job/submit",
            what=f"submit job {request.name!r}",
            json=request.body(self.version),
            queued=True,
        )
        job_id = body.get("job_id") if isinstance(body, dict) else None
        if not isinstance(job_id, int) or job_id <= 0:
            raise AttuneError(
                f"POST /slurm/{self.version}/job/submit for {request.name!r}: no job_id in "
                "slurmrestd's answer"
            )
        return job_id, [e.text() for e in parse_errors(body)]

    def job(self, job_id: int) -> SlurmJob:
        path = f"/slurm/{self.version}/job/{job_id}"
        body = self._request("GET", path, what=f"read job {job_id}")
        jobs = body.get("jobs") if isinstance(body, dict) else None
        if not jobs:
            raise SlurmApiError(f"GET {path}: job {job_id} not found", status=404, numbers=[])
        return parse_job(jobs[0])

    def cancel(self, job_id: int) -> None:
        """``DELETE /slurm/<v>/job/{job_id}``: SIGKILL-after-``KillWait`` cancel of the job.
        Cancelling a job that is already over is not an error."""
        path = f"/slurm/{self.version}/job/{job_id}"
        try:
            self._request("DELETE", path, what=f"cancel job {job_id}")
        except SlurmApiError as exc:
            # ESLURM_ALREADY_DONE (2021): the job ended first
            if 2021 not in exc.numbers:
                raise

    def nodes(self) -> list[SlurmNode]:
        body = self._request("GET", f"/slurm/{self.version}/nodes", what="list the nodes")
        nodes = body.get("nodes") if isinstance(body, dict) else None
        return [parse_node(n) for n in nodes or [] if isinstance(n, dict)]

    # --- transport ---

    def _request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        json: dict[str, Any] | None = None,
        queued: bool = False,
    ) -> Any:
        """One request with retries on an unreachable server; the parsed JSON body."""
        wait = self.settings.retry_wait_s
        tries = self.settings.retries + 1
        last = ""
        for attempt in range(tries):
            try:
                response = self._http.request(method, path, json=json)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code not in RETRY_STATUS:
                    return self._answer(response, method, path, what, queued=queued)
                last = f"HTTP {response.status_code}"
            if attempt + 1 < tries:
                time.sleep(wait)
                wait = min(30.0, wait * 2)
        raise SlurmUnreachable(
            self._redact(
                f"cannot {what}: slurmrestd at {self.settings.url} unreachable "
                f"({method} {path}, {tries} tries): {last}"
            )
        )

    def _answer(
        self, response: httpx.Response, method: str, path: str, what: str, *, queued: bool
    ) -> Any:
        """The body of a success; ``queued``: a body that names a new job is one, whatever
        else it says."""
        try:
            body: Any = response.json()
        except ValueError:
            body = None
        errors = parse_errors(body)
        if response.status_code < 400 and not errors:
            return body
        job_id = body.get("job_id") if isinstance(body, dict) else None
        if queued and response.status_code < 400 and isinstance(job_id, int) and job_id > 0:
            return body
        if errors:
            said = "; ".join(e.text() for e in errors)
        else:
            said = response.text.strip()[:300] or response.reason_phrase
        hint = ""
        if response.status_code == 401:
            hint = " (slurmrestd refused the credentials: check ATTUNE_SLURM_USER and the token)"
        elif any(symptom in said for symptom in AUTH_SYMPTOMS):
            hint = (
                " (slurmctld refused the request: with slurmctld up, Slurm 22.05 answers this "
                "to a token it cannot verify: check ATTUNE_SLURM_USER, the token and its key)"
            )
        raise SlurmApiError(
            self._redact(
                f"cannot {what}: {method} {path} answered HTTP {response.status_code}: "
                f"Slurm says: {said}{hint}"
            ),
            status=response.status_code,
            numbers=[e.number for e in errors if e.number is not None],
        )

    def _redact(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text
