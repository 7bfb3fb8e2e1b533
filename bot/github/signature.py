"""Webhook signatures: HMAC-SHA256 of the raw request body, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def sign(body: bytes, secret: str) -> str:
    """The ``X-Hub-Signature-256`` value GitHub sends for ``body``."""
    return PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(body: bytes, header: str | None, secret: str) -> bool:
    """Whether ``header`` is the signature of ``body`` under ``secret``.

    Missing, malformed and wrong signatures are all False; the comparison of the digests is
    ``hmac.compare_digest``, so its time does not depend on where they differ. An empty secret
    verifies nothing.
    """
    if not secret or not header or not header.startswith(PREFIX):
        return False
    return hmac.compare_digest(sign(body, secret).encode(), header.encode())
