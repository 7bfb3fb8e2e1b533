"""A campaign thread that crashes on a bug still ends in the ledger and on the pull request: an
``error`` stop and a reply, never only a line in the bot's log."""

from __future__ import annotations

from pathlib import Path

from bot.campaign.setup import open_campaign
from bot.github.campaign_thread import Running, run_campaign
from bot.github.settings import Settings
from bot.state.fold import fold
from gate.ledger import Ledger
from tests.conftest import RecipeWriter


class CrashingRepoDouble:
    """The GitHub boundary of one repository: reading the pull request raises an unexpected
    error (a bug, not an ``AttuneError``); comments are recorded."""

    full_name = "octo-org/models"

    def __init__(self) -> None:
        self.comments: list[tuple[int, str]] = []

    def pull(self, number: int) -> object:
        raise RuntimeError("a bug in reading the pull request")

    def comment(self, number: int, body: str) -> int:
        self.comments.append((number, body))
        return len(self.comments)


def test_a_crash_records_an_error_stop_and_replies(
    tmp_path: Path, write_recipe: RecipeWriter
) -> None:
    recipe = write_recipe(tmp_path, "gpt")
    settings = Settings(
        app_id=1,
        private_key_path=tmp_path / "unused.pem",
        webhook_secret="s",
        ledger_path=tmp_path / "ledger.db",
        state_dir=tmp_path / "state",
    )
    with Ledger(settings.ledger_path) as ledger:
        open_campaign(
            ledger, "c", recipe_text=recipe.read_text(), recipe_path="r.yaml", budget_hours=0.1
        )
    repo = CrashingRepoDouble()
    run_campaign(settings, repo, 7, Running(campaign="c"), lambda: "attune[bot]")  # type: ignore[arg-type]
    with Ledger(settings.ledger_path) as ledger:
        stopped = fold("c", ledger.events("c")).stopped
    assert stopped is not None and stopped.reason == "error"
    assert stopped.evidence == ["a bug in reading the pull request"]
    [(number, body)] = repo.comments
    assert number == 7 and "attune campaign `c` stopped: a bug in reading" in body
