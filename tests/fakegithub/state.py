"""The fake's in-memory GitHub and the Python API tests use to arrange and inspect it.

``FakeState`` is what the HTTP layer reads and writes. ``FakeGitHub`` (server.py) is a
``FakeState``, so all of this is available on the server object. ``repo=None`` means the first
repository created; ``repo="owner/name"`` picks another (forks, for instance).

Arranging::

    create_repo(owner, name, files=None, default_branch="main", private=False) -> Repo
    fork_repo(user, repo=None) -> Repo              # copies the branches on first call
    set_permission(login, permission, repo=None)    # admin/maintain/write/triage/read/none
    commit(branch, files: dict[str, str | None], message="Update files", author="octocat",
           repo=None) -> sha                        # None deletes a file
    create_branch(name, from_sha=None, repo=None) -> sha   # default: default branch's head
    open_pull(head, base, title, body="", user="octocat", fork=False, repo=None) -> number
    add_comment(number, body, user="octocat", repo=None) -> Comment
    register_workflow(file_name, name=None, run_name=None, inputs=None, repo=None) -> Workflow
    create_run(workflow, ref, event="push", inputs=None, actor=None, repo=None) -> WorkflowRun
    start_run(run_id) -> WorkflowRun
    complete_run(run_id, conclusion="success", artifacts: dict[str, bytes] | None = None)
    issue_token() -> (token, expires_at)            # an installation token, no JWT needed

Looking::

    head(branch, repo=None) -> sha        files_at(ref, repo=None) -> dict[str, str]
    get_commit(sha) -> Commit (files, parents, message, author)
    permission(login, repo=None) -> role
    pull(number, repo=None) -> PullRequest          pulls(repo=None)
    comments(number, repo=None) -> list[Comment]    comment(comment_id)
    reactions(comment_id) -> list[Reaction]
    check_runs(sha_or_pull_number, repo=None) -> list[CheckRun]
    workflows(repo=None) / workflow(id_or_file_name, repo=None)
    dispatches(repo=None) -> list[Dispatch]         # workflow file, ref, inputs, run_id
    runs(repo=None, workflow=None) / run(run_id)    artifacts(run_id) / artifact(artifact_id)
    requests -> list[RequestRecord]                 # every request answered, in order
    violations -> list[Violation]                   # unknown endpoints, invalid requests
    response_problems -> list[str]                  # responses off the description

Workflows are the ``.github/workflows/*.yml`` files of the default branch plus registered ones;
see actions.py for how dispatches and runs behave.
"""

from __future__ import annotations

from .actions import ActionsMixin
from .pulls import PullsMixin


class FakeState(PullsMixin, ActionsMixin):
    """Everything the fake GitHub knows (see the module docstring for the API)."""

    def __init__(
        self, *, app_id: int = 424242, app_slug: str = "attune", installation_id: int = 111
    ) -> None:
        super().__init__(app_id=app_id, app_slug=app_slug, installation_id=installation_id)
