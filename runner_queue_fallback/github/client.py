"""The GitHub REST client: dispatch once, read and cancel with the specification's retries.

Every request carries the token, the API version header and a timeout. The version is 2026-03-10
unless the `api-version` input pins 2022-11-28, or, with `auto`, the first reply refuses
2026-03-10 or a dispatch answers 204: then the client moves to 2022-11-28 (`_refused_first`,
`_use_older`) and a dispatch reply carries no run id. Reads and cancellation go through
`retry.spec_retrying` on the injected Clock; the dispatch POST is sent exactly once. GETs are
conditional (ETag / If-None-Match): a 304 does not count against the primary rate limit and
returns the cached body.

The token is kept in one private header dict and never appears in a message, log line or repr.

Long (942 lines) because endpoints, version negotiation, the quota's state, sending and pagination
still share one class; issue 34 splits it by concern behind the same `GitHubClient` surface.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import requests
from pydantic import BaseModel, ValidationError

from runner_queue_fallback import timing
from runner_queue_fallback.clock import Clock
from runner_queue_fallback.errors import (
    CancelRefused,
    Conflict,
    DeadlineExceeded,
    DispatchAmbiguous,
    GitHubAPIError,
    GitHubError,
    NotFound,
    PermissionDenied,
    QuotaSpent,
    RateLimited,
    ServerError,
    TransportError,
    Unauthorized,
    Unprocessable,
)
from runner_queue_fallback.github.models import (
    CancelOutcome,
    ContentFile,
    DispatchResult,
    GitRef,
    GitTag,
    Job,
    JobList,
    RateLimitOverview,
    WorkflowRun,
    WorkflowRunList,
)
from runner_queue_fallback.github.retry import (
    DEADLINE_WINDOW,
    RESET_MARGIN_SECONDS,
    Patience,
    believable_reset,
    classify_rate_limit,
    describe_failure,
    spec_retrying,
)
from runner_queue_fallback.github.versions import (
    API_VERSION_CHOICES,
    AUTO,
    NEWER,
    OLDER,
    ApiVersionRefused,
    refuses_version,
)

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = ["API_VERSION", "USER_AGENT", "GitHubClient", "RequestStats", "api_path"]

#: The preferred version. Ref: https://docs.github.com/rest/about-the-rest-api/api-versions
API_VERSION: Final = NEWER
USER_AGENT: Final = "runner-queue-fallback"

_MESSAGE_LIMIT = 300
#: An error body larger than this is not parsed for its message (GitHub's are a few hundred bytes).
_ERROR_BODY_LIMIT = 64 * 1024
_MAX_DIGITS = 18
_MAX_TAG_HOPS = 3  # a tag of a tag of a tag is already unusual
#: A run-name search reads at most this many pages of 100 runs (GitHub lists at most 1,000 runs
#: for a filtered query).
_MAX_SEARCH_PAGES = 10
_ModelT = TypeVar("_ModelT", bound=BaseModel)
_T = TypeVar("_T")


def api_path(*segments: str | int) -> str:
    """The one place an API path is built: `/seg/seg/...`, each segment percent-encoded.

    Every character outside RFC 3986's unreserved set is encoded, `/` included, so a value is
    always exactly one segment; a value with several parts (a git ref, a file path) is passed
    as several segments. An empty segment, `.` or `..` is refused: percent-encoding keeps dots,
    and the HTTP stack would remove dot segments, so they could change which resource is read.

    Raises:
        GitHubError: a segment is empty, `.` or `..`.

    """
    parts = []
    for segment in segments:
        text = str(segment)
        if text in {"", ".", ".."}:
            raise GitHubError(
                f"refused to build an API path with the segment {text!r} "
                f"(from {'/'.join(str(s) for s in segments)!r}): it could change which resource "
                "is read"
            )
        parts.append(quote(text, safe=""))
    return "/" + "/".join(parts)


@dataclass(slots=True)
class RequestStats:
    """Counters of what the client sent, for logs and the rate-limit budget."""

    #: Every HTTP request handed to the session (including ones that then failed).
    sent: int = 0
    #: 304 Not Modified replies: they do not count against the primary rate limit.
    not_modified: int = 0
    #: The last `x-ratelimit-remaining` GitHub reported.
    rate_remaining: int | None = None
    #: The last `x-ratelimit-limit` GitHub reported (never assumed: Enterprise Cloud differs).
    rate_limit: int | None = None
    #: The last `x-ratelimit-reset` GitHub reported, in UTC epoch seconds.
    rate_reset: float | None = None
    #: Retry waits taken.
    retries: int = 0
    #: Seconds spent waiting for a spent quota to reset (only while a child exists).
    quota_waited: float = 0.0

    @property
    def counted(self) -> int:
        """Requests that count against the primary rate limit: sent minus 304s."""
        return self.sent - self.not_modified


@dataclass(frozen=True, slots=True)
class _Cached:
    """A GET body kept for conditional requests."""

    etag: str
    body: bytes


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
        token: str,
        clock: Clock,
        *,
        timeout: float = timing.REQUEST_TIMEOUT_SECONDS,
        conditional: bool = True,
        log: Callable[[str], None] | None = None,
        api_version: str = NEWER,
    ) -> None:
        """Use `session` (whose own retries stay off) against `api_url` for `owner/name`.

        `api_version`: `2026-03-10`, `2022-11-28` or `auto` (detect on the first reply; what the
        action's steps pass by default, from their `api-version` input).
        """
        owner, _, name = repository.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"repository must be 'owner/name', got {repository!r}")
        if api_version not in API_VERSION_CHOICES:
            raise ValueError(
                f"api_version must be one of {API_VERSION_CHOICES}, got {api_version!r}"
            )
        #: The API version every request asks for now; with `auto` it may move to 2022-11-28 once.
        self.version: str = NEWER if api_version == AUTO else api_version
        self._auto = api_version == AUTO
        self._detecting = self._auto  # until a reply settles the version
        self._session = session
        self._api_url = api_url.rstrip("/")
        self._repository = repository
        self._repo_path = api_path("repos", owner, name)
        self._clock = clock
        self._timeout = timeout
        self._conditional = conditional
        self._log = log
        self._token = token
        self._headers: Final = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "User-Agent": USER_AGENT,
        }
        self._cache: dict[str, _Cached] = {}
        self._links: dict[str, str] = {}  # the Link header of each cached list page
        self.stats = RequestStats()
        #: How long calls may wait out a rate limit: the sequence sets CHILD_EXISTS while it has
        #: a child to watch or clean up, and SPEC again once none is left.
        self.patience = Patience.SPEC
        #: Called with the seconds of a wait for a spent quota's reset, before it is taken: the
        #: sequence warns when such a wait would outlast its job (None: nobody is told).
        self.on_quota_wait: Callable[[float], None] | None = None

    def __repr__(self) -> str:
        """Show where the client points, never its token."""
        return (
            f"GitHubClient(api_url={self._api_url!r}, repository={self._repository!r}, "
            f"conditional={self._conditional})"
        )

    # -- dispatch -------------------------------------------------------------------------

    def dispatch_workflow(
        self, workflow: str, ref: str, inputs: Mapping[str, str]
    ) -> DispatchResult | None:
        """Dispatch `workflow` at `ref` once; never retried.

        Returns the run details, or None on the older contract (2022-11-28): `204 No Content`
        means "accepted, run unknown", and the run is found by its run-name (`find_runs_by_name`).
        With `auto`, the version is settled by a read first if no reply has settled it yet: the
        POST itself is never the probe, since it cannot be sent twice.

        Raises:
            DispatchAmbiguous: transport error, timeout, 408/5xx, or a 2xx without the expected
                JSON: a run may exist; recover it by run-name (`find_runs_by_name`).
            GitHubAPIError: any other status (a subclass for 401/403, 404, 409, 422, rate
                limits): definite, no run was created.

        """
        if self._detecting:
            self._probe_version(workflow)
        path = self._path("actions", "workflows", workflow, "dispatches")
        try:
            response = self._send(
                "POST", path, json={"ref": ref, "inputs": dict(inputs)}, allow_redirects=False
            )
        except TransportError as exc:
            raise DispatchAmbiguous(path, exc.detail) from None
        status = response.status_code
        request_id = _request_id(response)
        if status == 200:
            try:
                return DispatchResult.model_validate_json(response.content)
            except ValidationError:
                raise DispatchAmbiguous(
                    path, f"200 reply without the expected run details{request_id}"
                ) from None
        if status == 204 and self.version == OLDER:
            return None
        if status == 204 and self._may_move:
            self._use_older(
                f"the server answered a dispatch with 204 No Content{request_id}: it ignores "
                f"API version {NEWER}"
            )
            return None
        if 200 <= status < 300:
            raise DispatchAmbiguous(
                path,
                f"HTTP {status} without run details{request_id}; the server does not keep API "
                f"version {self.version}'s dispatch contract: set the input 'api-version' to "
                f"auto (the default) or {OLDER}",
            )
        if status == 408 or status >= 500:
            raise DispatchAmbiguous(path, f"HTTP {status}{request_id}")
        raise self._api_error("POST", path, response, attempts=1)

    # -- reads ----------------------------------------------------------------------------

    def get_run(
        self, run_id: int, *, deadline: float | None = None, accept_late: bool = False
    ) -> WorkflowRun:
        """Read a workflow run (its latest attempt).

        `accept_late`: a reply to a request sent before the deadline counts even if it arrives
        after it (the startup window: "in-flight requests can extend the observation window").
        """
        path = self._path("actions", "runs", run_id)
        return self._get(path, {}, WorkflowRun, deadline, accept_late=accept_late)

    def get_run_attempt(
        self, run_id: int, attempt: int, *, deadline: float | None = None
    ) -> WorkflowRun:
        """Read one attempt of a workflow run."""
        path = self._path("actions", "runs", run_id, "attempts", attempt)
        return self._get(path, {}, WorkflowRun, deadline)

    def list_attempt_jobs(
        self,
        run_id: int,
        attempt: int,
        *,
        deadline: float | None = None,
        accept_late: bool = False,
    ) -> list[Job]:
        """List the jobs of one run attempt (first page of 100: a child has one job)."""
        path = self._path("actions", "runs", run_id, "attempts", attempt, "jobs")
        params = {"per_page": "100"}
        return self._get(path, params, JobList, deadline, accept_late=accept_late).jobs

    def find_runs_by_name(
        self,
        workflow: str,
        run_name: str,
        *,
        created_after: datetime,
        deadline: float | None = None,
    ) -> list[WorkflowRun]:
        """Find `workflow_dispatch` runs of `workflow` whose run-name is exactly `run_name`.

        Used to find a run whose dispatch reply carried no run id (the older contract) or was
        lost. `created_after` must be timezone-aware; it is sent to second precision as
        `created=>=...`. Every page of 100 runs is read, newest first, following `Link` on the
        API host (`iter_workflow_runs`), at most 10: a match on the first page may be a copy,
        and the run dispatched first is listed last. Pass the same `created_after` on every
        search of one run: the same URLs then answer 304 when nothing changed, which does not
        count against the rate limit.
        """
        found: list[WorkflowRun] = []
        pages = self.iter_workflow_runs(workflow, created_after=created_after, deadline=deadline)
        for number, page in enumerate(pages, start=1):
            found += [run for run in page.workflow_runs if run.display_title == run_name]
            if number >= _MAX_SEARCH_PAGES:
                break
        return found

    def iter_workflow_runs(
        self,
        workflow: str,
        *,
        created_after: datetime,
        per_page: int = 100,
        deadline: float | None = None,
    ) -> Generator[WorkflowRunList]:
        """Pages of `workflow_dispatch` runs of `workflow` created at or after `created_after`.

        Newest first, as GitHub lists them. The next page is the `Link: rel="next"` URL, followed
        only while it stays on the API host (same scheme, host and port, under the API path);
        a link anywhere else raises TransportError without being requested. The caller bounds
        the cost by stopping the iteration. Pages are conditional requests like every GET.
        Raises NotFound when the workflow file does not exist.
        """
        if created_after.tzinfo is None:
            raise ValueError("created_after must be timezone-aware")
        since = created_after.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        path = self._path("actions", "workflows", workflow, "runs")
        params = {
            "event": "workflow_dispatch",
            "created": f">={since}",
            "per_page": str(max(1, min(100, per_page))),
        }
        url: str | None = self._url(path, params)
        while url is not None:
            page, link = self._get_page(url, path, deadline)
            yield page
            url = self._next_on_api_host(link, path)

    def list_runs_created_between(
        self,
        workflow: str | int,
        start: datetime,
        end: datetime,
        *,
        deadline: float | None = None,
    ) -> tuple[list[WorkflowRun], bool]:
        """Every `workflow_dispatch` run of `workflow` created from `start` to `end`, both included.

        For the guard, which must see every run bearing its request id before its own, not only
        the first page holding one. The range is sent as `created=<start>..<end>` (whole seconds,
        `end` rounded up); pages of 100 are read newest first, following `Link` on the API host,
        at most 10 of them. Returns the runs (each once) and whether the listing is complete:
        False when a page remains after the 10th or `total_count` says more runs than were seen
        (GitHub lists at most 1,000 runs per query).
        """
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("start and end must be timezone-aware")
        since = start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        whole_end = end.astimezone(UTC)
        if whole_end.microsecond:
            whole_end += timedelta(seconds=1)
        until = whole_end.strftime("%Y-%m-%dT%H:%M:%SZ")
        path = self._path("actions", "workflows", workflow, "runs")
        params = {"event": "workflow_dispatch", "created": f"{since}..{until}", "per_page": "100"}
        url: str | None = self._url(path, params)
        runs: dict[int, WorkflowRun] = {}
        total = 0
        for _ in range(_MAX_SEARCH_PAGES):
            if url is None:
                return list(runs.values()), len(runs) >= total
            page, link = self._get_page(url, path, deadline)
            runs.update((run.id, run) for run in page.workflow_runs if run.id not in runs)
            total = page.total_count
            url = self._next_on_api_host(link, path)
        return list(runs.values()), url is None and len(runs) >= total

    def _get_page(
        self, url: str, path: str, deadline: float | None = None
    ) -> tuple[WorkflowRunList, str]:
        """GET one list page by its full URL; the page and its `Link` header (kept for 304s)."""

        def attempt(number: int) -> tuple[WorkflowRunList, str]:
            response = self._checked_send("GET", path, url, number, deadline)
            cached = self._cache.get(url)
            if response.status_code == 304 and self._conditional and cached is not None:
                self.stats.not_modified += 1
                body, link = cached.body, self._links.get(url, "")
            elif response.status_code == 200:
                body, link = response.content, response.headers.get("Link", "")
            else:
                raise self._api_error("GET", path, response, attempts=number)
            parsed = self._parse("GET", path, body, WorkflowRunList, number)
            etag = response.headers.get("ETag")
            if self._conditional and response.status_code == 200 and etag:
                self._cache[url] = _Cached(etag, body)
                self._links[url] = link
            return parsed, link

        return self._retrying("GET", path, deadline, attempt)

    def _next_on_api_host(self, link: str, path: str) -> str | None:
        """The `rel="next"` URL of a Link header, refused unless it is under the API URL."""
        target = _next_link(link)
        if target is None:
            return None
        api, found = urlsplit(self._api_url), urlsplit(target)
        same_origin = (found.scheme, found.netloc) == (api.scheme, api.netloc)
        if not same_origin or not found.path.startswith(api.path.rstrip("/") + "/"):
            shown = quote(f"{found.scheme}://{found.netloc}", safe=":/")[:100]
            raise TransportError(
                "GET", path, f"pagination link to {shown} is not on the API host; not followed"
            )
        return target

    def get_ref_sha(self, ref: str, *, deadline: float | None = None) -> str:
        """The SHA a fully qualified ref points at.

        Accepts `refs/heads/x`, `heads/x`, `refs/tags/v1`, `refs/pull/5/merge`...; a bare
        branch name is not qualified and GitHub answers 404. For an annotated tag the SHA is
        the tag object's, not the commit's.
        """
        path = self._path("git", "ref", *ref.removeprefix("refs/").split("/"))
        return self._get(path, {}, GitRef, deadline).object.sha

    def get_commit_sha(self, ref: str, *, deadline: float | None = None) -> str:
        """The commit a fully qualified ref points at, peeling an annotated tag to its commit.

        A lightweight tag or a branch costs one request; an annotated tag one more
        (`GET .../git/tags/{sha}`), since its ref names the tag object, not the commit.
        """
        path = self._path("git", "ref", *ref.removeprefix("refs/").split("/"))
        target = self._get(path, {}, GitRef, deadline).object
        for _ in range(_MAX_TAG_HOPS):
            if target.type != "tag":
                return target.sha
            tag_path = self._path("git", "tags", target.sha)
            target = self._get(tag_path, {}, GitTag, deadline).object
        raise TransportError("GET", path, f"tag {ref} points at more than {_MAX_TAG_HOPS} tags")

    def get_file_sha(self, path: str, ref: str, *, deadline: float | None = None) -> str:
        """The blob SHA of the file `path` at `ref` (a branch, tag or commit SHA)."""
        return self.get_file(path, ref, deadline=deadline).sha

    def get_file(self, path: str, ref: str, *, deadline: float | None = None) -> ContentFile:
        """The file `path` at `ref`: its blob SHA and (up to 1 MB) its content, in one request."""
        file_path = self._path("contents", *path.lstrip("/").split("/"))
        return self._get(file_path, {"ref": ref}, ContentFile, deadline)

    def get_rate_limit(self, *, deadline: float | None = None) -> RateLimitOverview:
        """Read the repository's quota (`GET /rate_limit`, not counted against the primary limit).

        Only for when no reply has said how much is left; the headers of every reply say it too.
        """
        overview = self._get("/rate_limit", {}, RateLimitOverview, deadline, cacheable=False)
        core = overview.resources.core
        self.stats.rate_remaining, self.stats.rate_limit = core.remaining, core.limit
        self.stats.rate_reset = believable_reset(float(core.reset), self._clock.now())
        return overview

    def quota_known(self) -> bool:
        """Whether a reply said how much quota is left in the current window."""
        reset = self.stats.rate_reset
        return (
            self.stats.rate_remaining is not None
            and reset is not None
            and reset > self._clock.now().timestamp()
        )

    def seconds_to_reset(self) -> float:
        """Seconds until the known quota window resets (+1 s margin); 0 when none is known."""
        reset = self.stats.rate_reset
        if reset is None:
            return 0.0
        return max(0.0, reset - self._clock.now().timestamp() + RESET_MARGIN_SECONDS)

    def quota_reset_in(self) -> float | None:
        """Seconds until the quota resets when the last reply said it is spent; else None."""
        if self.stats.rate_remaining != 0:
            return None
        return self.seconds_to_reset() or None

    def reset_time(self) -> str:
        """The known reset as a UTC time for log lines (`?` when none is known or believable).

        Log lines on the way to a cancel call it: it never raises, whatever the reset holds.
        """
        reset = believable_reset(self.stats.rate_reset, self._clock.now())
        if reset is None:
            return "?"
        try:
            return datetime.fromtimestamp(reset, UTC).strftime("%H:%M:%SZ")
        except (OverflowError, OSError, ValueError):  # a clock beyond any date
            return "?"

    # -- cancellation ---------------------------------------------------------------------

    def cancel_run(self, run_id: int, *, deadline: float | None = None) -> CancelOutcome:
        """Ask GitHub to cancel a run; a 409 is "already completed" only if a fresh read says so.

        GitHub also answers 409 for a run stuck queued with no job; then, or when the fresh read
        fails, CancelRefused is raised (the cleanup sends the cancel again, then force-cancels).
        """
        return self._cancel(run_id, "cancel", deadline)

    def force_cancel_run(self, run_id: int, *, deadline: float | None = None) -> CancelOutcome:
        """Cancel a run bypassing `always()` conditions; for a run that ignores `/cancel`.

        A 409 is read as `cancel_run` reads it.
        """
        return self._cancel(run_id, "force-cancel", deadline)

    # -- the API version (the only place it changes) ------------------------------------------

    @property
    def older_contract(self) -> bool:
        """Whether this run speaks 2022-11-28: a dispatch reply carries no run id."""
        return self.version == OLDER

    @property
    def _may_move(self) -> bool:
        return self._auto and self.version == NEWER

    def _probe_version(self, workflow: str) -> None:
        """Settle the version with a read (one cheap list page) before the first dispatch."""
        path = self._path("actions", "workflows", workflow, "runs")
        self._get(path, {"per_page": "1"}, WorkflowRunList, None, cacheable=False)

    def _refused_first(self, method: str, path: str, response: requests.Response) -> bool:
        """With `auto`, the first reply that says something settles the version.

        True when it refused 2026-03-10: the caller sends the same request again as 2022-11-28.
        Rate limits, 408 and 5xx say nothing about the version and leave it open; a dispatch
        POST is never sent again (`dispatch_workflow` settles the version with a read first).
        """
        status = response.status_code
        if status in {403, 408, 429} or status >= 500:
            return False
        self._detecting = False
        message = self._redact(_message(response))
        if not refuses_version(status, message, self.version) or path.endswith("/dispatches"):
            return False
        self._use_older(
            f"the server refused API version {NEWER} on the first request ({method} {path} -> "
            f"{status}: {message})"
        )
        return True

    def _use_older(self, reason: str) -> None:
        """Move this run to 2022-11-28, once, and say so in the log."""
        self.version = OLDER
        self._detecting = False
        if self._log is not None:
            self._log(
                f"API version: {reason}. This run uses {OLDER} from now on: a dispatch reply "
                "carries no run id, so each child is found by its run-name"
            )

    # -- machinery ------------------------------------------------------------------------

    def _path(self, *segments: str | int) -> str:
        """An API path under this repository, from its segments (see `api_path`)."""
        return self._repo_path + api_path(*segments)

    def _get(
        self,
        path: str,
        params: Mapping[str, str],
        model: type[_ModelT],
        deadline: float | None,
        *,
        cacheable: bool = True,
        accept_late: bool = False,
    ) -> _ModelT:
        """GET `path` with retries and parse the reply into `model`.

        `cacheable=False` for URLs that never repeat (a search with a time in its query): keeping
        their bodies for conditional requests would only grow the cache.
        """

        def attempt(number: int) -> _ModelT:
            url = self._url(path, params)
            response = self._checked_send(
                "GET", path, url, number, deadline, accept_late=accept_late
            )
            cached = self._cache.get(url)
            if response.status_code == 304 and self._conditional and cached is not None:
                self.stats.not_modified += 1
                body = cached.body
            elif response.status_code == 200:
                body = response.content
            else:
                raise self._api_error("GET", path, response, attempts=number)
            parsed = self._parse("GET", path, body, model, number)
            etag = response.headers.get("ETag")
            if cacheable and self._conditional and response.status_code == 200 and etag:
                self._cache[url] = _Cached(etag, body)
            return parsed

        return self._retrying("GET", path, deadline, attempt)

    def _cancel(self, run_id: int, how: str, deadline: float | None) -> CancelOutcome:
        """POST a cancel or force-cancel with retries; a 409 is checked by a fresh read."""
        path = self._path("actions", "runs", run_id, how)
        conflicts: list[GitHubAPIError] = []

        def attempt(number: int) -> CancelOutcome:
            response = self._checked_send("POST", path, self._url(path, {}), number, deadline)
            if response.status_code == 202:
                return CancelOutcome.ACCEPTED
            if response.status_code == 409:
                conflicts.append(self._api_error("POST", path, response, attempts=number))
                return CancelOutcome.ALREADY_COMPLETED
            raise self._api_error("POST", path, response, attempts=number)

        outcome = self._retrying("POST", path, deadline, attempt)
        if conflicts:
            self._confirm_completed(run_id, conflicts[-1], deadline)
        return outcome

    def _confirm_completed(
        self, run_id: int, conflict: GitHubAPIError, deadline: float | None
    ) -> None:
        """A 409 means "already completed" only when a fresh read shows the run completed.

        GitHub answers 409 to a run that never got a job too ("Cannot cancel a workflow run
        that has not been queued yet."): reading GitHub's message would be guessing.
        """
        try:
            run = self.get_run(run_id, deadline=deadline)
        except GitHubError as exc:
            raise CancelRefused(conflict, f"the fresh read of run {run_id} failed: {exc}") from exc
        if run.status != "completed":
            seen = f"a fresh read shows run {run_id} {run.status}, not completed"
            raise CancelRefused(conflict, seen)

    def _retrying(
        self, method: str, path: str, deadline: float | None, attempt: Callable[[int], _T]
    ) -> _T:
        """Run `attempt(number)` under the specification's retry rules."""
        patience = self.patience

        def before_sleep(state: RetryCallState) -> None:
            self.stats.retries += 1
            failure = state.outcome.exception() if state.outcome is not None else None
            patient = isinstance(failure, RateLimited) and patience is Patience.CHILD_EXISTS
            if patient and isinstance(failure, RateLimited) and failure.basis == "reset":
                self._before_quota_wait(state.upcoming_sleep)
                self.stats.quota_waited += state.upcoming_sleep
            if self._log is None:
                return
            what = describe_failure(failure) if failure is not None else "?"
            if patient:
                until = self._clock.now() + timedelta(seconds=state.upcoming_sleep)
                self._log(
                    f"{method} {path} -> {what}; a child exists, so the wait is taken in full: "
                    f"nothing is sent until {until:%H:%M:%SZ} ({state.upcoming_sleep:.0f}s)"
                )
                return
            self._log(
                f"{method} {path} -> {what}; retry {state.attempt_number} of "
                f"{timing.MAX_RETRIES} in {state.upcoming_sleep:g}s"
            )

        self._wait_for_reset(method, path, deadline)
        retrying = spec_retrying(
            self._clock,
            deadline,
            method=method,
            path=path,
            before_sleep=before_sleep,
            patience=patience,
        )
        for try_ in retrying:
            with try_:
                result = attempt(try_.retry_state.attempt_number)
        return result

    def _wait_for_reset(self, method: str, path: str, deadline: float | None) -> None:
        """While a child exists, send nothing the spent quota can only refuse: wait for the reset.

        A reset past the caller's deadline cannot be waited for inside the call: it ends with
        QuotaSpent (a DeadlineExceeded), and nothing is sent; the caller decides whether to pause.
        """
        wait = self.quota_reset_in()
        if wait is None or self.patience is not Patience.CHILD_EXISTS:
            return
        if deadline is not None and self._clock.monotonic() + wait > deadline:
            raise QuotaSpent(
                method,
                path,
                DEADLINE_WINDOW,
                f"the API quota is spent until its reset at {self.reset_time()}, after the window "
                "closes; nothing was sent",
            )
        if self._log is not None:
            self._log(
                f"API quota spent (0 of {self.stats.rate_limit or '?'} left): waiting for its reset "
                f"at {self.reset_time()} ({wait:.0f}s) before {method} {path}"
            )
        self._before_quota_wait(wait)
        self.stats.quota_waited += wait
        self._clock.sleep(wait)

    def _before_quota_wait(self, wait: float) -> None:
        """Tell `on_quota_wait` (the sequence) of a wait for the quota's reset before it is taken."""
        if self.on_quota_wait is not None:
            self.on_quota_wait(wait)

    def _checked_send(
        self,
        method: str,
        path: str,
        url: str,
        number: int,
        deadline: float | None,
        *,
        accept_late: bool = False,
    ) -> requests.Response:
        """Send one attempt, refusing to start past the deadline or to use a late reply.

        `accept_late`: a reply arriving after the deadline is used all the same.
        """
        if deadline is not None and self._clock.monotonic() > deadline:
            raise DeadlineExceeded(method, path, DEADLINE_WINDOW, "no attempt left before it")
        late_ok = None if accept_late else deadline
        try:
            response = self._send(method, path, url=url, attempts=number)
        except TransportError as exc:
            self._refuse_late(method, path, late_ok, str(exc))
            raise
        self._refuse_late(method, path, late_ok, f"HTTP {response.status_code}")
        return response

    def _refuse_late(self, method: str, path: str, deadline: float | None, what: str) -> None:
        """Raise DeadlineExceeded if the reply (or failure) came in after the deadline."""
        if deadline is None:
            return
        late = self._clock.monotonic() - deadline
        if late > 0:
            raise DeadlineExceeded(
                method, path, DEADLINE_WINDOW, f"{what} arrived {late:g}s after the deadline"
            )

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
        """Send one HTTP request; transport failures become TransportError without headers."""
        url = url or self._url(path, {})
        headers = dict(self._headers)
        headers["X-GitHub-Api-Version"] = self.version
        cached = self._cache.get(url) if method == "GET" and self._conditional else None
        if cached is not None:
            headers["If-None-Match"] = cached.etag
        self.stats.sent += 1
        try:
            response = self._session.request(
                method,
                url,
                headers=headers,
                json=json,
                timeout=self._timeout,
                allow_redirects=allow_redirects,
            )
        except requests.Timeout as exc:
            detail = f"timed out after {self._timeout:g}s ({type(exc).__name__})"
            raise TransportError(method, path, detail, attempts=attempts) from None
        except requests.RequestException as exc:
            detail = self._redact(f"{type(exc).__name__}: {exc}")
            raise TransportError(method, path, detail, attempts=attempts) from None
        self._note_quota(response.headers)
        if self._detecting and self._refused_first(method, path, response):
            return self._send(
                method, path, url=url, json=json, allow_redirects=allow_redirects, attempts=attempts
            )
        return response

    def _note_quota(self, headers: Mapping[str, str]) -> None:
        """Keep the quota every reply reports: remaining, limit and reset (ASCII digits only)."""
        remaining = _whole(headers.get("x-ratelimit-remaining"))
        if remaining is not None:
            self.stats.rate_remaining = remaining
        limit = _whole(headers.get("x-ratelimit-limit"))
        if limit is not None:
            self.stats.rate_limit = limit
        reset = _whole(headers.get("x-ratelimit-reset"))
        believed = believable_reset(float(reset), self._clock.now()) if reset is not None else None
        if believed is not None:  # a reset beyond the hour's window is absent, like a bad one
            self.stats.rate_reset = believed

    def _parse(
        self, method: str, path: str, body: bytes, model: type[_ModelT], attempts: int
    ) -> _ModelT:
        """Parse a reply body; a body that is not the expected JSON is a transport error."""
        try:
            return model.model_validate_json(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            detail = (
                f"malformed reply: not the expected JSON ({exc.error_count()} problem(s); "
                f"{where}: {first['msg']})"
            )
            raise TransportError(method, path, detail, attempts=attempts) from None

    def _api_error(
        self, method: str, path: str, response: requests.Response, *, attempts: int
    ) -> GitHubAPIError:
        """Turn an error reply into the matching GitHubAPIError subclass."""
        status = response.status_code
        message = self._redact(_message(response))
        request_id = response.headers.get("X-GitHub-Request-Id")
        limit = classify_rate_limit(status, response.headers, message, self._clock.now())
        if limit is not None:
            return RateLimited(
                method,
                path,
                status,
                message,
                kind=limit.kind.value,
                retry_after=limit.wait,
                request_id=request_id,
                attempts=attempts,
                basis=limit.basis,
            )
        if refuses_version(status, message, self.version):
            return ApiVersionRefused(
                method,
                path,
                status,
                message,
                version=self.version,
                request_id=request_id,
                attempts=attempts,
            )
        error_class: type[GitHubAPIError] = {
            401: Unauthorized,
            403: PermissionDenied,
            404: NotFound,
            408: ServerError,
            409: Conflict,
            422: Unprocessable,
        }.get(status, ServerError if status >= 500 else GitHubAPIError)
        return error_class(method, path, status, message, request_id=request_id, attempts=attempts)

    def _url(self, path: str, params: Mapping[str, str]) -> str:
        """The full URL of an API path; query values keep `/`, `:` readable."""
        query = f"?{urlencode(params, safe='/:')}" if params else ""
        return f"{self._api_url}{path}{query}"

    def _redact(self, text: str) -> str:
        """Remove the token from text that came from elsewhere (belt and braces)."""
        return text.replace(self._token, "***") if self._token else text


def _message(response: requests.Response) -> str:
    """GitHub's error message from the JSON body, else the HTTP reason, shortened.

    A body that is too large, not UTF-8, not JSON or nested too deeply has no message: it is
    cut, never raised.
    """
    body: object = None
    content = response.content or b""
    if len(content) <= _ERROR_BODY_LIMIT:
        try:
            body = json.loads(content)
        except (ValueError, RecursionError):
            body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        text = str(body["message"])
    else:
        reason = response.reason
        text = reason if isinstance(reason, str) else ""
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def _request_id(response: requests.Response) -> str:
    """`, request id X` for a message, or nothing."""
    request_id = response.headers.get("X-GitHub-Request-Id")
    return f", request id {request_id}" if request_id else ""


def _next_link(header: str) -> str | None:
    """The URL marked `rel="next"` in a Link header (RFC 8288), or None."""
    for part in header.split(","):
        target, _, params = part.partition(";")
        rels = {p.strip().removeprefix("rel=").strip('"') for p in params.split(";")}
        if "next" in rels and target.strip().startswith("<") and target.strip().endswith(">"):
            return target.strip()[1:-1]
    return None


def _whole(value: str | None) -> int | None:
    """A header that must be a whole number: ASCII digits, not too many; else None (absent)."""
    if value is None or not (value.isascii() and value.isdigit()) or len(value) > _MAX_DIGITS:
        return None
    return int(value)
