"""A local GitHub for tests: a real HTTP server the bot's PyGithub code talks to.

* ``server.FakeGitHub``: start/stop (or ``with``), ``.url``, App credentials
  (``app_id``, ``private_key_pem``, ``installation_id``), request log and violations;
* ``state`` / ``actions``: the in-memory GitHub and the Python API tests arrange and inspect it
  with (documented in those modules);
* ``openapi``: validation against GitHub's own REST description (``tests/fixtures/github``);
* ``webhooks``: webhook payloads built from recorded deliveries, signed and delivered.
"""

from .openapi import fixtures_dir, load_spec
from .server import FakeGitHub

__all__ = ["FakeGitHub", "fixtures_dir", "load_spec"]
