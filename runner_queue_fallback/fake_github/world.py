"""The fake GitHub: the Actions model behind GitHub's REST API, with faults, ETags and a quota.

Long (one REST surface over one model) because routing, ETags, quota buckets, credentials and
faults all read and charge the same world.

Every adapter (a `requests` transport, `responses` callbacks, a loopback HTTP server) calls one
`FakeGitHub.handle(method, path_and_query, headers, body) -> Reply`. A request is served as the
API version it asks for: 2022-11-28 without `X-GitHub-Api-Version` (dispatch answers 204), 400 for
a version the server does not have. `api_versions=OLDER_SERVER` makes an older GitHub Enterprise
Server: it refuses 2026-03-10, so a dispatch answers 204 and the run is known only by its
run-name (with `Timings.listing_delay`, the run is listed that long after it is visible).

Every reply carries `Date`, GitHub's clock to the second. Rate limits, as GitHub documents them:
the primary quota is one hourly window per quota owner (`fake_github/limits.py`: the repository's,
`quota` requests, for every token the fake does not know otherwise; each App installation's, for
every token minted from it; each user's, for a personal token; a 304 is free), refused with
`rate_limit_status` (403 or 429: GitHub uses both and says nothing about when) and
`x-ratelimit-remaining: 0`; the secondary limits (`secondary`, off unless given; their assumptions
are in `fake_github/limits.py`) are refused with the same status, the secondary-limit message and
`retry-after`. `GET /rate_limit` is free against the primary quota and answers even when it is
spent. `etags="every-read"` gives every reply a new ETag, so that no conditional request is ever
answered 304 (GitHub only implies that an unchanged resource keeps its ETag; this is the world
where it does not). GitHub Apps (`add_app`, `install_app`; `fake_github/apps.py`) mint
installation tokens that expire after an hour of virtual time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import SplitResult, parse_qs, unquote, urlencode, urlsplit

from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.fake_github.actions import ActionsModel, DispatchRefused, WorkerHook
from runner_queue_fallback.fake_github.apps import (
    APP_QUOTA,
    BAD_CREDENTIALS,
    INSTALLATION_QUOTA,
    FakeApp,
    FakeApps,
    FakeInstallation,
    installation_body,
    token_body,
)
from runner_queue_fallback.fake_github.faults import Fault, FaultPlan
from runner_queue_fallback.fake_github.limits import (
    QUOTA_WINDOW,
    QuotaBucket,
    SecondaryLimits,
    SecondaryMeter,
)
from runner_queue_fallback.fake_github.model import (
    DEFAULT_PLATFORM,
    DEFAULT_TIMINGS,
    WORKER_TOKEN,
    FakeRun,
    Platform,
    Timings,
    Workload,
)
from runner_queue_fallback.fake_github.render import Renderer, error
from runner_queue_fallback.fake_github.reply import LedgerEntry, Reply

if TYPE_CHECKING:
    import requests
    import responses

__all__ = [
    "API_VERSIONS",
    "OLDER_SERVER",
    "QUOTA_WINDOW",
    "ETagPolicy",
    "FakeGitHub",
    "RateLimitStatus",
]

#: How a rate-limit refusal is answered: GitHub documents both 403 and 429.
RateLimitStatus = Literal[403, 429]
#: "stable": an unchanged resource keeps its ETag; "every-read": each reply has a new one.
ETagPolicy = Literal["stable", "every-read"]

RATE_DOCS = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID {request_id}."
)
#: Without `X-GitHub-Api-Version` GitHub still serves 2022-11-28; the client asks for 2026-03-10.
DEFAULT_API_VERSION = "2022-11-28"
API_VERSIONS = frozenset({"2022-11-28", "2026-03-10"})
#: What an older GitHub Enterprise Server serves: no 2026-03-10, so no run details on dispatch.
OLDER_SERVER = frozenset({"2022-11-28"})
#: A runs list filtered by any of these returns at most `LISTING_CAP` results per query; its
#: `total_count` still counts them all (github-api.md 12: OpenTelemetry's collector splits the
#: `created` window while it exceeds 1,000). Pages past the cap come back empty.
LISTING_CAP = 1000
_SEARCH_FILTERS = frozenset(
    {"actor", "branch", "check_suite_id", "created", "event", "head_sha", "status"}
)

_Route = tuple[str, re.Pattern[str], str]
_ROUTES: list[_Route] = [
    ("POST", re.compile(r"/actions/workflows/(?P<file>[^/]+)/dispatches"), "_dispatch"),
    ("GET", re.compile(r"/actions/workflows/(?P<file>[^/]+)/runs"), "_list_runs"),
    ("GET", re.compile(r"/actions/runs/(?P<run_id>\d+)"), "_get_run"),
    ("GET", re.compile(r"/actions/runs/(?P<run_id>\d+)/jobs"), "_get_jobs"),
    ("GET", re.compile(r"/actions/runs/(?P<run_id>\d+)/attempts/(?P<n>\d+)"), "_get_run"),
    ("GET", re.compile(r"/actions/runs/(?P<run_id>\d+)/attempts/(?P<n>\d+)/jobs"), "_get_jobs"),
    ("POST", re.compile(r"/actions/runs/(?P<run_id>\d+)/(?P<how>cancel|force-cancel)"), "_cancel"),
    ("GET", re.compile(r"/git/ref/(?P<ref>.+)"), "_git_ref"),
    ("GET", re.compile(r"/git/tags/(?P<sha>[0-9a-f]{40})"), "_git_tag"),
    ("GET", re.compile(r"/compare/(?P<basehead>.+)"), "_compare"),
    ("GET", re.compile(r"/contents/(?P<path>.+)"), "_contents"),
]


@functools.lru_cache(maxsize=1024)
def _split(path_and_query: str) -> SplitResult:
    """`urlsplit`, kept: a run polls the same few paths hundreds of times."""
    return urlsplit(path_and_query)


_Served = tuple[int, Any]  # status and JSON body
#: What `_serve` hands back: the reply, counted against the quota, the fault, the limit that refused.
_Outcome = tuple[Reply, bool, str | None, str | None]


@dataclass(frozen=True)
class _Request:
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    client: int | None
    request_id: str
    version: str  # the API version asked for (`X-GitHub-Api-Version`), or the default
    bucket: QuotaBucket  # the primary quota its credential spends

    @property
    def params(self) -> dict[str, str]:
        """The query parameters (the last value of each)."""
        return {k: v[-1] for k, v in parse_qs(self.query).items()}


class FakeGitHub(ActionsModel):
    """One simulated repository: Actions model + REST API + faults + request ledger + quota."""

    def __init__(
        self,
        clock: Clock,
        *,
        repository: str = "octo-org/octo-repo",
        api_url: str = "https://api.github.test",
        server_url: str = "https://github.test",
        timings: Timings = DEFAULT_TIMINGS,
        workload: Workload | None = None,
        on_worker_start: WorkerHook | None = None,
        faults: FaultPlan | None = None,
        quota: int = 1000,
        path_with_ref: bool = False,
        worker_token: str = WORKER_TOKEN,
        default_branch: str = "main",
        unassigned_runner_as_zero: bool = False,
        rate_limit_status: RateLimitStatus = 403,
        secondary: SecondaryLimits | None = None,
        etags: ETagPolicy = "stable",
        api_versions: frozenset[str] = API_VERSIONS,
        direct: bool = False,
        platform: Platform = DEFAULT_PLATFORM,
        clock_offset: float = 0.0,
    ) -> None:
        """Build an empty repository; add refs, workflows, pools and the parent run next.

        `api_versions`: the REST API versions the server has (`OLDER_SERVER`: no 2026-03-10).
        `direct`: `session()` skips requests' preparation of each request (`DirectSession`), for
        runs by the thousand; the default keeps requests' whole path under test.
        `platform`: what GitHub does beyond the tidy model (`Platform`: re-queues after an
        assignment, runs that never get a job, a cancel that does not take).
        `clock_offset`: seconds GitHub's clock is ahead of `clock`'s wall time (negative: behind,
        as when a runner's clock is ahead of GitHub's); every time GitHub writes, `Date` too.
        """
        super().__init__(
            clock,
            repository=repository,
            api_url=api_url,
            server_url=server_url,
            timings=timings,
            workload=workload,
            on_worker_start=on_worker_start,
            worker_token=worker_token,
            default_branch=default_branch,
            unassigned_runner_as_zero=unassigned_runner_as_zero,
            platform=platform,
        )
        self.faults = faults or FaultPlan()
        #: The primary quota of each owner; the repository's serves every token not known
        #: otherwise (its message names the GitHub Actions installation of `GITHUB_TOKEN`).
        self._repo_bucket = QuotaBucket(
            "repository", quota, "API rate limit exceeded for installation ID 4242."
        )
        self.buckets: dict[str, QuotaBucket] = {"repository": self._repo_bucket}
        #: The GitHub Apps and their installations and tokens (`add_app`); None: none.
        self.apps: FakeApps | None = None
        self._users: dict[str, str] = {}  # personal token -> its user's bucket owner
        self._credentials: dict[str, tuple[QuotaBucket, str]] = {}  # Authorization -> bucket, kind
        self._app: FakeApp | None = None  # the App whose JWT the request being served carries
        self.rate_limit_status: RateLimitStatus = rate_limit_status
        self.secondary = None if secondary is None else SecondaryMeter(secondary)
        self.etags: ETagPolicy = etags
        self.path_with_ref = path_with_ref
        self.api_versions = frozenset(api_versions)
        self.direct = direct
        self.ledger: list[LedgerEntry] = []
        epoch = clock.now() - timedelta(seconds=clock.monotonic() - clock_offset)
        self.render = Renderer(repository, self.api_url, self.server_url, epoch)
        self._api_prefix = urlsplit(self.api_url).path.rstrip("/")
        self._clients: dict[str, int] = {}
        self._authorizations: dict[str, int] = {}  # Authorization header -> `_clients` number
        self._epochs: dict[float, int] = {}  # virtual second -> Unix time (`_epoch`)
        self._seq = 0
        self._link = ""  # the Link header of the list page being served
        self._showing: list[FakeRun] = []  # runs whose jobs the reply being served lists

    # --------------------------------------------------------------------------- adapters

    def session(self) -> requests.Session:
        """A `requests.Session` whose requests to `api_url` are served by this fake in-process."""
        from runner_queue_fallback.fake_github.transport import (  # noqa: PLC0415 (cycle)
            DirectSession,
            make_session,
        )

        return DirectSession(self) if self.direct else make_session(self)

    def register(self, rsps: responses.RequestsMock) -> None:
        """Serve every request to `api_url` through `rsps` (`responses`' `add_callback`)."""
        from runner_queue_fallback.fake_github.transport import register  # noqa: PLC0415 (cycle)

        register(self, rsps)

    @contextmanager
    def serve(self) -> Iterator[str]:
        """Run a loopback HTTP server on 127.0.0.1 (ephemeral port); yield its base URL."""
        from runner_queue_fallback.fake_github.transport import LoopbackServer  # noqa: PLC0415 (cycle)

        with LoopbackServer(self) as url:
            yield url

    def inject(self, fault: Fault) -> None:
        """Add a fault to the plan."""
        self.faults.add(fault)

    @property
    def quota(self) -> int:
        """The repository's hourly quota (`GITHUB_TOKEN`'s)."""
        return self._repo_bucket.limit

    @quota.setter
    def quota(self, value: int) -> None:
        self._repo_bucket.limit = value

    def spend_quota(self, count: int, owner: str = "repository") -> None:
        """Count `count` requests against `owner`'s quota now, as other users of it would."""
        for _ in range(count):
            self._count(self.buckets[owner])

    def quota_used(self, owner: str = "repository") -> int:
        """Requests counted in `owner`'s open quota window."""
        return self.buckets[owner].used(self.now())

    def add_app(self, app_id: int, public_pem: str, *, slug: str = "rqf-coordinator") -> FakeApp:
        """Register a GitHub App whose JWTs `public_pem` verifies (its own quota: `APP_QUOTA`)."""
        self.apps = self.apps or FakeApps()
        owner = f"app:{app_id}"
        message = f"API rate limit exceeded for app ID {app_id}."
        self.buckets[owner] = QuotaBucket(owner, APP_QUOTA, message)
        self._credentials.clear()
        return self.apps.add_app(app_id, public_pem, slug=slug)

    def install_app(
        self,
        app: FakeApp,
        *,
        repositories: tuple[str, ...] | None = None,
        permissions: dict[str, str] | None = None,
        quota: int = INSTALLATION_QUOTA,
    ) -> FakeInstallation:
        """Install `app` on this repository's owner, with its own quota bucket.

        All the owner's repositories unless `repositories` names some; `quota` an hour.
        """
        assert self.apps is not None, "add_app first"  # noqa: S101 (a test's setup mistake)
        owner_type = self.org_runners.owner_type if self.org_runners else "Organization"
        installation = self.apps.install(
            app,
            self.repository.split("/", 1)[0],
            target_type=owner_type,
            repositories=repositories,
            permissions=permissions,
            quota=quota,
        )
        message = f"API rate limit exceeded for installation ID {installation.id}."
        bucket = QuotaBucket(installation.owner, quota, message)
        self.buckets[installation.owner] = bucket
        return installation

    def add_user_token(self, token: str, login: str, *, quota: int = 5000) -> None:
        """A personal token of user `login`, which spends that user's own quota."""
        owner = f"user:{login}"
        if owner not in self.buckets:
            number = 1_000_000 + len(self.buckets)
            message = f"API rate limit exceeded for user ID {number}."
            self.buckets[owner] = QuotaBucket(owner, quota, message)
        self._users[token] = owner
        self._credentials.clear()

    def counted_requests(self, client: int | None = None) -> int:
        """Requests that counted against the primary rate limit (of one client, or all)."""
        return sum(1 for e in self.ledger if e.counted and client in {None, e.client})

    # ----------------------------------------------------------------------------- handle

    def handle(
        self, method: str, path_and_query: str, headers: Mapping[str, str], body: bytes = b""
    ) -> Reply:
        """Serve one request (path relative to `api_url`, or including its path prefix)."""
        self.catch_up()
        split = _split(path_and_query)
        path = unquote(split.path) if "%" in split.path else split.path
        if self._api_prefix and path.startswith(self._api_prefix + "/"):
            path = path[len(self._api_prefix) :]
        lowered = {k.lower(): v for k, v in headers.items()}
        authorization = lowered.get("authorization")
        with self._lock:
            self._seq += 1
            request = _Request(
                method=method.upper(),
                path=path,
                query=split.query,
                headers=lowered,
                body=body,
                client=self._client(authorization),
                request_id=f"5100:{self._seq:05X}:{self._seq * 7919 % 65536:04X}",
                version=lowered.get("x-github-api-version", DEFAULT_API_VERSION).strip(),
                bucket=self._credential(authorization)[0],
            )
            points = self._charge(request)
            outcome: _Outcome
            if points is None:  # over a secondary limit: refused before anything else
                outcome, points = (self._secondary_limit(request), False, None, "secondary"), 0
            else:
                outcome = self._serve(request)
            reply, counted, fault, limit = outcome
            self.ledger.append(
                LedgerEntry(
                    seq=self._seq,
                    time=self.now(),
                    method=request.method,
                    path=path,
                    query=split.query,
                    status=None if reply.error else reply.status,
                    counted=counted,
                    client=request.client,
                    request_id=request.request_id,
                    fault=fault,
                    points=points,
                    limit=limit,
                    bucket=request.bucket.owner,
                )
            )
        if self.timings.latency > 0:
            advance = getattr(self.clock, "advance", None)
            (advance or self.clock.sleep)(self.timings.latency)
        return reply

    def alias_client(self, token: str, party: str) -> None:
        """The ledger numbers `token`'s requests as `party`'s: one party holding several tokens.

        An App's installation tokens are renewed within one step; a bench counts them as the
        step's own (`party`: a token that stands for the step, sent or not).
        """
        number = self._clients.setdefault(_digest(party), len(self._clients))
        self._clients[_digest(token)] = number

    def client_number(self, token: str) -> int | None:
        """The ledger's number for the client that sent `token`; None if it sent nothing."""
        return self._clients.get(_digest(token))

    def _client(self, authorization: str | None) -> int | None:
        if not authorization:
            return None
        number = self._authorizations.get(authorization)
        if number is None:  # a token is hashed once, not on every request it sends
            token = authorization.split(" ", 1)[-1].strip()
            number = self._clients.setdefault(_digest(token), len(self._clients))
            self._authorizations[authorization] = number
        return number

    def _credential(self, authorization: str | None) -> tuple[QuotaBucket, str]:
        """The quota a credential spends, and its kind.

        The kind is `token` (the repository's or a user's), `minted` (an installation token) or
        `jwt` (an App's).
        """
        if authorization is None or (self.apps is None and not self._users):
            return self._repo_bucket, "token"
        known = self._credentials.get(authorization)
        if known is None:
            token = authorization.split(" ", 1)[-1].strip()
            minted = self.apps.minted(token) if self.apps else None
            app = self.apps.app_named(token) if self.apps and minted is None else None
            if minted is not None:
                known = self.buckets[minted.installation.owner], "minted"
            elif app is not None:
                known = self.buckets[f"app:{app.id}"], "jwt"
            else:
                known = self.buckets[self._users.get(token, "repository")], "token"
            self._credentials[authorization] = known
        return known

    def _refuse_credential(self, request: _Request) -> _Served | None:
        """GitHub's refusal of an App's JWT or an installation token (`fake_github/apps.py`)."""
        self._app = None
        apps = self.apps
        if apps is None:
            return None
        token = request.headers.get("authorization", "").split(" ", 1)[-1].strip()
        kind = self._credential(request.headers.get("authorization"))[1]
        if apps.is_app_endpoint(request.method, request.path, self.repository):
            now = (self.render.epoch + timedelta(seconds=self.now())).timestamp()
            self._app, message = apps.verify(token, now)
            return None if self._app else (401, error(message, 401))
        if kind == "jwt":
            return 401, error(BAD_CREDENTIALS, 401)
        if kind != "minted":
            return None
        refused = apps.refuse_token(
            token, request.method, request.path, self.repository, self.now()
        )
        return None if refused is None else (refused[0], error(refused[1], refused[0]))

    def _charge(self, request: _Request) -> int | None:
        """Secondary-limit points for `request`, booked; None when a secondary limit refuses it."""
        if self.secondary is None or request.client is None:
            return 0
        now = self.now()
        if self.secondary.refuse(now, request.method) is not None:
            return None
        return self.secondary.charge(now, request.method, now + max(0.0, self.timings.latency))

    def _serve(self, request: _Request) -> _Outcome:  # noqa: PLR0911 (one return per way a request ends)
        if request.client is None:
            reply = self._reply(401, error("Requires authentication", 401), request)
            return reply, False, None, None
        if request.version not in self.api_versions:  # every endpoint checks the version first
            free = request.method == "GET" and request.path == "/rate_limit"
            if not free:
                self._count(request.bucket)
            message = f"API version '{request.version}' is not a supported version."
            return self._reply(400, error(message, 400), request), not free, None, None
        refused = self._refuse_credential(request)
        if refused is not None:  # a refused credential costs no quota
            return self._reply(*refused, request), False, None, None
        if request.method == "GET" and request.path == "/rate_limit":
            return self._reply(200, self._rate_limit_body(request), request), False, None, None
        if request.bucket.spent(self.now()):
            reset = request.bucket.reset(self.now())
            reply = self._primary_limit(request, reset, self.rate_limit_status)
            return reply, False, None, "primary"
        fault = self.faults.pick(request.method, request.path, self.now())
        if fault is not None and fault.kind in {"timeout", "connection"}:
            return self._fault_reply(fault, request), False, fault.kind, None
        if fault is not None and fault.kind != "lost_reply":
            self._count(request.bucket)
            limit = _FAULT_LIMITS.get(fault.kind)
            return self._fault_reply(fault, request), True, fault.kind, limit
        return self._routed(request, fault)

    def _routed(self, request: _Request, fault: Fault | None) -> _Outcome:
        """A request that reached its route: the reply (a 304 when its ETag still matches)."""
        self._link, self._showing = "", []
        status, payload = self._route(request)
        if fault is None:  # delivered (a 304 only confirms a body delivered before)
            for run in self._showing:
                self.shown_stale_runner(run)
        raw = b"" if payload is None else self.render.encode(payload)
        salt = f"#{self._seq}".encode() if self.etags == "every-read" else b""
        etag = f'W/"{hashlib.sha256(raw + salt).hexdigest()[:40]}"'
        is_get = request.method == "GET" and status == 200
        if is_get and _etag_matches(request.headers.get("if-none-match"), etag):
            return self._reply(304, None, request, etag=etag), False, None, None
        self._count(request.bucket)
        if fault is not None:  # lost_reply: it really happened, but the client never hears so
            lost = Reply(0, error="timeout") if fault.status is None else self._bad_gateway(request)
            return lost, True, fault.kind, None
        headers = self._headers(request, etag=etag if is_get else None)
        if self._link:
            headers["Link"] = self._link
        if status == 204:
            del headers["Content-Type"]  # no content, no type
        return Reply(status, headers, raw), True, None, None

    # --------------------------------------------------------------------- quota, replies

    def _quota_used(self) -> int:
        return self._repo_bucket.used(self.now())

    def _count(self, bucket: QuotaBucket) -> None:
        bucket.count(self.now())

    def _epoch(self, virtual: float) -> int:
        epoch = self._epochs.get(virtual)
        if epoch is None:  # every reply of a quota window names the same reset
            stamp: datetime = self.render.epoch + timedelta(seconds=virtual)
            epoch = self._epochs[virtual] = int(stamp.timestamp() + 0.999)
        return epoch

    def _headers(
        self, request: _Request, *, remaining: int | None = None, etag: str | None = None
    ) -> dict[str, str]:
        """Headers of every reply: content type, API version, request ID, rate limit, ETag."""
        bucket, now = request.bucket, self.now()
        used = bucket.used(now)
        left = max(0, bucket.limit - used) if remaining is None else remaining
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "Date": self.render.http_date(self.now()),
        }
        if request.version in self.api_versions:
            headers["X-GitHub-Api-Version-Selected"] = request.version
        headers |= {
            "X-GitHub-Request-Id": request.request_id,
            "X-RateLimit-Limit": str(bucket.limit),
            "X-RateLimit-Remaining": str(left),
            "X-RateLimit-Used": str(used),
            "X-RateLimit-Reset": str(self._epoch(bucket.reset(now))),
            "X-RateLimit-Resource": "core",
        }
        if etag is not None:
            headers["ETag"] = etag
        return headers

    def _reply(
        self, status: int, payload: Any, request: _Request, *, etag: str | None = None
    ) -> Reply:
        headers = self._headers(request, etag=etag)
        body = b"" if payload is None or status == 304 else json.dumps(payload).encode()
        return Reply(status, headers, body)

    def _primary_limit(self, request: _Request, reset: float, status: int = 403) -> Reply:
        headers = self._headers(request, remaining=0)
        headers["X-RateLimit-Reset"] = str(self._epoch(reset))
        message = request.bucket.message
        body = json.dumps(error(message, status, f"{RATE_DOCS}#about-primary-rate-limits"))
        return Reply(status, headers, body.encode())

    def _secondary_limit(
        self, request: _Request, status: int | None = None, retry_after: int | None = None
    ) -> Reply:
        """A secondary-limit refusal: the status, the message, and `retry-after` if known."""
        status = status or self.rate_limit_status
        message = SECONDARY_MESSAGE.format(request_id=request.request_id)
        body = error(message, status, f"{RATE_DOCS}#about-secondary-rate-limits")
        reply = self._reply(status, body, request)
        if retry_after is None and self.secondary is not None:
            retry_after = self.secondary.limits.retry_after
        if retry_after is None:
            return reply
        return Reply(status, reply.headers | {"Retry-After": str(retry_after)}, reply.body)

    def _rate_limit_body(self, request: _Request) -> dict[str, Any]:
        """`GET /rate_limit`: the core quota (and search); 2022-11-28 repeats core as `rate`."""
        bucket, now = request.bucket, self.now()
        used = bucket.used(now)
        core = {
            "limit": bucket.limit,
            "remaining": max(0, bucket.limit - used),
            "reset": self._epoch(bucket.reset(now)),
            "used": used,
        }
        search = {"limit": 30, "remaining": 30, "reset": self._epoch(self.now() + 60), "used": 0}
        body: dict[str, Any] = {"resources": {"core": core, "search": search}}
        if request.version == "2022-11-28":
            body["rate"] = core
        return body

    def _bad_gateway(self, request: _Request) -> Reply:
        headers = self._headers(request) | {"Content-Type": "text/html"}
        return Reply(502, headers, b"<html><body><h1>502 Bad Gateway</h1></body></html>\n")

    def _fault_reply(self, fault: Fault, request: _Request) -> Reply:  # noqa: PLR0911 (one reply per fault kind)
        kind = fault.kind
        if kind in {"timeout", "connection"}:
            return Reply(0, error="timeout" if kind == "timeout" else "connection")
        if kind == "primary_rate_limit":
            return self._primary_limit(request, self.now() + fault.retry_after, fault.status or 403)
        if kind == "secondary_rate_limit":
            return self._secondary_limit(request, fault.status or 403, fault.retry_after)
        if kind == "malformed":
            return Reply(200, self._headers(request), b'{"id": 1, "status": "queu')
        if kind == "unauthorized":
            return self._reply(401, error("Bad credentials", 401), request)
        if kind == "forbidden":
            return self._reply(403, error("Resource not accessible by integration", 403), request)
        status = fault.status or 500
        if status == 502:
            return self._bad_gateway(request)
        return self._reply(status, error(HTTPStatus(status).phrase, status), request)

    # ----------------------------------------------------------------------------- routes

    def _route(self, request: _Request) -> _Served:
        if self._app is not None and self.apps is not None:  # a JWT GitHub accepted
            return self._app_route(request, self._app, self.apps)
        if self.org_runners is not None and request.method == "GET":
            token = request.headers.get("authorization", "").split(" ", 1)[-1].strip()
            served = self.org_runners.serve(
                request.path, request.params, token, self.render, request.version
            )
            if served is not None:
                status, body, pages = served
                page = max(1, int(request.params.get("page", "1")))
                self._link = self._page_links(request, request.params, page, pages)
                return status, body
        prefix = f"/repos/{self.repository}"
        if not request.path.lower().startswith(prefix.lower() + "/"):
            return 404, error("Not Found", 404)
        rest = request.path[len(prefix) :]
        for verb, pattern, name in _ROUTES:
            match = pattern.fullmatch(rest) if verb == request.method else None
            if match:
                handler: Callable[..., _Served] = getattr(self, name)
                return handler(request, **match.groupdict())
        return 404, error("Not Found", 404)

    def _app_route(self, request: _Request, app: FakeApp, apps: FakeApps) -> _Served:
        """The App's endpoints: its installation on this repository, and minting a token."""
        if request.method == "GET":
            installation = apps.installation_of(app, self.repository)
            if installation is None:
                return 404, error("Not Found", 404)
            return 200, installation_body(installation, self.render)
        status, text = apps.mint(app, request.path, request.body, self.now())
        if status != 201:
            return status, error(text, status)
        return 201, token_body(text, apps.tokens[text], self.render)

    def _dispatch(self, request: _Request, file: str) -> _Served:
        try:
            data = json.loads(request.body or b"{}")
        except ValueError:
            return 400, error("Problems parsing JSON", 400)
        if not isinstance(data, dict) or not isinstance(data.get("ref"), str):
            return 422, error('Invalid request.\n\n"ref" wasn\'t supplied.', 422)
        inputs = data.get("inputs") or {}
        if not isinstance(inputs, dict):
            return 422, error(
                "Invalid request.\n\nFor 'properties/inputs', must be an object.", 422
            )
        outcome = self.dispatch(file, data["ref"], inputs)
        if isinstance(outcome, DispatchRefused):
            return outcome.status, error(outcome.message, outcome.status)
        outcome.actor = self._bot(request)
        if request.version == "2022-11-28" and data.get("return_run_details") is not True:
            return 204, None  # 2022-11-28 says nothing about the run unless asked to
        run_url = f"{self.render.repo_api}/actions/runs/{outcome.id}"
        html_url = f"{self.server_url}/{self.repository}/actions/runs/{outcome.id}"
        return 200, {"workflow_run_id": outcome.id, "run_url": run_url, "html_url": html_url}

    def _bot(self, request: _Request) -> str | None:
        """The App's bot when an installation token sent `request` (github-api.md 14), else None."""
        authorization = request.headers.get("authorization")
        if self.apps is None or self._credential(authorization)[1] != "minted":
            return None
        minted = self.apps.minted((authorization or "").split(" ", 1)[-1].strip())
        return None if minted is None else f"{minted.installation.app.slug}[bot]"

    def _get_run(self, request: _Request, run_id: str, n: str | None = None) -> _Served:
        del request
        run = self.visible_run(int(run_id))
        if run is None:
            return 404, error("Not Found", 404)
        attempt = run.attempt if n is None else int(n)
        if not (attempt == run.attempt or attempt in run.attempts):
            return 404, error("Not Found", 404)
        return 200, self.render.run(run, attempt=attempt, path_ref=self.path_with_ref)

    def _get_jobs(self, request: _Request, run_id: str, n: str | None = None) -> _Served:
        del request
        run = self.visible_run(int(run_id))
        if run is None or (n is not None and int(n) != run.attempt and int(n) not in run.attempts):
            return 404, error("Not Found", 404)
        jobs = [] if run.job is None or (n is not None and int(n) != run.attempt) else [run.job]
        self._showing += [run] if jobs else []
        return 200, {"total_count": len(jobs), "jobs": [self.render.job(run, j) for j in jobs]}

    def _list_runs(self, request: _Request, file: str) -> _Served:
        params = request.params
        if file not in self.workflow_ids and not any(
            str(i) == file for i in self.workflow_ids.values()
        ):
            return 404, error("Not Found", 404)
        runs = [
            r
            for r in self.runs.values()
            if file in {r.workflow_file, str(r.workflow_id)}
            and self.visible_run(r.id)
            and self.now() >= r.visible_at + self.timings.listing_delay
            and params.get("event", r.event) == r.event
            and params.get("actor", self.render.actor_login(r)) == self.render.actor_login(r)
            and self._created_ok(r, params.get("created"))
        ]
        runs.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        per_page = min(100, int(params.get("per_page", "30")))
        page = max(1, int(params.get("page", "1")))
        served = runs[:LISTING_CAP] if _SEARCH_FILTERS & set(params) else runs
        shown = served[(page - 1) * per_page : page * per_page]
        self._link = self._page_links(request, params, page, -(-len(served) // per_page))
        path_ref = self.path_with_ref
        return 200, {
            "total_count": len(runs),
            "workflow_runs": [self.render.run(r, path_ref=path_ref) for r in shown],
        }

    def _page_links(
        self, request: _Request, params: Mapping[str, str], page: int, last: int
    ) -> str:
        """GitHub's `Link` header for a list page: next, last, first and prev, as it writes them."""
        base = f"{self.api_url}{request.path}"

        def url(number: int) -> str:
            return f"{base}?{urlencode({**params, 'page': str(number)})}"

        rels = []
        if page < last:
            rels += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            rels += [f'<{url(1)}>; rel="first"', f'<{url(page - 1)}>; rel="prev"']
        return ", ".join(rels)

    def _created_ok(self, run: FakeRun, created: str | None) -> bool:
        if not created:
            return True
        low, dots, high = created.partition("..")  # GitHub's search range: both ends included
        if dots:
            at = datetime.fromisoformat(self.render.time(run.created_at))
            return datetime.fromisoformat(low) <= at <= datetime.fromisoformat(high)
        match = re.fullmatch(r"(>=|<=|>|<)?(.+)", created)
        if match is None:
            return True
        op, text = match.group(1) or ">=", match.group(2)
        bound = datetime.fromisoformat(text)
        at = datetime.fromisoformat(self.render.time(run.created_at))
        return {">=": at >= bound, "<=": at <= bound, ">": at > bound, "<": at < bound}[op]

    def _cancel(self, request: _Request, run_id: str, how: str) -> _Served:
        status = self.request_cancel(
            int(run_id), force=how == "force-cancel", client=request.client
        )
        if status == 409 and self.runs[int(run_id)].zombie:  # both cancel and force-cancel
            return 409, error("Cannot cancel a workflow run that has not been queued yet.", 409)
        if status == 409:
            return 409, error("Cannot cancel a workflow run that is completed.", 409)
        if status == 404:
            return 404, error("Not Found", 404)
        return 202, {}

    def _git_ref(self, request: _Request, ref: str) -> _Served:
        del request
        sha = self.refs.get(ref)
        if sha is None:
            return 404, error("Not Found", 404)
        return 200, self.render.git_ref(
            ref, sha, kind="tag" if sha in self.tag_objects else "commit"
        )

    def _git_tag(self, request: _Request, sha: str) -> _Served:
        del request
        if sha not in self.tag_objects:
            return 404, error("Not Found", 404)
        name, commit = self.tag_objects[sha]
        return 200, self.render.git_tag(sha, name, commit)

    def _compare(self, request: _Request, basehead: str) -> _Served:
        """`BASE...HEAD`, each a commit SHA or a ref as git reads a revision (`RepoContent.compare`)."""
        del request
        base, dots, head = basehead.partition("...")
        found = self.compare(base, head) if dots else None
        if found is None:
            return 404, error("Not Found", 404)
        return 200, self.render.comparison(basehead, found, self.commits, self.parents)

    def _contents(self, request: _Request, path: str) -> _Served:
        ref = request.params.get("ref", self.default_branch)
        resolved = self.resolve(ref, allow_sha=True)
        wf = None if resolved is None else self.commits[resolved[1]].get(path)
        if wf is None:
            return 404, error("Not Found", 404)
        return 200, self.render.content_file(path, ref, wf)


_FAULT_LIMITS = {"primary_rate_limit": "primary", "secondary_rate_limit": "secondary"}


def _digest(token: str) -> str:
    """How the ledger knows a token without keeping it."""
    return hashlib.sha256(token.encode()).hexdigest()


def _etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    tags = {t.strip() for t in header.split(",")}
    return "*" in tags or etag in tags or etag.removeprefix("W/") in tags
