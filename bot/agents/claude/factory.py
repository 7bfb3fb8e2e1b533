"""Make the Claude agent for a campaign: settings from the environment, the playbook from the
registry (``registry/playbook.md``, guarded by CODEOWNERS), the framework source to read."""

from __future__ import annotations

from pathlib import Path

from bot.agents.claude.agent import ClaudeAgent
from bot.agents.claude.settings import load_settings
from bot.agents.claude.source_tree import source_tree
from gate.ledger import Ledger
from gate.registry import DEFAULT_REGISTRY_DIR, Registry

PLAYBOOK = DEFAULT_REGISTRY_DIR / "playbook.md"


def load_playbook(path: Path = PLAYBOOK) -> str:
    return path.read_text()


def claude_agent(
    ledger: Ledger, campaign: str, registry: Registry, framework: str, version: str
) -> ClaudeAgent:
    return ClaudeAgent(
        ledger=ledger,
        campaign=campaign,
        registry=registry,
        tree=source_tree(framework, version),
        settings=load_settings(),
        playbook=load_playbook(),
    )
