"""``attune serve``: the GitHub App's webhook server (FastAPI under uvicorn)."""

from __future__ import annotations

from pydantic import ValidationError

from gate.errors import AttuneError


def serve(*, host: str, port: int) -> int:
    import uvicorn

    from bot.github.app import create_app
    from bot.github.client import installation_clients
    from bot.github.service import GitHubCampaigns
    from bot.github.settings import Settings

    try:
        settings = Settings()  # the fields come from ATTUNE_* variables
    except ValidationError as exc:
        problems = "; ".join(
            f"ATTUNE_{'_'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in exc.errors()
        )
        raise AttuneError(f"settings: {problems}") from None
    if not settings.private_key_path.is_file():
        raise AttuneError("no such file", path=str(settings.private_key_path))
    clients = installation_clients(settings)
    app = create_app(settings, GitHubCampaigns(settings, clients), clients)
    # no access log: a line per request costs the ack path more than the request itself; the
    # inbox (state_dir/inbox.db) records every delivery
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)
    return 0
