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


class FrameworkRefusal(AttuneError):
    """The framework's own validation refused a recipe (Megatron-LM's ``validate_args`` or
    model-config checks, torchtitan's config manager, the embedded workload's checks).

    Still bad input where the recipe is one the user gave (a baseline: exit 2), but for a
    candidate it is a verdict: the gate rejects it with an ``invalid`` finding quoting
    ``message`` and ``source``, the framework line that raised (``path:line@version``).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        key: str | None = None,
        source: str | None = None,
        framework: str = "",
        version: str = "",
    ) -> None:
        super().__init__(message, path=path, key=key)
        self.message = message
        self.source = source
        self.framework = framework
        self.version = version
