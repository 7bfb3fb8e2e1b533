"""The names of the check runs on a candidate's head commit, in one place.

On GitHub two gates post a check: the training repository's ``attune-gate.yml`` workflow
(``GATE_CHECK``, the one branch protection requires) and the campaign itself
(``BASELINE_GATE_CHECK``). The campaign names its own verdict explicitly
(``bot/campaign/candidates.py``); no forge renames a check it is given.
"""

from __future__ import annotations

GATE_CHECK = "attune/gate"
"""The gate workflow's check (``bot/templates/workflows/attune-gate.yml``): the candidate
against its base branch, judged by the pinned attune. A local forge runs no workflow: there the
campaign's own verdict is posted under this name."""

BASELINE_GATE_CHECK = "attune/baseline-gate"
"""The campaign's own gate verdict on GitHub: the candidate against the ORIGINAL baseline. Its
name differs from ``GATE_CHECK``, which only the gate workflow's job may post."""
