"""A recipe's ``env`` is data, never code: which variable names it may set, and what a value
may hold.

The names come from the framework's registry: its ``env.*`` entries are the allow-list, each an
exact name (``env.OMP_NUM_THREADS``) or a prefix and ``*`` (``env.NCCL_*``), classified like any
key. A fixed never-list wins over every pattern: what starts an interpreter or a shell, loads a
library, names a program or a file, or is the runner's or the launcher's own. A registry entry
that the never-list would refuse, or a pattern wider than a prefix, fails when the registry is
loaded. Values are one line of bounded text.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping

from gate.errors import AttuneError

ENV_PREFIX = "env."
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""A variable name a shell and ``os.environ`` agree on."""
EXACT_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
"""An allow-list entry naming one variable."""
PATTERN_RE = re.compile(r"^[A-Z][A-Z0-9]*_(?:[A-Z0-9]+_)*\*$")
"""An allow-list pattern: a prefix ending in ``_`` and one trailing ``*``, nothing wider."""
MAX_VALUE_CHARS = 4096
"""Longest value a recipe may give a variable."""
MAX_VARS = 64
"""Most variables one recipe may set."""

NEVER: dict[str, str] = {
    "LD_*": "the dynamic loader's: it preloads or redirects shared libraries",
    "DYLD_*": "the dynamic loader's: it preloads or redirects shared libraries",
    "GLIBC_TUNABLES": "the C library's start-up settings",
    "GCONV_PATH": "the C library loads modules from it",
    "LOCPATH": "the C library loads locale data from it",
    "MALLOC_*": "the C library's allocator settings",
    "PATH": "where programs are found: the runner's, never the recipe's",
    "HOME": "the runner's own",
    "USER": "the runner's own",
    "SHELL": "names a program to run",
    "TMPDIR": "the runner's own",
    "LANG": "the runner's own",
    "LC_*": "the runner's own",
    "PYTHON*": "the interpreter's start-up (imports, module paths, warning filters that import)",
    "BASH_ENV": "bash runs this file at start-up (a Slurm batch script is bash)",
    "ENV": "sh runs this file at start-up",
    "BASH_FUNC_*": "bash imports functions from it",
    "SHELLOPTS": "the shell's start-up options",
    "BASHOPTS": "the shell's start-up options",
    "PS4": "the shell expands it",
    "PROMPT_COMMAND": "the shell runs it",
    "IFS": "changes how the shell splits words",
    "CDPATH": "changes where the shell changes directory",
    "PERL*": "perl's start-up options and module paths",
    "RUBY*": "ruby's start-up options and library paths",
    "NODE_*": "node's start-up options",
    "JAVA_TOOL_OPTIONS": "the JVM's start-up options",
    "_JAVA_OPTIONS": "the JVM's start-up options",
    "BROWSER": "names a program to run",
    "EDITOR": "names a program to run",
    "VISUAL": "names a program to run",
    "PAGER": "names a program to run",
    "GIT_*": "git's settings (programs to run, paths)",
    "SSH_*": "ssh's settings",
    "PET_*": "torchrun's own options: the launch comes from the recipe's keys",
    "TORCHELASTIC_*": "torchrun's own",
    "MASTER_ADDR": "torchrun's own",
    "MASTER_PORT": "torchrun's own",
    "RANK": "torchrun's own",
    "LOCAL_RANK": "torchrun's own",
    "WORLD_SIZE": "torchrun's own",
    "LOCAL_WORLD_SIZE": "torchrun's own",
    "GROUP_RANK": "torchrun's own",
    "ROLE_*": "torchrun's own",
    "SLURM_*": "Slurm's own",
    "SRUN_*": "Slurm's own",
    "SBATCH_*": "Slurm's own",
    "ATTUNE_*": "attune's own settings and test hooks",
    "CUDA_VISIBLE_DEVICES": "the runner assigns the devices",
    "*_PROXY": "routes the run's network traffic",
    "*_proxy": "routes the run's network traffic",
    "SSL_*": "certificates the run trusts",
    "REQUESTS_CA_BUNDLE": "certificates the run trusts",
    "CURL_CA_BUNDLE": "certificates the run trusts",
    "*_PLUGIN": "loads a shared library (NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN...)",
    "*_PLUGIN_*": "loads a shared library",
    "*_FILE": "names a file to read or write",
    "*_PATH": "names a path to load from",
    "*_DIR": "names a folder to read or write",
    "*_LIB": "names a library to load",
    "*_LIBRARY": "names a library to load",
    "*TOKEN*": "a credential",
    "*SECRET*": "a credential",
    "*PASSWORD*": "a credential",
    "*PASSWD*": "a credential",
    "*_KEY": "a credential",
    "*CREDENTIAL*": "a credential",
    "AWS_*": "cloud credentials and endpoints",
}
"""Names no recipe may set, whatever a registry lists (fnmatch patterns -> why)."""


SECRET_LIKE = (
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*_KEY",
    "*_KEY_*",
    "*API_KEY*",
    "*CREDENTIAL*",
    "AWS_*",
)
"""Names a runner's credentials go by: never passed from the runner into a launch."""


def secret_like(name: str) -> bool:
    """Whether ``name`` looks like a credential's variable (``GITHUB_TOKEN``, ``*_KEY``...)."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, pattern) for pattern in SECRET_LIKE)


def never_reason(name: str) -> str | None:
    """Why ``name`` is never allowed in a recipe, or None."""
    for pattern, why in NEVER.items():
        if fnmatch.fnmatchcase(name, pattern):
            return why
    return None


def entry_problem(key: str) -> str | None:
    """Why ``key`` (``env.NAME`` or ``env.PREFIX_*``) cannot be on an allow-list, or None."""
    name = key.removeprefix(ENV_PREFIX)
    if any(c in name for c in "*?["):
        if not PATTERN_RE.match(name):
            return (
                f"{key}: an env pattern is an upper-case prefix ending in '_' and one trailing "
                "'*' (e.g. env.NCCL_*), nothing wider"
            )
        prefix = name[:-1]
        for pattern, why in NEVER.items():
            fixed = pattern.rstrip("*")
            if "*" in fixed or not pattern.endswith("*"):
                exact = pattern if "*" not in pattern else None
                if exact is not None and exact.startswith(prefix):
                    return f"{key} would allow {exact}, which is never allowed ({why})"
                continue
            if prefix.startswith(fixed) or fixed.startswith(prefix):
                return f"{key} overlaps {pattern}, which is never allowed ({why})"
        return None
    if not EXACT_RE.match(name):
        return f"{key}: an env entry is an upper-case variable name (e.g. env.OMP_NUM_THREADS)"
    never = never_reason(name)
    if never is not None:
        return f"{key} is never allowed ({never})"
    return None


def value_problem(name: str, value: object) -> str | None:
    """Why ``value`` cannot be the value of variable ``name``, or None."""
    if not isinstance(value, str):
        return f"must be a string (quote it in YAML), got {type(value).__name__}"
    if "\x00" in value:
        return "the value holds a NUL character"
    if "\n" in value or "\r" in value:
        return "the value holds a line break; a variable is one line"
    if len(value) > MAX_VALUE_CHARS:
        return f"the value is {len(value)} characters long (at most {MAX_VALUE_CHARS})"
    return None


class AllowList:
    """The env names one framework's registry lets a recipe set."""

    def __init__(self, entries: Iterable[str], *, where: str) -> None:
        self.entries = sorted(e.removeprefix(ENV_PREFIX) for e in entries)
        """Exact names and ``PREFIX_*`` patterns."""
        self.where = where
        """The registry files the list comes from (one or more), for messages."""

    def allows(self, name: str) -> bool:
        return never_reason(name) is None and any(
            fnmatch.fnmatchcase(name, e) for e in self.entries
        )

    def describe(self) -> str:
        return ", ".join(self.entries) if self.entries else "none"

    def name_problem(self, name: object) -> str | None:
        """Why a recipe may not set variable ``name`` (naming the allowed list), or None."""
        problem = self._name_problem(name)
        return None if problem is None else f"{problem}; {self.allowed_text()}"

    def allowed_text(self) -> str:
        return f"a recipe may set {self.describe()} ({self.where})"

    def _name_problem(self, name: object) -> str | None:
        if not isinstance(name, str) or not NAME_RE.match(name):
            return f"env: {name!r} is not a variable name"
        why = never_reason(name)
        if why is not None:
            return f"env.{name} is never allowed in a recipe ({why})"
        if not self.allows(name):
            return f"env.{name} is not on the env allow-list"
        return None

    def problems(self, env: object) -> list[tuple[str, str]]:
        """``(key, why)`` for every refused name or value of a recipe's ``env``."""
        if env is None:
            return []
        if not isinstance(env, Mapping):
            return [("env", "env: must be a mapping of variable names to strings")]
        found: list[tuple[str, str]] = []
        if len(env) > MAX_VARS:
            found.append(("env", f"env: sets {len(env)} variables (at most {MAX_VARS})"))
        for name, value in env.items():
            problem = self._name_problem(name)
            if problem is None:
                why = value_problem(str(name), value)
                problem = None if why is None else f"env.{name}: {why}"
            if problem is not None:
                found.append((f"env.{name}", problem))
        return found

    def refusal(self, env: object, *, path: str | None) -> EnvRefused | None:
        """The error for a recipe's ``env`` with problems, or None."""
        problems = self.problems(env)
        return EnvRefused(problems, path=path, allowed=self.allowed_text()) if problems else None


class EnvRefused(AttuneError):
    """A recipe sets a variable that is not on its framework's allow-list (or a bad value).

    Bad input for ``tune`` and ``bench`` (exit 2, before anything launches); for ``gate check``
    a ``reject`` verdict (``gate.prelaunch.env_refused``)."""

    def __init__(
        self, problems: list[tuple[str, str]], *, path: str | None, allowed: str = ""
    ) -> None:
        self.problems = problems
        """``(key, why)``: each refused variable, its reason naming it."""
        self.recipe_path = path
        self.allowed = allowed
        """What the recipe may set, and the registry file saying so."""
        text = "; ".join(why for _, why in problems)
        super().__init__(
            f"{text}. {allowed[:1].upper()}{allowed[1:]}" if allowed else text, path=path
        )
