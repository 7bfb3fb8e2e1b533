"""The adapter registry: framework name -> its adapter. The adapter types live in
``runners/adapter.py``, which every adapter imports; only this module imports the adapters, so
nothing imports in a circle."""

from __future__ import annotations

from gate.errors import AttuneError
from runners.adapter import FrameworkAdapter
from runners.embedded.adapter import EmbeddedAdapter
from runners.megatron.adapter import MegatronAdapter
from runners.torchtitan.adapter import TorchtitanAdapter

ADAPTERS: dict[str, type[FrameworkAdapter]] = {
    "embedded": EmbeddedAdapter,
    "megatron": MegatronAdapter,
    "torchtitan": TorchtitanAdapter,
}


def get_adapter(framework: str, *, path: str | None = None) -> FrameworkAdapter:
    """The adapter for ``framework``; an unknown name is an AttuneError listing the known ones."""
    try:
        return ADAPTERS[framework]()
    except KeyError:
        known = ", ".join(sorted(ADAPTERS))
        raise AttuneError(
            f"unknown framework {framework!r} (known: {known})", path=path, key="framework"
        ) from None
