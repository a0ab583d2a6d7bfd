"""The GitHub REST client: dispatch once, read and cancel with the specification's retries.

`GitHubClient` is the one object the action's steps hold. It composes the concerns, each a module
of `github/`: `transport` (one exchange: send, parse, map errors, redact), `versions` (the API
version, and its one move with `auto`), `quota` (the quota's state and waits), `calls` (attempts
under `retry`, the deadline and the quota), and the endpoints `runs`, `listing` (pagination) and
`refs`. Every request goes out through `_send`; the token never appears in a message, log or repr.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Final

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.api_versions import NEWER
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.github.calls import Calls
from runner_queue_fallback.github.installations import AppEndpoints
from runner_queue_fallback.github.listing import Listing, WindowListing
from runner_queue_fallback.github.models import (
    CancelOutcome,
    CommitComparison,
    ContentFile,
    DispatchResult,
    Job,
    RateLimitOverview,
    WorkflowRun,
    WorkflowRunList,
)
from runner_queue_fallback.github.quota import Quota, RequestStats
from runner_queue_fallback.github.refs import Refs
from runner_queue_fallback.github.retry import Patience
from runner_queue_fallback.github.runner_groups import RunnerReads
from runner_queue_fallback.github.runs import Runs
from runner_queue_fallback.github.tokens import TokenSource
from runner_queue_fallback.github.transport import USER_AGENT, Transport, api_path
from runner_queue_fallback.github.versions import VersionNegotiation

if TYPE_CHECKING:
    import requests

__all__ = [
    "API_VERSION",
    "USER_AGENT",
    "GitHubClient",
    "RequestStats",
    "WindowListing",
    "api_path",
]

#: The preferred version. Ref: https://docs.github.com/rest/about-the-rest-api/api-versions
API_VERSION: Final = NEWER


class GitHubClient:
    """Talk to one repository through the GitHub REST API (2026-03-10, or 2022-11-28).

    `deadline` arguments are absolute `clock.monotonic()` values (None: no deadline) that every
    attempt and retry wait of the call shares.

    Reads and cancellation raise, after the retries the specification allows:
        TransportError: network error, timeout or malformed JSON on every attempt.
        ServerError: 408/5xx on every attempt.
        RateLimited: still rate limited after two capped waits.
        PermissionDenied: 401, or 403 that is not a rate limit (never retried).
        NotFound, Conflict, Unprocessable, GitHubAPIError: 404, 409 (for cancel: CancelRefused,
            only when a fresh read shows the run not completed), 422 and other statuses
            (never retried; the caller decides).
        DeadlineExceeded: the deadline passed before a usable reply (a late reply, or a retry
            wait that would end past it); `last_error` says what the last attempt got. Its
            subclass QuotaSpent: the wait past it was for a spent primary quota's reset.
    """

    def __init__(
        self,
        session: requests.Session,
        api_url: str,
        repository: str,
        token: str | TokenSource,
        clock: Clock,
        *,
        timeout: float = timing.REQUEST_TIMEOUT_SECONDS,
        conditional: bool = True,
        log: Callable[[str], None] | None = None,
        api_version: str = NEWER,
    ) -> None:
        """Use `session` (whose own retries stay off) against `api_url` for `owner/name`.

        `api_version`: `2026-03-10`, `2022-11-28` or `auto` (detect on the first reply; what the
        action's steps pass by default, from their `api-version` input). `token`: one token for
        every request, or a `TokenSource` asked before each (`github.app_token`'s App tokens).
        """
        owner, _, name = repository.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"repository must be 'owner/name', got {repository!r}")
        self._versions = VersionNegotiation(api_version, log)
        self._repository = repository
        self._token = token  # read by the fuzz harness's recorder of sends; sent by the transport
        self.stats = RequestStats()
        self._transport = Transport(
            session,
            api_url,
            token,
            clock,
            stats=self.stats,
            versions=self._versions,
            timeout=timeout,
            conditional=conditional,
        )
        self._quota = Quota(self.stats, clock, log)
        # `_send` is looked up at each request, so a wrapped `_send` (the fuzz harness's) sees all.
        send = lambda *args, **kwargs: self._send(*args, **kwargs)  # noqa: E731, PLW0108  # late-bound
        repo_path = api_path("repos", owner, name)
        calls = Calls(self._transport, self._quota, clock, send=send, log=log, repo_path=repo_path)
        self._calls, self._runs = calls, Runs(calls, self._versions)
        self._listing, self._refs = Listing(calls), Refs(calls)
        #: The runner-group reads (`github.runner_groups`): made only by a `runners-token` client.
        self.runner_reads = RunnerReads(calls, repository)
        #: The App's endpoints (`github.installations`): sent only by a client on the App's JWT.
        self.app_endpoints = AppEndpoints(calls, repository)

    def __repr__(self) -> str:
        """Show where the client points, never its token."""
        return (
            f"GitHubClient(api_url={self._transport.api_url!r}, repository={self._repository!r}, "
            f"conditional={self._transport.conditional})"
        )

    # -- the state the sequence reads and sets --------------------------------------------

    @property
    def version(self) -> str:
        """The API version every request asks for now; with `auto` it may move to 2022-11-28 once."""
        return self._versions.version

    @property
    def older_contract(self) -> bool:
        """Whether this run speaks 2022-11-28: a dispatch reply carries no run id."""
        return self._versions.older_contract

    @property
    def patience(self) -> Patience:
        """How long calls may wait out a rate limit (CHILD_EXISTS while a child is left)."""
        return self._quota.patience

    @patience.setter
    def patience(self, value: Patience) -> None:
        self._quota.patience = value

    @property
    def on_quota_wait(self) -> Callable[[float], None] | None:
        """Told the seconds of a wait for the quota's reset before it is taken (or None)."""
        return self._quota.on_wait

    @on_quota_wait.setter
    def on_quota_wait(self, value: Callable[[float], None] | None) -> None:
        self._quota.on_wait = value

    # -- runs (`github.runs`) ---------------------------------------------------------------

    def dispatch_workflow(
        self, workflow: str, ref: str, inputs: Mapping[str, str]
    ) -> DispatchResult | None:
        """Dispatch once, never retried; None on the older contract (`Runs.dispatch_workflow`)."""
        return self._runs.dispatch_workflow(workflow, ref, inputs)

    def get_run(
        self, run_id: int, *, deadline: float | None = None, accept_late: bool = False
    ) -> WorkflowRun:
        """Read a workflow run (its latest attempt); `accept_late`: see `Runs.get_run`."""
        return self._runs.get_run(run_id, deadline=deadline, accept_late=accept_late)

    def get_run_attempt(
        self, run_id: int, attempt: int, *, deadline: float | None = None
    ) -> WorkflowRun:
        """Read one attempt of a workflow run."""
        return self._runs.get_run_attempt(run_id, attempt, deadline=deadline)

    def list_attempt_jobs(
        self,
        run_id: int,
        attempt: int,
        *,
        deadline: float | None = None,
        accept_late: bool = False,
    ) -> list[Job]:
        """List the jobs of one run attempt (first page of 100: a child has one job)."""
        return self._runs.list_attempt_jobs(
            run_id, attempt, deadline=deadline, accept_late=accept_late
        )

    def cancel_run(self, run_id: int, *, deadline: float | None = None) -> CancelOutcome:
        """Ask GitHub to cancel a run; a 409 is checked by a fresh read (`Runs.cancel`)."""
        return self._runs.cancel(run_id, "cancel", deadline)

    def force_cancel_run(self, run_id: int, *, deadline: float | None = None) -> CancelOutcome:
        """Cancel a run bypassing `always()` conditions; a 409 is read as `cancel_run` reads it."""
        return self._runs.cancel(run_id, "force-cancel", deadline)

    # -- listing runs (`github.listing`) ----------------------------------------------------

    def find_runs_by_name(
        self,
        workflow: str,
        run_name: str,
        *,
        created_after: datetime,
        deadline: float | None = None,
    ) -> list[WorkflowRun]:
        """Find `workflow_dispatch` runs of `workflow` whose run-name is exactly `run_name`."""
        return self._listing.find_runs_by_name(
            workflow, run_name, created_after=created_after, deadline=deadline
        )

    def iter_workflow_runs(
        self,
        workflow: str,
        *,
        created_after: datetime,
        per_page: int = 100,
        deadline: float | None = None,
    ) -> Generator[WorkflowRunList]:
        """Pages of `workflow_dispatch` runs of `workflow` created at or after `created_after`."""
        return self._listing.iter_workflow_runs(
            workflow, created_after=created_after, per_page=per_page, deadline=deadline
        )

    def list_runs_created_between(
        self,
        workflow: str | int,
        start: datetime,
        end: datetime,
        *,
        max_requests: int,
        deadline: float | None = None,
    ) -> WindowListing:
        """Every `workflow_dispatch` run created from `start` to `end`, and whether that is all.

        A window past the 1,000 runs GitHub lists per query is split; at most `max_requests`
        list requests are sent (`Listing.list_runs_created_between`).
        """
        return self._listing.list_runs_created_between(
            workflow, start, end, max_requests=max_requests, deadline=deadline
        )

    def iter_runs_created_in(
        self, workflow: str, start: datetime, end: datetime, *, per_page: int = 100
    ) -> Generator[WorkflowRunList]:
        """Pages of `workflow_dispatch` runs created from `start` to `end` (for `stats`)."""
        return self._listing.iter_runs_created_in(workflow, start, end, per_page=per_page)

    # -- refs and files (`github.refs`) -----------------------------------------------------

    def get_ref_sha(self, ref: str, *, deadline: float | None = None) -> str:
        """The SHA a fully qualified ref points at (an annotated tag's own SHA)."""
        return self._refs.get_ref_sha(ref, deadline=deadline)

    def get_commit_sha(self, ref: str, *, deadline: float | None = None) -> str:
        """The commit a fully qualified ref points at, peeling an annotated tag to its commit."""
        return self._refs.get_commit_sha(ref, deadline=deadline)

    def compare_commits(
        self, base: str, head: str, *, deadline: float | None = None
    ) -> CommitComparison:
        """How `head` stands to `base`, each a commit SHA or a full ref (`Refs.compare`)."""
        return self._refs.compare(base, head, deadline=deadline)

    def get_file_sha(self, path: str, ref: str, *, deadline: float | None = None) -> str:
        """The blob SHA of the file `path` at `ref` (a branch, tag or commit SHA)."""
        return self.get_file(path, ref, deadline=deadline).sha

    def get_file(self, path: str, ref: str, *, deadline: float | None = None) -> ContentFile:
        """The file `path` at `ref`: its blob SHA and (up to 1 MB) its content, in one request."""
        return self._refs.get_file(path, ref, deadline=deadline)

    # -- the quota (`github.quota`) ---------------------------------------------------------

    def get_rate_limit(self, *, deadline: float | None = None) -> RateLimitOverview:
        """Read the quota (`GET /rate_limit`, not counted), for when no reply has said it yet."""
        overview = self._calls.get("/rate_limit", {}, RateLimitOverview, deadline, cacheable=False)
        self._quota.note_overview(overview)
        return overview

    def quota_known(self) -> bool:
        """Whether a reply said how much quota is left in the current window."""
        return self._quota.known()

    def seconds_to_reset(self) -> float:
        """Seconds until the known quota window resets (+1 s margin); 0 when none is known."""
        return self._quota.seconds_to_reset()

    def quota_reset_in(self) -> float | None:
        """Seconds until the quota resets when the last reply said it is spent; else None."""
        return self._quota.reset_in()

    def reset_time(self) -> str:
        """The known reset as a UTC time for log lines (`?` when none is known); never raises."""
        return self._quota.reset_time()

    def wait_for_quota_reset(self, wait: float) -> None:
        """Wait `wait` seconds for the quota's reset: the one such wait (`Quota.wait`)."""
        self._quota.wait(wait)

    def server_date(self) -> datetime | None:
        """GitHub's clock at its last reply (its `Date`, UTC); None until a reply said it."""
        return self.stats.server_date

    def _send(
        self,
        method: str,
        path: str,
        *,
        url: str | None = None,
        json: object = None,
        allow_redirects: bool = True,
        attempts: int = 1,
    ) -> requests.Response:
        """Send (`Transport.send`), note the quota; a first reply refusing 2026-03-10 resends."""
        url = url or self._url(path, {})
        response = self._transport.send(
            method, path, url=url, json=json, allow_redirects=allow_redirects, attempts=attempts
        )
        self._quota.note(response.headers)
        versions, status = self._versions, response.status_code
        message = functools.partial(self._transport.message, response)  # read only if needed
        if versions.detecting and versions.refused_first(method, path, status, message):
            return self._send(
                method, path, url=url, json=json, allow_redirects=allow_redirects, attempts=attempts
            )
        return response

    def _url(self, path: str, params: Mapping[str, str]) -> str:
        """The full URL of an API path (`Transport.url`)."""
        return self._transport.url(path, params)
