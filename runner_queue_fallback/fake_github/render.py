"""GitHub's 2026-03-10 JSON shapes for the model's objects (checked against the official models).

Long (every object the fake serves) because runs, jobs, refs, tags, files and comparisons are
written with the same repository URLs, clock and shared user and repository.
"""

from __future__ import annotations

import base64
import copy
import difflib
import json
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from email.utils import format_datetime
from typing import Any
from urllib.parse import quote

from runner_queue_fallback.fake_github.model import FakeJob, FakeRun, FakeStep, WorkflowFile
from runner_queue_fallback.fake_github.repo import Comparison

Tree = Mapping[str, WorkflowFile]

__all__ = ["Renderer"]

DOCS = "https://docs.github.com/rest"
#: Stands for a shared object in a run while it is encoded (`Renderer.encode`); a NUL never
#: comes from the model, and JSON writes it as an escape, so the marker is found only where set.
_SHARED = "\x00rqf-shared-{}\x00"

_REPO_URL_KEYS = (
    "archive_url:/{archive_format}{/ref}",
    "assignees_url:/assignees{/user}",
    "blobs_url:/git/blobs{/sha}",
    "branches_url:/branches{/branch}",
    "collaborators_url:/collaborators{/collaborator}",
    "comments_url:/comments{/number}",
    "commits_url:/commits{/sha}",
    "compare_url:/compare/{base}...{head}",
    "contents_url:/contents/{+path}",
    "contributors_url:/contributors",
    "deployments_url:/deployments",
    "downloads_url:/downloads",
    "events_url:/events",
    "forks_url:/forks",
    "git_commits_url:/git/commits{/sha}",
    "git_refs_url:/git/refs{/sha}",
    "git_tags_url:/git/tags{/sha}",
    "hooks_url:/hooks",
    "issue_comment_url:/issues/comments{/number}",
    "issue_events_url:/issues/events{/number}",
    "issues_url:/issues{/number}",
    "keys_url:/keys{/key_id}",
    "labels_url:/labels{/name}",
    "languages_url:/languages",
    "merges_url:/merges",
    "milestones_url:/milestones{/number}",
    "notifications_url:/notifications{?since,all,participating}",
    "pulls_url:/pulls{/number}",
    "releases_url:/releases{/id}",
    "stargazers_url:/stargazers",
    "statuses_url:/statuses/{sha}",
    "subscribers_url:/subscribers",
    "subscription_url:/subscription",
    "tags_url:/tags",
    "teams_url:/teams",
    "trees_url:/git/trees{/sha}",
)


class Renderer:
    """Turns model objects into JSON-ready dicts with the repository's URLs and the clock's times."""

    def __init__(self, repository: str, api_url: str, server_url: str, epoch: datetime) -> None:
        """`epoch` is the wall-clock time of virtual second 0."""
        self.repository = repository
        self.owner = repository.split("/", 1)[0]
        self.repo_api = f"{api_url}/repos/{repository}"
        self.api_url = api_url
        self.server_url = server_url
        self.epoch = epoch
        #: built once: every run carries them twice, and a run is rendered even for a 304
        self._user = self._build_user()
        self._repo = self._build_repo()
        #: ...and encoded once: they are most of a run's JSON (`encode`); never changed after
        self._shared = {
            json.dumps(_SHARED.format(name)): json.dumps(value)
            for name, value in (("user", self._user), ("repo", self._repo))
        }
        self._times: dict[int, str] = {}
        self._bots: dict[str, dict[str, Any]] = {}  # an App's bot by login, built once

    def time(self, seconds: float) -> str:
        """ISO-8601 UTC, whole seconds, as GitHub writes timestamps."""
        whole = int(seconds)
        text = self._times.get(whole)
        if text is None:  # a run is read every few seconds, at the same few moments
            stamp = self.epoch + timedelta(seconds=whole)
            text = self._times[whole] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        return text

    def http_date(self, seconds: float) -> str:
        """The `Date` GitHub sends with every reply (RFC 9110), to the second, rounded down."""
        return format_datetime(self.epoch + timedelta(seconds=math.floor(seconds)), usegmt=True)

    def encode(self, payload: Any) -> bytes:
        """`json.dumps(payload).encode()`, byte for byte, faster.

        The user and the repository every run shares are encoded once: a run's JSON is mostly
        those two objects, twice each.
        """
        if not isinstance(payload, dict):
            return json.dumps(payload).encode()
        if isinstance(payload.get("workflow_runs"), list):
            payload = payload | {
                "workflow_runs": [self._marked(r) for r in payload["workflow_runs"]]
            }
        text = json.dumps(self._marked(payload))
        for marker, encoded in self._shared.items():
            text = text.replace(marker, encoded)
        return text.encode()

    def _marked(self, run: Any) -> Any:
        """A run with its shared objects replaced by markers (anything else as it is)."""
        if not isinstance(run, dict) or "head_repository" not in run:
            return run
        shared = {id(self._user): _SHARED.format("user"), id(self._repo): _SHARED.format("repo")}
        return {key: shared.get(id(value), value) for key, value in run.items()}

    def repo(self) -> dict[str, Any]:
        """The repository: a minimal-repository (a copy of the one every run shares)."""
        return copy.deepcopy(self._repo)

    def actor_login(self, run: FakeRun) -> str:
        """Who dispatched `run`: an App's bot, else the repository's user."""
        return run.actor or str(self._user["login"])

    def _actor(self, run: FakeRun) -> dict[str, Any]:
        """The run's `actor`: the shared user, or the bot of the App whose token dispatched it."""
        if run.actor is None:
            return self._user
        bot = self._bots.get(run.actor)
        if bot is None:
            number = 41898282 + len(self._bots) + 1  # near github-actions[bot]'s 41898282
            bot = self._bots[run.actor] = self._build_user(run.actor, number, "Bot")
        return bot

    def _build_user(
        self, login: str = "octocat", number: int = 583231, kind: str = "User"
    ) -> dict[str, Any]:
        """A simple-user; a bot's (`<slug>[bot]`) links to its App's page."""
        url = f"{self.api_url}/users/{quote(login)}"
        page = f"apps/{login.removesuffix('[bot]')}" if kind == "Bot" else login
        node = base64.b64encode(f"04:{kind}{number}".encode()).decode()
        return {
            "login": login,
            "id": number,
            "node_id": node if kind == "Bot" else "MDQ6VXNlcjU4MzIzMQ==",
            "avatar_url": f"https://avatars.githubusercontent.com/u/{number}?v=4",
            "gravatar_id": "",
            "url": url,
            "html_url": f"{self.server_url}/{page}",
            "followers_url": f"{url}/followers",
            "following_url": f"{url}/following{{/other_user}}",
            "gists_url": f"{url}/gists{{/gist_id}}",
            "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{url}/subscriptions",
            "organizations_url": f"{url}/orgs",
            "repos_url": f"{url}/repos",
            "events_url": f"{url}/events{{/privacy}}",
            "received_events_url": f"{url}/received_events",
            "type": kind,
            "site_admin": False,
        }

    def _build_repo(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": 1296269,
            "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5",
            "name": self.repository.split("/", 1)[1],
            "full_name": self.repository,
            "owner": self._user | {"login": self.owner},
            "private": True,
            "html_url": f"{self.server_url}/{self.repository}",
            "description": None,
            "fork": False,
            "url": self.repo_api,
        }
        for item in _REPO_URL_KEYS:
            key, suffix = item.split(":", 1)
            body[key] = self.repo_api + suffix
        return body

    def run(
        self, run: FakeRun, *, attempt: int | None = None, path_ref: bool = False
    ) -> dict[str, Any]:
        """A workflow-run (the current attempt, or an earlier one)."""
        status, conclusion, updated, started = (
            run.status,
            run.conclusion,
            run.updated_at,
            run.started_at,
        )
        number = run.attempt if attempt is None else attempt
        if number != run.attempt:
            status, conclusion, updated, started = run.attempts[number]
        url = f"{self.repo_api}/actions/runs/{run.id}"
        path = f".github/workflows/{run.workflow_file}"
        return {
            "id": run.id,
            "name": run.workflow_name,
            "node_id": f"WFR_sim{run.id}",
            "check_suite_id": run.id + 1,
            "check_suite_node_id": f"CS_sim{run.id}",
            "head_branch": run.head_branch,
            "head_sha": run.head_sha,
            "path": f"{path}@{run.head_branch}" if path_ref else path,
            "display_title": run.display_title,
            "run_number": run.run_number,
            "event": run.event,
            "status": status,
            "conclusion": conclusion,
            "workflow_id": run.workflow_id,
            "url": url,
            "html_url": f"{self.server_url}/{self.repository}/actions/runs/{run.id}",
            "pull_requests": [],
            "created_at": self.time(run.created_at),
            "updated_at": self.time(updated),
            "actor": self._actor(run),
            "triggering_actor": self._actor(run),
            "run_attempt": number,
            "referenced_workflows": [],
            "run_started_at": self.time(started),
            "jobs_url": f"{url}/jobs",
            "logs_url": f"{url}/logs",
            "check_suite_url": f"{self.repo_api}/check-suites/{run.id + 1}",
            "artifacts_url": f"{url}/artifacts",
            "cancel_url": f"{url}/cancel",
            "rerun_url": f"{url}/rerun",
            "previous_attempt_url": f"{url}/attempts/{number - 1}" if number > 1 else None,
            "workflow_url": f"{self.repo_api}/actions/workflows/{run.workflow_id}",
            "head_commit": self.commit(run.head_sha, run.created_at),
            "repository": self._repo,
            "head_repository": self._repo,
        }

    def commit(self, sha: str, at: float) -> dict[str, Any]:
        """A simple-commit."""
        person = {"name": "Mona Lisa", "email": "mona@github.test"}
        return {
            "id": sha,
            "tree_id": sha[::-1],
            "message": "Update workflows",
            "timestamp": self.time(at),
            "author": person,
            "committer": person,
        }

    def job(self, run: FakeRun, job: FakeJob) -> dict[str, Any]:
        """A job."""
        url = f"{self.repo_api}/actions/jobs/{job.id}"
        return {
            "id": job.id,
            "run_id": run.id,
            "run_url": f"{self.repo_api}/actions/runs/{run.id}",
            "run_attempt": run.attempt,
            "node_id": f"CR_sim{job.id}",
            "head_sha": run.head_sha,
            "url": url,
            "html_url": f"{self.server_url}/{self.repository}/actions/runs/{run.id}/job/{job.id}",
            "status": job.status,
            "conclusion": job.conclusion,
            "created_at": self.time(job.created_at),
            "started_at": self.time(job.created_at if job.started_at is None else job.started_at),
            "completed_at": None if job.completed_at is None else self.time(job.completed_at),
            "name": job.name,
            "steps": [self.step(step) for step in job.steps],
            "check_run_url": f"{self.repo_api}/check-runs/{job.id}",
            "labels": list(job.labels),
            "runner_id": job.runner_id,
            "runner_name": job.runner_name,
            "runner_group_id": job.runner_group_id,
            "runner_group_name": job.runner_group_name,
            "workflow_name": run.workflow_name,
            "head_branch": run.head_branch,
        }

    def step(self, step: FakeStep) -> dict[str, Any]:
        """One item of a job's `steps`."""
        return {
            "name": step.name,
            "status": step.status,
            "conclusion": step.conclusion,
            "number": step.number,
            "started_at": None if step.started_at is None else self.time(step.started_at),
            "completed_at": None if step.completed_at is None else self.time(step.completed_at),
        }

    def git_ref(self, ref: str, sha: str, *, kind: str = "commit") -> dict[str, Any]:
        """A git-ref; `kind` is `tag` when it points at an annotated tag object."""
        return {
            "ref": f"refs/{ref}",
            "node_id": f"REF_sim{sha[:12]}",
            "url": f"{self.repo_api}/git/refs/{ref}",
            "object": {"type": kind, "sha": sha, "url": f"{self.repo_api}/git/{kind}s/{sha}"},
        }

    def git_tag(self, tag_sha: str, name: str, commit: str) -> dict[str, Any]:
        """A git-tag: an annotated tag object and the commit it points at."""
        return {
            "node_id": f"TAG_sim{tag_sha[:12]}",
            "tag": name,
            "sha": tag_sha,
            "url": f"{self.repo_api}/git/tags/{tag_sha}",
            "message": f"Release {name}",
            "tagger": {"date": self.time(0.0), "email": "release@example.test", "name": "Release"},
            "object": {
                "sha": commit,
                "type": "commit",
                "url": f"{self.repo_api}/git/commits/{commit}",
            },
        }

    def comparison(
        self,
        basehead: str,
        found: Comparison,
        trees: Mapping[str, Tree],
        parents: Mapping[str, str],
    ) -> dict[str, Any]:
        """A commit-comparison, as GitHub answers it unpaginated.

        The base, the merge base, head's own commits (oldest first, at most 250) and the files
        that differ between the two trees.
        """
        web = f"{self.server_url}/{self.repository}/compare/{basehead}"
        owner, base, head = self.owner, found.base, found.head

        def commit(sha: str) -> dict[str, Any]:
            return self._full_commit(sha, parents.get(sha))

        return {
            "url": f"{self.repo_api}/compare/{basehead}",
            "html_url": web,
            "permalink_url": (
                f"{self.server_url}/{self.repository}/compare/{owner}:{base}...{owner}:{head}"
            ),
            "diff_url": f"{web}.diff",
            "patch_url": f"{web}.patch",
            "base_commit": commit(base),
            "merge_base_commit": commit(found.merge_base),
            "status": found.status,
            "ahead_by": len(found.ahead),
            "behind_by": found.behind_by,
            "total_commits": len(found.ahead),
            "commits": [commit(sha) for sha in found.ahead[:250]],
            "files": self._changed_files(trees[base], trees[head], head),
        }

    def _full_commit(self, sha: str, parent: str | None) -> dict[str, Any]:
        """A commit, as the compare endpoint lists it (no stats, no files)."""
        url = f"{self.repo_api}/commits/{sha}"
        person = {"name": "Mona Lisa", "email": "mona@github.test", "date": self.time(0.0)}
        parents = [] if parent is None else [parent]
        return {
            "url": url,
            "sha": sha,
            "node_id": f"C_sim{sha[:12]}",
            "html_url": f"{self.server_url}/{self.repository}/commit/{sha}",
            "comments_url": f"{url}/comments",
            "commit": {
                "url": f"{self.repo_api}/git/commits/{sha}",
                "author": person,
                "committer": person,
                "message": "Update workflows",
                "comment_count": 0,
                "tree": {"sha": sha[::-1], "url": f"{self.repo_api}/git/trees/{sha[::-1]}"},
            },
            "author": self._user,
            "committer": self._user,
            "parents": [
                {
                    "sha": p,
                    "url": f"{self.repo_api}/commits/{p}",
                    "html_url": f"{self.server_url}/{self.repository}/commit/{p}",
                }
                for p in parents
            ],
        }

    def _changed_files(self, old: Tree, new: Tree, head: str) -> list[dict[str, Any]]:
        """The diff-entries of the files that differ between two trees, by path."""
        entries = []
        for path in sorted(set(old) | set(new)):
            before, after = old.get(path), new.get(path)
            if before is not None and after is not None and before.sha == after.sha:
                continue
            a = [] if before is None else before.content.splitlines()
            b = [] if after is None else after.content.splitlines()
            ops = difflib.SequenceMatcher(None, a, b).get_opcodes()
            added = sum(j2 - j1 for tag, _, _, j1, j2 in ops if tag in {"replace", "insert"})
            removed = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag in {"replace", "delete"})
            status = "added" if before is None else "removed" if after is None else "modified"
            entries.append(
                {
                    "sha": None if after is None else after.sha,
                    "filename": path,
                    "status": status,
                    "additions": added,
                    "deletions": removed,
                    "changes": added + removed,
                    "blob_url": f"{self.server_url}/{self.repository}/blob/{head}/{path}",
                    "raw_url": f"{self.server_url}/{self.repository}/raw/{head}/{path}",
                    "contents_url": f"{self.repo_api}/contents/{path}?ref={head}",
                }
            )
        return entries

    def content_file(self, path: str, ref: str, wf: WorkflowFile) -> dict[str, Any]:
        """A content-file (`sha` is the blob SHA)."""
        self_url = f"{self.repo_api}/contents/{path}?ref={ref}"
        git_url = f"{self.repo_api}/git/blobs/{wf.sha}"
        html_url = f"{self.server_url}/{self.repository}/blob/{ref}/{path}"
        encoded = base64.encodebytes(wf.content.encode()).decode()
        return {
            "type": "file",
            "encoding": "base64",
            "size": len(wf.content.encode()),
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "content": encoded,
            "sha": wf.sha,
            "url": self_url,
            "git_url": git_url,
            "html_url": html_url,
            "download_url": f"https://raw.githubusercontent.test/{self.repository}/{ref}/{path}",
            "_links": {"self": self_url, "git": git_url, "html": html_url},
        }


def error(message: str, status: int, docs: str = DOCS) -> dict[str, Any]:
    """GitHub's basic-error body."""
    return {"message": message, "documentation_url": docs, "status": str(status)}
