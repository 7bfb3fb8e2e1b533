"""Who may make attune spend GPU time or merge: the one permission rule of GitHub mode.

A command that starts or stops work needs write, maintain or admin permission on the
repository. The rule is checked when the command arrives and again before every launch and
every merge and when a restarted app picks a campaign up: permission revoked mid-campaign stops
the campaign instead of letting it spend in the name of someone who may no longer.
"""

from __future__ import annotations

from bot.github.client import RepoClient
from gate.errors import AttuneError

WRITE_PERMISSIONS = frozenset({"admin", "write"})
"""The collaborator-permission endpoint reports maintain as write."""


class PermissionLost(AttuneError):
    """The user a campaign acts for no longer has write permission."""


def may_write(permission: str) -> bool:
    return permission in WRITE_PERMISSIONS


def require_write(repo: RepoClient, user: str, action: str) -> None:
    """Raise ``PermissionLost`` unless ``user`` may still start work on ``repo``."""
    permission = repo.permission(user)
    if not may_write(permission):
        raise PermissionLost(
            f"@{user}, who started this campaign, no longer has write permission on "
            f"{repo.full_name} (now: {permission}); attune will not {action} in their name"
        )
