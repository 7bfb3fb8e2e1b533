"""A local GitHub for tests, over real HTTP and a real git repository (see server.py)."""

from .openapi import fixtures_dir, load_spec
from .server import FakeGitHub

__all__ = ["FakeGitHub", "fixtures_dir", "load_spec"]
