"""The ledger's chain key: with one, every row's hash is an HMAC-SHA256 under a key kept outside
the state directory, so whoever can write the ledger file but not read the key cannot rewrite a
row and re-hash the chain after it.

The key is a file named by ``ATTUNE_LEDGER_KEY_FILE`` (``head -c 32 /dev/urandom > KEY``), read
when a ledger is opened. A ledger created while a key is set is keyed for good: the id of its
key (never the key) is stored in the file, and appending or verifying needs that same key. A
ledger created without one (every ledger of attune 0.1) stays unkeyed.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from gate.errors import AttuneError

KEY_ENV = "ATTUNE_LEDGER_KEY_FILE"
MIN_KEY_BYTES = 16


def key_from_environment(ledger_dir: Path) -> bytes | None:
    """The key in the file ``ATTUNE_LEDGER_KEY_FILE`` names; None when it is unset. A key in
    the ledger's own directory is refused: whoever can rewrite the ledger could read it."""
    name = os.environ.get(KEY_ENV)
    if not name:
        return None
    if Path(name).resolve().is_relative_to(ledger_dir.resolve()):
        raise AttuneError(
            f"the ledger key ({KEY_ENV}) is inside the ledger's directory {ledger_dir}: keep it "
            "outside, where whoever can write the ledger cannot read it",
            path=name,
        )
    try:
        key = Path(name).read_bytes().strip()
    except OSError as exc:
        raise AttuneError(
            f"{KEY_ENV} names a ledger key file that cannot be read ({exc.strerror})", path=name
        ) from None
    if len(key) < MIN_KEY_BYTES:
        raise AttuneError(
            f"the ledger key is {len(key)} bytes, at least {MIN_KEY_BYTES} are needed "
            "(head -c 32 /dev/urandom > KEY)",
            path=name,
        )
    return key


def key_id(key: bytes) -> str:
    """What the ledger stores to recognise its key: a hash of it, never the key."""
    return hashlib.sha256(b"attune ledger key id\x00" + key).hexdigest()[:16]


def chain_key(keyed_by: str | None, key: bytes | None, path: Path) -> bytes | None:
    """The key a ledger's chain is hashed with: None when it is unkeyed (``keyed_by`` None);
    AttuneError for a keyed chain without its key (it can be neither verified nor extended)."""
    if keyed_by is None:
        return None
    if key is None:
        raise AttuneError(
            f"the ledger's chain is keyed (key id {keyed_by}): set {KEY_ENV} to its key file",
            path=str(path),
        )
    if key_id(key) != keyed_by:
        raise AttuneError(
            f"the ledger's chain is keyed with key id {keyed_by}, but the key in {KEY_ENV} "
            f"has id {key_id(key)}",
            path=str(path),
        )
    return key
