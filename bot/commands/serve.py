"""``attune serve``: the GitHub App's webhook server (FastAPI under uvicorn)."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from bot.campaign.lock import own_state_dir
from gate.errors import AttuneError


def check_private_key(path: Path) -> None:
    """The App's private key must be a PEM private key: refused at start, not at the first
    webhook that needs a token."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        load_pem_private_key(path.read_bytes(), password=None)
    except OSError as exc:
        raise AttuneError(
            f"cannot read the App's private key ({exc.strerror})", path=str(path)
        ) from None
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise AttuneError(
            "not a PEM private key (ATTUNE_PRIVATE_KEY_PATH: the .pem file the App's settings "
            "page generates, starting -----BEGIN RSA PRIVATE KEY-----, without a passphrase)",
            path=str(path),
        ) from None


def serve(*, host: str, port: int) -> int:
    if not 1 <= port <= 65535:
        raise AttuneError(f"--port must be 1 to 65535, got {port}")
    import uvicorn

    from bot.github.app import create_app
    from bot.github.client import installation_clients
    from bot.github.http_limits import uvicorn_config
    from bot.github.service import GitHubCampaigns
    from bot.github.settings import Settings

    try:
        settings = Settings()  # the fields come from ATTUNE_* variables
    except ValidationError as exc:
        problems = "; ".join(
            f"ATTUNE_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors()
            if e["type"] != "default_factory_not_called"  # a default from a refused setting
        )
        raise AttuneError(f"settings: {problems}") from None
    if settings.private_key_path.is_dir():
        raise AttuneError(
            "is a directory; ATTUNE_PRIVATE_KEY_PATH takes the App's .pem file",
            path=str(settings.private_key_path),
        )
    if not settings.private_key_path.is_file():
        raise AttuneError("no such file", path=str(settings.private_key_path))
    check_private_key(settings.private_key_path)
    # one server per state directory, held before anything in it is read or the port is bound
    with own_state_dir(settings.state_dir):
        clients = installation_clients(settings)
        app = create_app(settings, GitHubCampaigns(settings, clients), clients)
        # no access log: a line per request costs the ack path more than the request itself;
        # the inbox (state_dir/inbox.db) records every delivery
        config = uvicorn_config(
            app, settings, host=host, port=port, log_level="info", access_log=False
        )
        uvicorn.Server(config).run()
    return 0
