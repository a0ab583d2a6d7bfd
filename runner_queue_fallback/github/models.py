"""Typed views of the GitHub REST replies the action reads (API version 2026-03-10).

Each model keeps only the fields the coordinator, guard and cleanup use; everything else in
GitHub's reply is ignored, so additive API changes never break parsing. Models are frozen: a
reply is an observation, not something to edit.
"""

from __future__ import annotations

import base64
import binascii
import enum
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CancelOutcome",
    "CommitComparison",
    "ContentFile",
    "DispatchResult",
    "GitObject",
    "GitRef",
    "GitTag",
    "Job",
    "JobList",
    "RateLimitOverview",
    "RepositoryName",
    "Step",
    "WorkflowRun",
    "WorkflowRunList",
]


class _Reply(BaseModel):
    """Base of every reply model: unknown fields ignored, instances immutable."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class DispatchResult(_Reply):
    """The 200 body of a 2026-03-10 workflow dispatch: the new run's id and links."""

    workflow_run_id: int
    run_url: str
    html_url: str


class RepositoryName(_Reply):
    """The part of a repository the guard compares: its `owner/name`."""

    full_name: str


class WorkflowRun(_Reply):
    """One workflow run, or one attempt of it (`GET .../runs/{id}[/attempts/{n}]`)."""

    id: int
    name: str | None
    display_title: str
    path: str
    event: str
    status: str | None
    conclusion: str | None
    head_sha: str
    head_branch: str | None
    run_attempt: int
    html_url: str
    created_at: datetime
    updated_at: datetime
    #: when the latest attempt started ("Resets on re-run"); the guard binds a child to it
    run_started_at: datetime | None = None
    #: the guard lists its own workflow's runs by this id (required by GitHub's schema)
    workflow_id: int | None = None
    #: where the run's code came from: a fork's pull request names the fork (the guard's
    #: `coordinator-ref` check)
    head_repository: RepositoryName | None = None

    @property
    def workflow_file_path(self) -> str:
        """The workflow file path without the `@ref` suffix GitHub sometimes appends.

        GitHub shows both `.github/workflows/x.yml` and `.github/workflows/x.yml@main`.
        """
        return self.path.split("@", 1)[0]


class WorkflowRunList(_Reply):
    """A page of `GET .../actions/workflows/{workflow}/runs`."""

    total_count: int
    workflow_runs: list[WorkflowRun]


class Step(_Reply):
    """One step of a job."""

    name: str
    status: str
    conclusion: str | None
    number: int
    started_at: datetime | None = None


class Job(_Reply):
    """One job of a run attempt, with the runner it was given (if any)."""

    id: int
    run_id: int
    run_attempt: int | None = None
    name: str
    status: str
    conclusion: str | None
    labels: list[str]
    runner_id: int | None
    runner_name: str | None
    runner_group_name: str | None
    html_url: str | None
    started_at: datetime | None
    created_at: datetime | None = None  # read by `stats` (queue waits); required by GitHub
    completed_at: datetime | None = None
    steps: list[Step] = Field(default_factory=list)

    @property
    def has_runner(self) -> bool:
        """Whether a runner was assigned: a non-zero `runner_id` or a non-empty `runner_name`.

        A queued job shows null runner fields; a job cancelled before it was ever dispatched to
        a runner has been seen with `runner_id: 0` and an empty name. Null, 0 and "" all mean
        "unassigned". The group name alone is not taken as evidence.
        """
        return bool(self.runner_id) or bool(self.runner_name)


class JobList(_Reply):
    """A page of `GET .../runs/{id}/attempts/{n}/jobs`."""

    total_count: int
    jobs: list[Job]


class GitObject(_Reply):
    """The object a git ref points at (a commit, or a tag object for an annotated tag)."""

    type: str
    sha: str


class GitRef(_Reply):
    """`GET /repos/{o}/{r}/git/ref/{ref}`."""

    ref: str
    object: GitObject


class GitTag(_Reply):
    """`GET /repos/{o}/{r}/git/tags/{sha}`: an annotated tag object and what it points at."""

    sha: str
    object: GitObject


class CommitComparison(_Reply):
    """`GET /repos/{o}/{r}/compare/{base}...{head}`: how head stands to base.

    `status`: `identical`, `ahead` (head has commits base has not, and base none that head has
    not), `behind` or `diverged`. Ref: https://docs.github.com/rest/commits/commits#compare-two-commits
    """

    status: str
    ahead_by: int
    behind_by: int


class ContentFile(_Reply):
    """`GET /repos/{o}/{r}/contents/{path}` for a file; `sha` is the blob SHA.

    `content` is the file, base64-encoded, for files up to 1 MB; larger files come with
    `encoding: none` and no content. Ref: https://docs.github.com/rest/repos/contents
    """

    type: str
    path: str
    sha: str
    encoding: str | None = None
    content: str | None = None

    def text(self) -> str | None:
        """The file as text, or None when the reply carries no decodable content."""
        if self.encoding != "base64" or not self.content:
            return None
        try:
            return base64.b64decode(self.content).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None


class RateLimitWindow(_Reply):
    """One resource's quota in `GET /rate_limit`: `reset` is in UTC epoch seconds."""

    limit: int
    remaining: int
    reset: int


class RateLimitResources(_Reply):
    """The resources of `GET /rate_limit`; the REST API's quota is `core`."""

    core: RateLimitWindow


class RateLimitOverview(_Reply):
    """`GET /rate_limit` (2026-03-10 dropped the top-level `rate`: use `resources.core`)."""

    resources: RateLimitResources


class CancelOutcome(enum.Enum):
    """What GitHub said to a cancel or force-cancel request."""

    #: 202: the cancellation was accepted; it completes asynchronously.
    ACCEPTED = "accepted"
    #: 409, and a fresh read shows the run completed: there was nothing to cancel. A 409 for a
    #: run that is not completed is no outcome but an error (`CancelRefused`).
    ALREADY_COMPLETED = "already-completed"
