"""Registry conditions: when a key's class depends on the configuration around it.

A condition is data in a registry file (``when: - if: ...``); ``gate.registry`` applies it to
the baseline/candidate pair being judged. Most forms test one config and a rule holds when its
test holds for either side; ``changed`` compares the two, which is how a registry judges a
value the framework derives (the global batch, gradient-accumulation steps) rather than how
each recipe spelled it.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gate.models import EffectiveConfig

_ABSENT = object()
"""A key one config has and the other lacks."""


class Condition(BaseModel):
    """A test on a baseline/candidate pair. Exactly one form:

    - ``unpinned: KEY``: the recipe did not set KEY itself (validation derived it);
    - ``key: KEY`` with ``is_set: true|false``: KEY's value is (not) null;
    - ``key: KEY`` with ``in: [values]``: KEY's value is one of these;
    - ``key: KEY`` with ``matches: REGEX``: KEY's value (for a list, one of its items), as
      text, contains a match of REGEX;
    - ``changed: KEY``: KEY's effective value (derived values included) differs between the
      baseline and the candidate, however each recipe spelled it;
    - ``all: [conditions]`` / ``any: [conditions]``: every / some one of them holds;
    - ``not: condition``: it does not hold.

    The first three look at one config; a rule holds when its test holds for the baseline or for
    the candidate, with ``all``, ``any`` and ``not`` combining tests of the same config.
    ``changed`` looks at both configs, so it reads the same whichever config is being tested.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    unpinned: str | None = None
    key: str | None = None
    is_set: bool | None = None
    in_: list[Any] | None = Field(None, alias="in")
    matches: str | None = None
    changed: str | None = None
    all_: list[Condition] | None = Field(None, alias="all", min_length=1)
    any_: list[Condition] | None = Field(None, alias="any", min_length=1)
    not_: Condition | None = Field(None, alias="not")

    @model_validator(mode="after")
    def _one_form(self) -> Condition:
        forms = [
            self.unpinned is not None,
            self.is_set is not None,
            self.in_ is not None,
            self.matches is not None,
            self.changed is not None,
            self.all_ is not None,
            self.any_ is not None,
            self.not_ is not None,
        ]
        if sum(forms) != 1:
            raise ValueError(
                "use exactly one of: unpinned, key + is_set, key + in, key + matches, changed, "
                "all, any, not"
            )
        tests = (self.is_set, self.in_, self.matches)
        if any(t is not None for t in tests) != bool(self.key):
            raise ValueError("is_set, in and matches need a key, and a key needs one of them")
        if self.matches is not None:
            try:
                re.compile(self.matches)
            except re.error as exc:
                raise ValueError(f"matches: not a regular expression: {exc}") from None
        return self

    def holds_for(self, baseline: EffectiveConfig, candidate: EffectiveConfig) -> bool:
        """Whether the condition holds for the baseline or for the candidate."""
        pair = (baseline.flat(), candidate.flat())
        return self._holds(baseline, pair[0], pair) or self._holds(candidate, pair[1], pair)

    def holds(self, cfg: EffectiveConfig) -> bool:
        """Whether the condition holds for ``cfg`` alone (``changed`` never does)."""
        flat = cfg.flat()
        return self._holds(cfg, flat, (flat, flat))

    def _holds(
        self,
        cfg: EffectiveConfig,
        flat: dict[str, Any],
        pair: tuple[dict[str, Any], dict[str, Any]],
    ) -> bool:
        """The test on ``cfg`` (``flat`` is its ``flat()``) within the pair being compared."""
        if self.all_ is not None:
            return all(c._holds(cfg, flat, pair) for c in self.all_)
        if self.any_ is not None:
            return any(c._holds(cfg, flat, pair) for c in self.any_)
        if self.not_ is not None:
            return not self.not_._holds(cfg, flat, pair)
        if self.changed is not None:
            base, cand = (side.get(self.changed, _ABSENT) for side in pair)
            return base != cand or type(base) is not type(cand)
        if self.unpinned is not None:
            return self.unpinned not in cfg.explicit
        value = flat.get(self.key or "")
        if self.is_set is not None:
            return (value is not None) == self.is_set
        if self.matches is not None:
            items = value if isinstance(value, list) else [] if value is None else [value]
            return any(re.search(self.matches, str(item)) for item in items)
        return value in (self.in_ or [])
