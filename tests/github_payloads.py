"""Complete GitHub REST 2026-03-10 reply payloads, valid against GitHub's own schema.

Each builder returns a fresh dict shaped like GitHub's reply: `tests/test_github_models.py`
validates every one strictly against githubkit's generated models, so fakes built from these
builders answer what GitHub answers. Keyword arguments override the fields tests care about.
"""

from __future__ import annotations

from typing import Any

API = "https://api.github.test"
WEB = "https://github.test"
OWNER = "octo-org"
NAME = "octo-repo"
REPOSITORY = f"{OWNER}/{NAME}"
SHA = "a" * 40
OTHER_SHA = "b" * 40
CREATED = "2026-11-02T09:00:05Z"


def _user(login: str = OWNER, user_id: int = 9919) -> dict[str, Any]:
    url = f"{API}/users/{login}"
    return {
        "login": login,
        "id": user_id,
        "node_id": "O_kgDOAAAmzw",
        "avatar_url": f"https://avatars.test/u/{user_id}?v=4",
        "gravatar_id": "",
        "url": url,
        "html_url": f"{WEB}/{login}",
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
        "type": "Organization",
        "site_admin": False,
    }


def minimal_repository() -> dict[str, Any]:
    """The nested `repository` / `head_repository` object of a workflow run."""
    url = f"{API}/repos/{REPOSITORY}"
    templated = {
        "archive_url": "{archive_format}{/ref}",
        "assignees_url": "assignees{/user}",
        "blobs_url": "git/blobs{/sha}",
        "branches_url": "branches{/branch}",
        "collaborators_url": "collaborators{/collaborator}",
        "comments_url": "comments{/number}",
        "commits_url": "commits{/sha}",
        "compare_url": "compare/{base}...{head}",
        "contents_url": "contents/{+path}",
        "contributors_url": "contributors",
        "deployments_url": "deployments",
        "downloads_url": "downloads",
        "events_url": "events",
        "forks_url": "forks",
        "git_commits_url": "git/commits{/sha}",
        "git_refs_url": "git/refs{/sha}",
        "git_tags_url": "git/tags{/sha}",
        "issue_comment_url": "issues/comments{/number}",
        "issue_events_url": "issues/events{/number}",
        "issues_url": "issues{/number}",
        "keys_url": "keys{/key_id}",
        "labels_url": "labels{/name}",
        "languages_url": "languages",
        "merges_url": "merges",
        "milestones_url": "milestones{/number}",
        "notifications_url": "notifications{?since,all,participating}",
        "pulls_url": "pulls{/number}",
        "releases_url": "releases{/id}",
        "stargazers_url": "stargazers",
        "statuses_url": "statuses/{sha}",
        "subscribers_url": "subscribers",
        "subscription_url": "subscription",
        "tags_url": "tags",
        "teams_url": "teams",
        "trees_url": "git/trees{/sha}",
        "hooks_url": "hooks",
    }
    repo: dict[str, Any] = {
        "id": 1296269,
        "node_id": "R_kgDOABPHjQ",
        "name": NAME,
        "full_name": REPOSITORY,
        "owner": _user(),
        "private": False,
        "html_url": f"{WEB}/{REPOSITORY}",
        "description": "Queue fallback test repository",
        "fork": False,
        "url": url,
    }
    repo.update({key: f"{url}/{suffix}" for key, suffix in templated.items()})
    return repo


def workflow_run(
    run_id: int = 42,
    *,
    display_title: str = "rqf-1234-1-1",
    status: str | None = "queued",
    conclusion: str | None = None,
    run_attempt: int = 1,
    path: str = ".github/workflows/runner-worker.yml",
    head_sha: str = SHA,
    **overrides: Any,
) -> dict[str, Any]:
    """A `workflow-run` object as `GET .../actions/runs/{id}` returns it."""
    url = f"{API}/repos/{REPOSITORY}/actions/runs/{run_id}"
    run: dict[str, Any] = {
        "id": run_id,
        "name": "Runner worker",
        "node_id": "WFR_kwLOABPHjc8AAAAC",
        "check_suite_id": 5001,
        "check_suite_node_id": "CS_kwDOABPHjc8AAAAB",
        "head_branch": "main",
        "head_sha": head_sha,
        "path": path,
        "run_number": 7,
        "run_attempt": run_attempt,
        "referenced_workflows": [],
        "event": "workflow_dispatch",
        "status": status,
        "conclusion": conclusion,
        "workflow_id": 161335,
        "url": url,
        "html_url": f"{WEB}/{REPOSITORY}/actions/runs/{run_id}",
        "pull_requests": [],
        "created_at": CREATED,
        "updated_at": CREATED,
        "actor": _user("octocat", 1),
        "triggering_actor": _user("octocat", 1),
        "run_started_at": CREATED,
        "jobs_url": f"{url}/jobs",
        "logs_url": f"{url}/logs",
        "check_suite_url": f"{API}/repos/{REPOSITORY}/check-suites/5001",
        "artifacts_url": f"{url}/artifacts",
        "cancel_url": f"{url}/cancel",
        "rerun_url": f"{url}/rerun",
        "previous_attempt_url": None,
        "workflow_url": f"{API}/repos/{REPOSITORY}/actions/workflows/161335",
        "head_commit": {
            "id": head_sha,
            "tree_id": "c" * 40,
            "message": "Add the runner worker",
            "timestamp": "2026-11-01T12:00:00Z",
            "author": {"name": "Octo Cat", "email": "octocat@example.test"},
            "committer": {"name": "GitHub", "email": "noreply@example.test"},
        },
        "repository": minimal_repository(),
        "head_repository": minimal_repository(),
        "head_repository_id": 1296269,
        "display_title": display_title,
    }
    run.update(overrides)
    return run


def workflow_run_list(*runs: dict[str, Any]) -> dict[str, Any]:
    """`GET .../actions/workflows/{workflow}/runs`."""
    return {"total_count": len(runs), "workflow_runs": list(runs)}


def step(number: int = 1, name: str = "Set up job", status: str = "completed") -> dict[str, Any]:
    """One item of a job's `steps`."""
    return {
        "name": name,
        "status": status,
        "conclusion": "success" if status == "completed" else None,
        "number": number,
        "started_at": "2026-11-02T09:02:00Z",
        "completed_at": "2026-11-02T09:02:01Z" if status == "completed" else None,
    }


def job(
    job_id: int = 4242,
    *,
    run_id: int = 42,
    run_attempt: int = 1,
    status: str = "queued",
    conclusion: str | None = None,
    runner_id: int | None = None,
    runner_name: str | None = None,
    runner_group_name: str | None = None,
    steps: list[dict[str, Any]] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """A `job` object, queued with no runner unless told otherwise.

    Unlike GitHub's own documentation example, it carries the required `created_at`.
    """
    url = f"{API}/repos/{REPOSITORY}/actions/jobs/{job_id}"
    data: dict[str, Any] = {
        "id": job_id,
        "run_id": run_id,
        "run_url": f"{API}/repos/{REPOSITORY}/actions/runs/{run_id}",
        "run_attempt": run_attempt,
        "node_id": "CR_kwDOABPHjc8AAAAC",
        "head_sha": SHA,
        "url": url,
        "html_url": f"{WEB}/{REPOSITORY}/actions/runs/{run_id}/job/{job_id}",
        "status": status,
        "conclusion": conclusion,
        "created_at": CREATED,
        "started_at": CREATED,
        "completed_at": None,
        "name": "worker",
        "steps": steps if steps is not None else [],
        "check_run_url": f"{API}/repos/{REPOSITORY}/check-runs/{job_id}",
        "labels": ["linux-amd64-cpu16"],
        "runner_id": runner_id,
        "runner_name": runner_name,
        "runner_group_id": 3 if runner_group_name else None,
        "runner_group_name": runner_group_name,
        "workflow_name": "Runner worker",
        "head_branch": "main",
    }
    data.update(overrides)
    return data


def job_list(*jobs: dict[str, Any]) -> dict[str, Any]:
    """`GET .../actions/runs/{id}/attempts/{n}/jobs`."""
    return {"total_count": len(jobs), "jobs": list(jobs)}


def dispatch_response(run_id: int = 42) -> dict[str, Any]:
    """The 200 body of a 2026-03-10 workflow dispatch."""
    return {
        "workflow_run_id": run_id,
        "run_url": f"{API}/repos/{REPOSITORY}/actions/runs/{run_id}",
        "html_url": f"{WEB}/{REPOSITORY}/actions/runs/{run_id}",
    }


def git_ref(
    ref: str = "refs/heads/main", sha: str = SHA, object_type: str = "commit"
) -> dict[str, Any]:
    """`GET /repos/{o}/{r}/git/ref/{ref}`."""
    kind = "tags" if object_type == "tag" else "commits"
    return {
        "ref": ref,
        "node_id": "REF_kwDOABPHjbByZWZzL2hlYWRzL21haW4",
        "url": f"{API}/repos/{REPOSITORY}/git/{ref}",
        "object": {
            "type": object_type,
            "sha": sha,
            "url": f"{API}/repos/{REPOSITORY}/git/{kind}/{sha}",
        },
    }


def content_file(
    path: str = ".github/workflows/runner-worker.yml", sha: str = "d" * 40
) -> dict[str, Any]:
    """`GET /repos/{o}/{r}/contents/{path}` for a file."""
    url = f"{API}/repos/{REPOSITORY}/contents/{path}?ref=main"
    git_url = f"{API}/repos/{REPOSITORY}/git/blobs/{sha}"
    html_url = f"{WEB}/{REPOSITORY}/blob/main/{path}"
    return {
        "type": "file",
        "encoding": "base64",
        "size": 24,
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "content": "bmFtZTogUnVubmVyIHdvcmtlcgo=\n",
        "sha": sha,
        "url": url,
        "git_url": git_url,
        "html_url": html_url,
        "download_url": f"https://raw.github.test/{REPOSITORY}/main/{path}",
        "_links": {"git": git_url, "self": url, "html": html_url},
    }
