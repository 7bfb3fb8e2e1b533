"""The fake GitHub, driven over HTTP by real PyGithub (no mocks)."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import re
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from github import Auth, Github, GithubException, GithubIntegration

from tests.fakegithub import FakeGitHub, fixtures_dir
from tests.fakegithub.webhooks import deliver, sign

BENCH_WORKFLOW = """\
name: attune bench
run-name: "bench ${{ inputs.candidate }} for #${{ inputs.pr }}"
on:
  workflow_dispatch:
    inputs:
      candidate:
        required: true
      pr:
        required: false
        default: "0"
jobs: {}
"""

FILES = {
    "README.md": "hello\n",
    "recipes/gpt.yaml": "lr: 0.001\nbatch: 8\n",
    ".github/workflows/attune-bench.yml": BENCH_WORKFLOW,
}
NO_WAIT: dict[str, Any] = {
    "retry": None,
    "seconds_between_requests": None,
    "seconds_between_writes": None,
}


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub() as server:
        server.create_repo("octo", "recipes", FILES)
        server.set_permission("alice", "write")
        server.set_permission("bob", "read")
        yield server
        assert server.response_problems == []


@pytest.fixture
def gh(fake: FakeGitHub) -> Iterator[Github]:
    """PyGithub as the bot builds it: App JWT -> installation token, on the fake's URL."""
    app = Auth.AppAuth(fake.app_id, fake.private_key_pem)
    client = Github(
        base_url=fake.url, auth=app.get_installation_auth(fake.installation_id), **NO_WAIT
    )
    yield client
    client.close()


def blob_sha(text: str) -> str:
    """Git's blob sha of ``text``, computed here independently of the fake's git."""
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def foreign_urls(value: Any, base: str) -> list[str]:
    """Every http(s) URL in ``value`` that does not point at ``base``."""
    if isinstance(value, dict):
        return [url for item in value.values() for url in foreign_urls(item, base)]
    if isinstance(value, list):
        return [url for item in value for url in foreign_urls(item, base)]
    if isinstance(value, str) and re.match(r"^https?://", value) and not value.startswith(base):
        return [value]
    return []


def test_app_auth_and_repository(fake: FakeGitHub, gh: Github) -> None:
    integration = GithubIntegration(
        auth=Auth.AppAuth(fake.app_id, fake.private_key_pem), base_url=fake.url, **NO_WAIT
    )
    token = integration.get_access_token(fake.installation_id)
    assert token.token.startswith("ghs_") and fake.token_valid(token.token)
    assert token.expires_at.timestamp() > time.time() + 600
    assert integration.get_repo_installation("octo", "recipes").id == 111

    repo = gh.get_repo("octo/recipes")
    assert (repo.full_name, repo.default_branch, repo.private) == ("octo/recipes", "main", False)
    assert repo.url == f"{fake.url}/repos/octo/recipes"
    assert repo.owner.login == "octo"
    sent = [r for r in fake.requests if r.path == "/repos/octo/recipes"]
    assert sent[-1].headers["authorization"].split()[0] in ("token", "Bearer")
    assert fake.violations == []


def test_tokens_are_checked(fake: FakeGitHub) -> None:
    url = f"{fake.url}/repos/octo/recipes"
    absent = httpx.get(url)
    assert absent.status_code == 401 and set(absent.json()) >= {"message", "documentation_url"}
    bad = httpx.get(url, headers={"Authorization": "token ghs_notatoken"})
    assert (bad.status_code, bad.json()["message"]) == (401, "Bad credentials")
    good = httpx.get(url, headers={"Authorization": f"Bearer {fake.issue_token()[0]}"})
    assert good.status_code == 200

    token_url = f"{fake.url}/app/installations/111/access_tokens"
    expired = jwt.encode(
        {"iat": int(time.time()) - 700, "exp": int(time.time()) - 60, "iss": str(fake.app_id)},
        fake.private_key_pem,
        algorithm="RS256",
    )
    for credential in (expired, fake.issue_token()[0]):
        refused = httpx.post(token_url, headers={"Authorization": f"Bearer {credential}"})
        assert refused.status_code == 401
    made = httpx.post(token_url, headers={"Authorization": f"Bearer {fake.app_jwt()}"})
    assert made.status_code == 201 and made.json()["token"].startswith("ghs_")
    assert fake.violations == []


def test_refs_contents_and_commits(fake: FakeGitHub, gh: Github) -> None:
    repo = gh.get_repo("octo/recipes")
    main_sha = repo.get_git_ref("heads/main").object.sha
    assert main_sha == fake.head("main")
    repo.create_git_ref("refs/heads/attune/c1/3", main_sha)
    assert repo.get_git_ref("heads/attune/c1/3").object.sha == main_sha
    with pytest.raises(GithubException) as exists:
        repo.create_git_ref("refs/heads/attune/c1/3", main_sha)
    assert exists.value.status == 422

    current = repo.get_contents("recipes/gpt.yaml", ref="attune/c1/3")
    assert not isinstance(current, list)
    assert current.decoded_content == b"lr: 0.001\nbatch: 8\n"
    assert current.sha == blob_sha("lr: 0.001\nbatch: 8\n")
    written = repo.update_file(
        "recipes/gpt.yaml", "tune lr", "lr: 0.002\nbatch: 8\n", current.sha, branch="attune/c1/3"
    )
    new_sha = written["commit"].sha
    assert fake.head("attune/c1/3") == new_sha and fake.head("main") == main_sha
    assert fake.files_at(new_sha)["recipes/gpt.yaml"] == "lr: 0.002\nbatch: 8\n"
    assert fake.get_commit(new_sha).parents == (main_sha,)
    with pytest.raises(GithubException) as stale:
        repo.update_file("recipes/gpt.yaml", "again", "x", current.sha, branch="attune/c1/3")
    assert stale.value.status == 409
    listing = repo.get_contents("recipes", ref=new_sha)
    assert isinstance(listing, list) and [c.path for c in listing] == ["recipes/gpt.yaml"]

    commit = repo.get_commit(new_sha)
    assert [f.filename for f in commit.files] == ["recipes/gpt.yaml"]
    assert fake.violations == []


def _candidate(fake: FakeGitHub) -> tuple[str, str]:
    """A base branch and a candidate branch one commit ahead of it."""
    fake.create_branch("attune/c1/base")
    fake.create_branch("attune/c1/3")
    fake.commit("attune/c1/3", {"recipes/gpt.yaml": "lr: 0.002\nbatch: 8\n"}, "lr 0.002")
    return "attune/c1/base", "attune/c1/3"


def test_pull_request_comments_labels_and_permissions(fake: FakeGitHub, gh: Github) -> None:
    base, head = _candidate(fake)
    repo = gh.get_repo("octo/recipes")
    pr = repo.create_pull(base=base, head=head, title="Tune lr", body="Candidate 3")
    assert (pr.number, pr.base.ref, pr.head.ref, pr.head.sha) == (1, base, head, fake.head(head))
    assert pr.user.login == "attune[bot]" and pr.mergeable is True
    assert fake.pull(1).title == "Tune lr"
    with pytest.raises(GithubException) as duplicate:
        repo.create_pull(base=base, head=head, title="again")
    assert duplicate.value.status == 422

    pr.add_to_labels("attune", "candidate")
    assert [label.name for label in pr.get_labels()] == ["attune", "candidate"]
    assert [label.name for label in repo.get_pull(1).labels] == ["attune", "candidate"]

    comment = pr.create_issue_comment("<!-- attune:status -->\nqueued")
    comment.edit("<!-- attune:status -->\nrunning")
    assert [c.body for c in pr.get_issue_comments()] == ["<!-- attune:status -->\nrunning"]
    assert fake.comments(1)[0].body.endswith("running")
    assert comment.create_reaction("eyes").content == "eyes"
    comment.create_reaction("eyes")
    assert [(r.content, r.user) for r in fake.reactions(comment.id)] == [("eyes", "attune[bot]")]
    statuses = [r.status for r in fake.requests if r.path.endswith("/reactions")]
    assert statuses == [201, 200]

    assert repo.get_collaborator_permission("alice") == "write"
    assert repo.get_collaborator_permission("bob") == "read"
    fake.set_permission("carol", "maintain")
    assert repo.get_collaborator_role_name("carol") == "maintain"

    files = list(pr.get_files())
    assert [(f.filename, f.status, f.additions, f.deletions) for f in files] == [
        ("recipes/gpt.yaml", "modified", 1, 1)
    ]
    assert files[0].patch == "@@ -1,2 +1,2 @@\n-lr: 0.001\n+lr: 0.002\n batch: 8"

    assert [p.number for p in repo.get_pulls(state="open", head=f"octo:{head}")] == [1]
    pr.edit(state="closed")
    assert fake.pull(1).state == "closed"
    assert list(repo.get_pulls(state="open")) == []
    assert [p.number for p in repo.get_pulls(state="closed", base=base)] == [1]
    assert fake.violations == []


def test_check_runs(fake: FakeGitHub, gh: Github) -> None:
    base, head = _candidate(fake)
    number = fake.open_pull(head, base, "Tune lr")
    repo = gh.get_repo("octo/recipes")
    sha = fake.head(head)
    run = repo.create_check_run(
        name="attune/gate",
        head_sha=sha,
        status="in_progress",
        output={"title": "t", "summary": "s"},
    )
    run.edit(conclusion="success", output={"title": "Gate passed", "summary": "ok", "text": "all"})
    listed = list(repo.get_commit(sha).get_check_runs())
    assert [(r.name, r.status, r.conclusion, r.output.title) for r in listed] == [
        ("attune/gate", "completed", "success", "Gate passed")
    ]
    assert [r.pull_requests[0].number for r in listed] == [number]
    by_branch = list(repo.get_commit(head).get_check_runs())
    assert [r.id for r in by_branch] == [run.id]
    assert [r.summary for r in fake.check_runs(number)] == ["ok"]
    assert fake.violations == []


def test_squash_merge(fake: FakeGitHub, gh: Github) -> None:
    base, head = _candidate(fake)
    fake.commit(head, {"notes.md": "why\n"}, "notes")
    number = fake.open_pull(head, base, "Tune lr")
    base_before = fake.head(base)
    pr = gh.get_repo("octo/recipes").get_pull(number)
    with pytest.raises(GithubException) as moved:
        pr.merge(merge_method="squash", sha=base_before)
    assert moved.value.status == 409

    status = pr.merge(merge_method="squash", sha=pr.head.sha, commit_title="Tune lr (#1)")
    assert status.merged
    merged = fake.get_commit(fake.head(base))
    assert merged.sha == status.sha and merged.parents == (base_before,)
    assert merged.message.startswith("Tune lr (#1)")
    assert fake.files_at(base)["notes.md"] == "why\n"
    assert fake.files_at(base)["recipes/gpt.yaml"] == "lr: 0.002\nbatch: 8\n"
    again = gh.get_repo("octo/recipes").get_pull(number)
    assert (again.merged, again.state, again.merge_commit_sha) == (True, "closed", status.sha)
    assert len(list(again.get_files())) == 2
    with pytest.raises(GithubException) as closed:
        again.merge(merge_method="squash")
    assert closed.value.status == 405
    assert fake.violations == []


def test_dispatch_run_and_artifact(fake: FakeGitHub, gh: Github) -> None:
    repo = gh.get_repo("octo/recipes")
    workflow = repo.get_workflow("attune-bench.yml")
    assert workflow.name == "attune bench"
    assert workflow.create_dispatch("main", {"candidate": "c1/3", "pr": "7"}, throw=True)
    assert [(d.workflow, d.ref, d.inputs) for d in fake.dispatches()] == [
        ("attune-bench.yml", "main", {"candidate": "c1/3", "pr": "7"})
    ]
    runs = list(workflow.get_runs(event="workflow_dispatch", branch="main"))
    assert [(r.display_title, r.status, r.head_sha) for r in runs] == [
        ("bench c1/3 for #7", "queued", fake.head("main"))
    ]
    with pytest.raises(GithubException) as unexpected:
        workflow.create_dispatch("main", {"nope": "1"}, throw=True)
    assert unexpected.value.status == 422

    payload = {"tokens_per_second": 1234.5}
    fake.complete_run(runs[0].id, "success", {"bench.json": json.dumps(payload).encode()})
    run = repo.get_workflow_run(runs[0].id)
    assert (run.status, run.conclusion) == ("completed", "success")
    artifacts = list(run.get_artifacts())
    assert [a.name for a in artifacts] == ["bench.json"]
    status, _, chunks = gh.requester.getStream(artifacts[0].archive_download_url, chunk_size=None)
    archive = zipfile.ZipFile(io.BytesIO(b"".join(chunks)))
    assert status == 200 and json.loads(archive.read("bench.json")) == payload

    token = fake.issue_token()[0]
    with httpx.Client(headers={"Authorization": f"token {token}"}) as client:
        redirect = client.get(artifacts[0].archive_download_url)
        assert redirect.status_code == 302
        assert redirect.headers["location"].startswith(fake.url)
        assert client.get(redirect.headers["location"]).content == b"".join(
            gh.requester.getStream(artifacts[0].archive_download_url, chunk_size=None)[2]
        )
    assert [r.id for r in repo.get_workflow_runs(status="success")] == [run.id]
    assert fake.violations == []


def test_pagination_follows_link_headers(fake: FakeGitHub, gh: Github) -> None:
    base, head = _candidate(fake)
    number = fake.open_pull(head, base, "Tune lr")
    for index in range(35):
        fake.add_comment(number, f"comment {index}", "alice")
    pr = gh.get_repo("octo/recipes").get_pull(number)
    assert [c.body for c in pr.get_issue_comments()] == [f"comment {i}" for i in range(35)]
    pages = [r for r in fake.requests if r.path.endswith(f"/issues/{number}/comments")]
    assert len(pages) == 2 and 'rel="next"' in pages[0].response_headers["Link"]
    assert fake.violations == []


def test_fork_pull_request(fake: FakeGitHub, gh: Github) -> None:
    fork = fake.fork_repo("mallory")
    fake.create_branch("evil", repo=fork.full_name)
    fake.commit("evil", {"README.md": "pwned\n"}, "evil", "mallory", repo=fork.full_name)
    number = fake.open_pull("evil", "main", "Please merge", user="mallory", fork=True)
    pr = gh.get_repo("octo/recipes").get_pull(number)
    assert pr.head.repo.full_name == "mallory/recipes" and pr.base.repo.full_name == "octo/recipes"
    assert pr.head.label == "mallory:evil" and fake.pull(number).fork
    assert [f.filename for f in pr.get_files()] == ["README.md"]
    assert fake.violations == []


def test_unknown_endpoints_and_invalid_bodies_are_violations(fake: FakeGitHub, gh: Github) -> None:
    base, head = _candidate(fake)
    number = fake.open_pull(head, base, "Tune lr")
    headers = {"Authorization": f"token {fake.issue_token()[0]}"}
    api = f"{fake.url}/repos/octo/recipes"

    missing = httpx.get(f"{api}/deployments", headers=headers)
    assert missing.status_code == 404 and missing.json()["message"] == "Not Found"
    assert [(v.status, v.reason) for v in fake.violations] == [(404, "unknown endpoint")]

    invalid = httpx.post(f"{api}/issues/{number}/comments", headers=headers, json={"text": "hi"})
    assert invalid.status_code == 422
    assert invalid.json()["message"].startswith("Invalid request")
    comment = gh.get_repo("octo/recipes").get_pull(number).create_issue_comment("hi")
    with pytest.raises(GithubException) as reaction:
        comment.create_reaction("party")
    assert reaction.value.status == 422
    with pytest.raises(GithubException) as state:
        list(gh.get_repo("octo/recipes").get_pulls(state="merged"))
    assert state.value.status == 422
    assert [v.status for v in fake.violations] == [404, 422, 422, 422]
    assert fake.comments(number)[0].body == "hi"


def test_webhooks_point_at_the_fake_and_are_signed(fake: FakeGitHub) -> None:
    base, head = _candidate(fake)
    number = fake.open_pull(head, base, "Tune lr", user="alice")
    comment = fake.webhooks.issue_comment(number, "alice", "/attune tune")
    assert comment["comment"]["id"] == fake.comments(number)[0].id
    assert comment["issue"]["number"] == number and "pull_request" in comment["issue"]
    assert comment["installation"]["id"] == fake.installation_id
    assert comment["repository"]["full_name"] == "octo/recipes"
    assert comment["sender"]["login"] == "alice"

    opened = fake.webhooks.pull_request("opened", number)
    assert opened["pull_request"]["head"]["sha"] == fake.head(head)
    fake.create_run("attune-bench.yml", "main", "workflow_dispatch", {"candidate": "c1/3"})
    run_id = fake.runs()[0].id
    fake.complete_run(run_id, "failure")
    finished = fake.webhooks.workflow_run_completed(run_id)
    assert finished["workflow_run"]["conclusion"] == "failure"
    assert finished["workflow_run"]["display_title"] == "bench c1/3 for #0"

    checks = [
        ("webhook-issue-comment-created", comment),
        ("webhook-pull-request-opened", opened),
        ("webhook-workflow-run-completed", finished),
    ]
    for schema, payload in checks:
        assert foreign_urls(payload, fake.url) == []
        assert fake.spec.validate_schema(schema, payload) == []

    seen: list[tuple[dict[str, str], bytes]] = []

    def receive(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        headers = {
            k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k[:5] == "HTTP_"
        }
        seen.append((headers, environ["wsgi.input"].read(length)))
        start_response("202 Accepted", [("Content-Type", "application/json")])
        return [b"{}"]

    transport = httpx.WSGITransport(app=receive)
    with httpx.Client(transport=transport, base_url="http://bot.local") as client:
        response = deliver("/webhook", "issue_comment", comment, "s3cret", client=client)
    assert response.status_code == 202
    headers, body = seen[0]
    expected = hmac.new(b"s3cret", body, hashlib.sha256).hexdigest()
    assert headers["x-hub-signature-256"] == f"sha256={expected}" == sign(body, "s3cret")
    assert headers["x-github-event"] == "issue_comment"
    assert headers["user-agent"].startswith("GitHub-Hookshot/")
    assert re.fullmatch(r"[0-9a-f-]{36}", headers["x-github-delivery"])
    assert json.loads(body) == comment
    assert fake.violations == []


def test_every_response_url_points_at_the_fake(fake: FakeGitHub, gh: Github) -> None:
    base, head = _candidate(fake)
    repo = gh.get_repo("octo/recipes")
    pr = repo.create_pull(base=base, head=head, title="Tune lr")
    pr.create_issue_comment("hi").create_reaction("eyes")
    repo.create_check_run(name="attune/gate", head_sha=pr.head.sha)
    list(pr.get_files())
    repo.get_workflow("attune-bench.yml").create_dispatch("main", {"candidate": "x"})
    fake.complete_run(fake.runs()[0].id, "success", {"a": b"1"})
    list(repo.get_workflow_run(fake.runs()[0].id).get_artifacts())
    assert len(fake.requests) > 8
    for record in fake.requests:
        assert foreign_urls(record.response_body, fake.url) == [], record.path
        assert foreign_urls(record.response_headers, fake.url) == [], record.path
    assert fake.violations == []


def test_fixtures_location_can_be_overridden(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert (fixtures_dir() / "rest-api-subset.json").is_file()
    monkeypatch.setenv("ATTUNE_GITHUB_FIXTURES", str(tmp_path))
    assert fixtures_dir() == tmp_path
