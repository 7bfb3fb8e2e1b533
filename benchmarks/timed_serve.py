"""``attune serve`` with the app wrapped in a timer of its own work, for benchmarks/webhook.py.

    python benchmarks/timed_serve.py --port 8000    (settings from ATTUNE_* as for attune serve)

The timer measures each ``POST /webhook`` from the moment the app is called to the last byte of
its response: what the app itself costs, without the connection set-up and queueing in front
of it. ``GET /_bench/timings`` returns the seconds measured so far.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.github.app import create_app
from bot.github.client import installation_clients
from bot.github.http_limits import uvicorn_config
from bot.github.service import GitHubCampaigns
from bot.github.settings import Settings

Scope = dict[str, Any]


class Timed:
    """ASGI middleware: the duration of every ``POST /webhook`` inside the app."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seconds: list[float] = []

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/_bench/timings":
            body = json.dumps(self.seconds).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] != "http" or scope["path"] != "/webhook":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def timed_send(message: dict[str, Any]) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.seconds.append(time.perf_counter() - start)

        await self.app(scope, receive, timed_send)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    settings = Settings()  # the fields come from ATTUNE_* variables
    clients = installation_clients(settings)
    app = create_app(settings, GitHubCampaigns(settings, clients), clients)
    config = uvicorn_config(
        Timed(app),
        settings,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )
    uvicorn.Server(config).run()  # the limits attune serve runs under
    return 0


if __name__ == "__main__":
    sys.exit(main())
