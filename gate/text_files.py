"""Read a user's text file (recipe, registry, lesson) as UTF-8, or say exactly where it is not.

A file saved in another encoding would otherwise surface as a bare ``UnicodeDecodeError``
(exit 3, "unexpected error"); the user needs the file and the byte to look at.
"""

from __future__ import annotations

from pathlib import Path

from gate.errors import AttuneError


def read_utf8(path: Path, what: str) -> str:
    """The text of ``path``; an unreadable file or one that is not UTF-8 is an AttuneError
    naming ``what`` it is, the file and the offending byte's offset."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AttuneError(f"cannot read {what} ({exc.strerror})", path=str(path)) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AttuneError(
            f"{what} is not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} "
            f"({exc.reason}); save the file as UTF-8",
            path=str(path),
        ) from None
