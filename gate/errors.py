"""The expected errors: one hierarchy under ``AttuneError``, each kind with its exit code.

``AttuneError`` itself is bad input a user can fix (exit 2). Its subclasses say what else an
expected error can be: a recipe the framework refuses (``FrameworkRefusal``, still exit 2 for a
user's recipe, a verdict for a candidate), a benchmark run that did not finish (``RunFailed``,
exit 4), an agent whose model API cannot answer (``AgentUnavailable``, in ``bot/agents/claude``),
a comment that is not a valid command (``CommandError``, in ``bot/github``: its message is the
reply). ``bot/cli.py`` prints any of them as one line and exits with ``exit_code``; anything
else is a bug (exit 3). The table of exit codes is in ``docs/cli.md``.
"""

from __future__ import annotations


class AttuneError(Exception):
    """An expected error, printed as one line; as itself, bad input a user can fix (exit 2).

    The message names the file and the key where there is one, so the user can go
    straight to the problem.
    """

    exit_code = 2
    """What ``bot/cli.py`` exits with (``docs/cli.md``)."""

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


class RunFailed(AttuneError):
    """A benchmark run that did not finish: it crashed, ran out of memory, hung, timed out or
    lost a rank. Not bad input (the recipe was accepted and launched): ``attune bench`` exits 4
    after writing the result JSON, which names the status."""

    exit_code = 4
