"""A local GitHub for tests: a real HTTP server (server.py) the bot's PyGithub code talks to, over
a real git repository (gitstore.py), checked against GitHub's own REST description (openapi.py);
state.py is the Python API tests arrange and inspect it with, webhooks.py its deliveries.
"""

from .openapi import fixtures_dir, load_spec
from .server import FakeGitHub

__all__ = ["FakeGitHub", "fixtures_dir", "load_spec"]
