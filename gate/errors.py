"""The one expected-error type: bad input that a user can fix."""

from __future__ import annotations


class AttuneError(Exception):
    """A user-facing error: printed as one line, exit code 2.

    The message names the file and the key where there is one, so the user can go
    straight to the problem.
    """

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None) -> None:
        self.path = path
        self.key = key
        where = ""
        if path and key:
            where = f"{path}: {key}: "
        elif path:
            where = f"{path}: "
        elif key:
            where = f"{key}: "
        super().__init__(f"{where}{message}")
