"""A local GitHub for tests: a real HTTP server the bot's PyGithub code talks to, over a real git
repository, checked against GitHub's own REST description and recorded webhook deliveries.

server.py serves it, render.py makes its bodies, state.py is the Python API tests arrange and
inspect it with, gitstore.py its git, openapi.py the description, webhooks.py the deliveries.
"""

from .openapi import fixtures_dir, load_spec
from .server import FakeGitHub

__all__ = ["FakeGitHub", "fixtures_dir", "load_spec"]
