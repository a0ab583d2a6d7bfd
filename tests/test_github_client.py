"""GitHubClient: headers, the specification's retry rules, deadlines, conditional GETs, secrecy."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import requests
import responses
from responses import matchers, registries

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import (
    Conflict,
    DeadlineExceeded,
    DispatchAmbiguous,
    GitHubAPIError,
    GitHubError,
    NotFound,
    PermissionDenied,
    RateLimited,
    ServerError,
    TransportError,
    Unauthorized,
    Unprocessable,
)
from runner_queue_fallback.fake_github.model import fake_token
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.models import CancelOutcome
from runner_queue_fallback.github.retry import Patience
from tests import github_payloads as payloads
from tests.outside import child_run_id
from tests.scenario import FOREVER, minute_queues

TOKEN = fake_token("s3cr3tT0kenValue")
API = payloads.API
REPO = f"/repos/{payloads.REPOSITORY}"
RUN_PATH = f"{REPO}/actions/runs/42"
RUN_URL = f"{API}{RUN_PATH}"
DISPATCH_PATH = f"{REPO}/actions/workflows/runner-worker.yml/dispatches"
DISPATCH_URL = f"{API}{DISPATCH_PATH}"
INPUTS = {"request-id": "rqf-1", "runner": '{"group":"g","labels":"l"}'}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def mocked() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(
        assert_all_requests_are_fired=True, registry=registries.OrderedRegistry
    ) as mock:
        yield mock


@pytest.fixture
def logs() -> list[str]:
    return []


@pytest.fixture
def client(clock: FakeClock, logs: list[str]) -> Iterator[GitHubClient]:
    with requests.Session() as session:
        yield GitHubClient(session, API, payloads.REPOSITORY, TOKEN, clock, log=logs.append)


def run_reply(mocked: responses.RequestsMock, **kwargs: Any) -> None:
    mocked.get(RUN_URL, json=payloads.workflow_run(), **kwargs)


def error_reply(
    mocked: responses.RequestsMock,
    status: int,
    message: str = "boom",
    *,
    method: str = responses.GET,
    url: str = RUN_URL,
    headers: dict[str, str] | None = None,
) -> None:
    mocked.add(
        method,
        url,
        status=status,
        json={"message": message, "documentation_url": "https://docs.github.com/rest"},
        headers={"X-GitHub-Request-Id": f"0400:{status}:1", **(headers or {})},
    )


def assert_secret_free(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text


# -- requests on the wire ---------------------------------------------------------------------


def test_every_request_sends_auth_version_agent_and_timeout(
    client: GitHubClient, mocked: responses.RequestsMock
) -> None:
    """Bearer token, JSON accept, API version 2026-03-10, User-Agent and timeout on every call."""
    run_reply(mocked)
    mocked.post(DISPATCH_URL, json=payloads.dispatch_response())
    client.get_run(42)
    client.dispatch_workflow("runner-worker.yml", "main", INPUTS)
    for call in mocked.calls:
        headers = call.request.headers
        assert headers["Authorization"] == f"Bearer {TOKEN}"
        assert headers["Accept"] == "application/vnd.github+json"
        assert headers["X-GitHub-Api-Version"] == "2026-03-10"
        assert headers["User-Agent"] == "runner-queue-fallback"
        assert call.request.req_kwargs["timeout"] == timing.REQUEST_TIMEOUT_SECONDS  # type: ignore[attr-defined]  # responses adds req_kwargs


def test_get_run_and_attempt_parse_the_run(
    client: GitHubClient, mocked: responses.RequestsMock
) -> None:
    """get_run and get_run_attempt read the run and its attempt."""
    run_reply(mocked)
    mocked.get(f"{RUN_URL}/attempts/2", json=payloads.workflow_run(run_attempt=2))
    assert client.get_run(42).display_title == "rqf-1234-1-1"
    assert client.get_run_attempt(42, 2).run_attempt == 2


def test_list_attempt_jobs(client: GitHubClient, mocked: responses.RequestsMock) -> None:
    """Jobs of one attempt are read 100 a page."""
    mocked.get(
        f"{RUN_URL}/attempts/1/jobs",
        json=payloads.job_list(payloads.job(runner_id=0, runner_name="")),
        match=[matchers.query_param_matcher({"per_page": "100"})],
    )
    [job] = client.list_attempt_jobs(42, 1)
    assert job.name == "worker"
    assert not job.has_runner


def test_find_runs_by_name_filters_on_display_title(
    client: GitHubClient, mocked: responses.RequestsMock
) -> None:
    """Recovery lists dispatch runs created since the dispatch and keeps the run-name matches."""
    mocked.get(
        f"{API}{REPO}/actions/workflows/runner-worker.yml/runs",
        json=payloads.workflow_run_list(
            payloads.workflow_run(41, display_title="rqf-other"),
            payloads.workflow_run(42, display_title="rqf-mine"),
        ),
        match=[
            matchers.query_param_matcher(
                {
                    "event": "workflow_dispatch",
                    "created": ">=2026-11-02T09:00:00Z",
                    "per_page": "100",
                }
            )
        ],
    )
    since = datetime(2026, 11, 2, 10, 0, 0, 900, tzinfo=timezone(timedelta(hours=1)))
    runs = client.find_runs_by_name("runner-worker.yml", "rqf-mine", created_after=since)
    assert [run.id for run in runs] == [42]


def test_find_runs_by_name_needs_an_aware_time(client: GitHubClient) -> None:
    """A naive datetime is a programming error: its zone is unknown."""
    with pytest.raises(ValueError, match="timezone-aware"):
        client.find_runs_by_name("w.yml", "x", created_after=datetime(2026, 1, 1))  # noqa: DTZ001  # naive on purpose


@pytest.mark.parametrize(
    ("ref", "api_ref"),
    [
        ("refs/heads/feature/x", "heads/feature/x"),
        ("heads/main", "heads/main"),
        ("refs/tags/v1", "tags/v1"),
        ("refs/pull/5/merge", "pull/5/merge"),
    ],
)
def test_get_ref_sha_uses_the_multi_segment_ref(
    client: GitHubClient, mocked: responses.RequestsMock, ref: str, api_ref: str
) -> None:
    """The ref loses its refs/ prefix and keeps its slashes unencoded."""
    mocked.get(f"{API}{REPO}/git/ref/{api_ref}", json=payloads.git_ref(f"refs/{api_ref}"))
    assert client.get_ref_sha(ref) == payloads.SHA
    assert mocked.calls[0].request.path_url == f"{REPO}/git/ref/{api_ref}"


def test_get_ref_sha_of_annotated_tag_is_the_tag_object(
    client: GitHubClient, mocked: responses.RequestsMock
) -> None:
    """An annotated tag's ref points at a tag object; its SHA is returned as is."""
    mocked.get(
        f"{API}{REPO}/git/ref/tags/v1",
        json=payloads.git_ref("refs/tags/v1", payloads.OTHER_SHA, "tag"),
    )
    assert client.get_ref_sha("refs/tags/v1") == payloads.OTHER_SHA


def test_get_file_sha(client: GitHubClient, mocked: responses.RequestsMock) -> None:
    """The workflow file's blob SHA is read at a ref."""
    path = ".github/workflows/runner-worker.yml"
    mocked.get(
        f"{API}{REPO}/contents/{path}",
        json=payloads.content_file(path, "e" * 40),
        match=[matchers.query_param_matcher({"ref": "refs/heads/main"})],
    )
    assert client.get_file_sha(path, "refs/heads/main") == "e" * 40
    assert mocked.calls[0].request.path_url.startswith(f"{REPO}/contents/{path}?")


# -- dispatch: never retried ------------------------------------------------------------------


def test_dispatch_posts_ref_and_inputs_and_returns_the_run(
    client: GitHubClient, mocked: responses.RequestsMock
) -> None:
    """The dispatch body is {ref, inputs}; the 200 reply names the new run."""
    mocked.post(
        DISPATCH_URL,
        json=payloads.dispatch_response(77),
        match=[matchers.json_params_matcher({"ref": "main", "inputs": INPUTS})],
    )
    result = client.dispatch_workflow("runner-worker.yml", "main", INPUTS)
    assert result is not None
    assert result.workflow_run_id == 77
    assert result.html_url.endswith("/actions/runs/77")


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param({"status": 500, "json": {"message": "Server Error"}}, id="500"),
        pytest.param({"status": 502, "body": "<html>bad gateway</html>"}, id="502"),
        pytest.param({"status": 408, "json": {"message": "timeout"}}, id="408"),
        pytest.param({"body": requests.exceptions.ReadTimeout("read timed out")}, id="timeout"),
        pytest.param({"body": requests.exceptions.ConnectionError("reset")}, id="connection"),
        pytest.param({"status": 200, "body": "{not json"}, id="200-malformed"),
        pytest.param({"status": 200, "json": {"workflow_run_id": 1}}, id="200-incomplete"),
        pytest.param({"status": 204}, id="204-no-details"),
    ],
)
def test_unclear_dispatch_is_ambiguous_and_sent_once(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock, reply: dict[str, Any]
) -> None:
    """No clear answer to the dispatch POST: DispatchAmbiguous after exactly one request."""
    mocked.post(DISPATCH_URL, **reply)
    with pytest.raises(DispatchAmbiguous) as caught:
        client.dispatch_workflow("runner-worker.yml", "main", INPUTS)
    assert len(mocked.calls) == 1
    assert clock.sleeps == []
    assert client.stats.retries == 0
    assert DISPATCH_PATH in str(caught.value)
    assert_secret_free(str(caught.value), repr(caught.value))


@pytest.mark.parametrize(
    ("status", "headers", "error"),
    [
        pytest.param(422, {}, Unprocessable, id="422"),
        pytest.param(404, {}, NotFound, id="404"),
        pytest.param(401, {}, Unauthorized, id="401"),
        pytest.param(403, {}, PermissionDenied, id="403"),
        pytest.param(403, {"retry-after": "7"}, RateLimited, id="403-rate-limited"),
        pytest.param(409, {}, Conflict, id="409"),
    ],
)
def test_definite_dispatch_refusal_raises_its_error_once(
    *,
    client: GitHubClient,
    mocked: responses.RequestsMock,
    clock: FakeClock,
    status: int,
    headers: dict[str, str],
    error: type[GitHubAPIError],
) -> None:
    """A 4xx to the dispatch means no run was created: its error, one request, no wait."""
    error_reply(mocked, status, method=responses.POST, url=DISPATCH_URL, headers=headers)
    with pytest.raises(error) as caught:
        client.dispatch_workflow("runner-worker.yml", "main", INPUTS)
    assert type(caught.value) is error
    assert len(mocked.calls) == 1
    assert clock.sleeps == []
    assert caught.value.status == status
    assert caught.value.attempts == 1


# -- transient errors: 5 s then 10 s ----------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param({"status": 502, "body": "bad gateway"}, id="502"),
        pytest.param({"status": 500, "json": {"message": "oops"}}, id="500"),
        pytest.param({"status": 408, "json": {"message": "timeout"}}, id="408"),
        pytest.param({"body": requests.exceptions.ConnectTimeout("connect")}, id="connect-timeout"),
        pytest.param({"body": requests.exceptions.ReadTimeout("read")}, id="read-timeout"),
        pytest.param({"body": requests.exceptions.ConnectionError("refused")}, id="connection"),
        pytest.param({"status": 200, "body": "{truncated"}, id="malformed-json"),
        pytest.param({"status": 200, "json": {"id": 42}}, id="wrong-shape"),
    ],
)
def test_transient_failure_is_retried_after_5_then_10_seconds(
    client: GitHubClient,
    mocked: responses.RequestsMock,
    clock: FakeClock,
    logs: list[str],
    failure: dict[str, Any],
) -> None:
    """Two transient failures, then success: waits of exactly 5 s and 10 s, both logged."""
    mocked.get(RUN_URL, **failure)
    mocked.get(RUN_URL, **failure)
    run_reply(mocked)
    assert client.get_run(42).id == 42
    assert clock.sleeps == [5.0, 10.0]
    assert client.stats.retries == 2
    assert client.stats.sent == 3
    assert [line.rsplit(";", 1)[1] for line in logs] == [
        " retry 1 of 2 in 5s",
        " retry 2 of 2 in 10s",
    ]
    assert all(line.startswith(f"GET {RUN_PATH} -> ") for line in logs)


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        pytest.param({"status": 503, "json": {"message": "unavailable"}}, ServerError, id="503"),
        pytest.param(
            {"body": requests.exceptions.ReadTimeout("read")}, TransportError, id="timeout"
        ),
        pytest.param({"status": 200, "body": "nope"}, TransportError, id="malformed-json"),
    ],
)
def test_persistent_transient_failure_gives_up_after_three_attempts(
    client: GitHubClient,
    mocked: responses.RequestsMock,
    clock: FakeClock,
    failure: dict[str, Any],
    error: type[Exception],
) -> None:
    """Three failures: the last error, saying 3 attempts, after waits of 5 s and 10 s."""
    for _ in range(3):
        mocked.get(RUN_URL, **failure)
    with pytest.raises(error) as caught:
        client.get_run(42)
    assert clock.sleeps == [5.0, 10.0]
    assert len(mocked.calls) == 3
    assert "after 3 attempt(s)" in str(caught.value) or "attempts: 3" in str(caught.value)
    assert f"GET {RUN_PATH}" in str(caught.value)


def test_persistent_server_error_message_names_everything(
    client: GitHubClient, mocked: responses.RequestsMock
) -> None:
    """The final error carries method, path, status, request id, attempts and a hint."""
    for _ in range(3):
        error_reply(mocked, 502, "Bad Gateway")
    with pytest.raises(ServerError) as caught:
        client.get_run(42)
    error = caught.value
    assert (error.method, error.path, error.status, error.attempts) == ("GET", RUN_PATH, 502, 3)
    assert error.request_id == "0400:502:1"
    text = str(error)
    for part in (
        "GET",
        RUN_PATH,
        "502",
        "Bad Gateway",
        "attempts: 3",
        "0400:502:1",
        "githubstatus",
    ):
        assert part in text
    assert API not in text
    assert_secret_free(text, repr(error))


def test_transport_error_message_names_method_path_and_cause(
    client: GitHubClient, mocked: responses.RequestsMock
) -> None:
    """A persistent timeout says which request timed out, after how many attempts."""
    for _ in range(3):
        mocked.get(RUN_URL, body=requests.exceptions.ConnectTimeout("connect timed out"))
    with pytest.raises(TransportError) as caught:
        client.get_run(42)
    text = str(caught.value)
    assert text.startswith(f"GET {RUN_PATH} failed after 3 attempt(s): timed out after 15s")
    assert "ConnectTimeout" in text
    assert caught.value.__cause__ is None  # the requests exception (and its headers) is dropped


# -- rate limits ------------------------------------------------------------------------------


def test_retry_after_is_honoured(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock, logs: list[str]
) -> None:
    """retry-after: 7 means a secondary limit and a wait of exactly 7 s."""
    error_reply(
        mocked, 403, "You have exceeded a secondary rate limit", headers={"retry-after": "7"}
    )
    run_reply(mocked)
    client.get_run(42)
    assert clock.sleeps == [7.0]
    assert logs == [
        f"GET {RUN_PATH} -> 403 (secondary rate limit), request id 0400:403:1; retry 1 of 2 in 7s"
    ]


def test_a_long_retry_after_is_never_retried_early_without_a_child(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """Spec: at most one minute a wait; a retry-after over it fails at once, not a minute early."""
    error_reply(
        mocked, 429, "You have exceeded a secondary rate limit", headers={"retry-after": "120"}
    )
    with pytest.raises(RateLimited) as caught:
        client.get_run(42)
    assert clock.sleeps == []
    assert caught.value.attempts == 1
    assert len(mocked.calls) == 1


def test_a_long_retry_after_is_waited_out_once_a_child_exists(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock, logs: list[str]
) -> None:
    """A departure: with a child to watch, the whole retry-after is waited, then the read goes on."""
    client.patience = Patience.CHILD_EXISTS
    error_reply(
        mocked, 429, "You have exceeded a secondary rate limit", headers={"retry-after": "120"}
    )
    run_reply(mocked)
    client.get_run(42)
    assert clock.sleeps == [120.0]
    assert "a child exists, so the wait is taken in full" in logs[0]


def test_a_secondary_limit_without_retry_after_waits_a_minute_then_longer(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """GitHub: at least one minute, then exponential back-off (here while a child exists)."""
    client.patience = Patience.CHILD_EXISTS
    reset = int(clock.now().timestamp()) + 5  # a reset seconds away is not a reason to retry
    headers = {"x-ratelimit-remaining": "250", "x-ratelimit-reset": str(reset)}
    for _ in range(3):
        error_reply(mocked, 403, "You have exceeded a secondary rate limit", headers=headers)
    run_reply(mocked)
    client.get_run(42)
    assert clock.sleeps == [60.0, 120.0, 240.0]


def test_a_spent_quota_is_waited_out_once_a_child_exists(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """Primary quota spent, reset 40 minutes ahead: one wait until the reset, then the read."""
    client.patience = Patience.CHILD_EXISTS
    reset = int(clock.now().timestamp()) + 2400
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
    error_reply(mocked, 403, "API rate limit exceeded", headers=headers)
    run_reply(mocked)
    client.get_run(42)
    assert clock.sleeps == [2401.0]
    assert client.stats.quota_waited == 2401.0


def test_a_primary_limit_with_an_unreadable_reset_is_backed_off_past_a_whole_window(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """GitHub's primary message with headers that cannot be read ("nan"), while a child exists:
    the quota resets within its hour, so the back-off goes on until an hour and a minute has
    passed before any wait counts; the child is never given up for an unreadable reset."""
    client.patience = Patience.CHILD_EXISTS
    headers = {"x-ratelimit-remaining": "nan", "x-ratelimit-reset": "nan"}
    refusals = 7  # 60 + 120 + ... + 1920 = 3780 s: past the window, then one counted wait
    for _ in range(refusals):
        error_reply(mocked, 403, "API rate limit exceeded for installation ID 1.", headers=headers)
    run_reply(mocked)
    client.get_run(42)
    cap = timing.RESET_WAIT_MAX_SECONDS  # no single back-off is longer than a window
    assert clock.sleeps == [min(60.0 * 2**n, cap) for n in range(refusals)]
    assert sum(clock.sleeps[:-1]) >= timing.RESET_WAIT_MAX_SECONDS


def test_past_a_whole_window_of_back_off_an_unreadable_primary_limit_counts_its_waits(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """Once an hour and a minute is backed off, the usual patient waits count: 6 uncounted
    back-offs (3780 s), then 4 counted waits, and the 11th refusal is the error."""
    client.patience = Patience.CHILD_EXISTS
    headers = {"x-ratelimit-remaining": "nan", "x-ratelimit-reset": "nan"}
    refusals = 6 + timing.PATIENT_RATE_LIMIT_WAITS + 1
    for _ in range(refusals):  # a client that sent one more would meet no reply
        error_reply(mocked, 403, "API rate limit exceeded for installation ID 1.", headers=headers)
    with pytest.raises(RateLimited):
        client.get_run(42)
    assert len(mocked.calls) == refusals
    assert len(clock.sleeps) == refusals - 1


def test_a_known_spent_quota_sends_nothing_before_the_reset(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock, logs: list[str]
) -> None:
    """The last reply said 0 left: the next read waits for the reset instead of being refused."""
    client.patience = Patience.CHILD_EXISTS
    reset = int(clock.now().timestamp()) + 300
    run_reply(mocked, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)})
    client.get_run(42)
    run_reply(mocked)
    client.get_run(42)
    assert clock.sleeps == [301.0]
    assert len(mocked.calls) == 2
    assert "waiting for its reset" in logs[0]


def test_a_reset_past_the_deadline_ends_the_call_with_nothing_sent(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """Inside a window (the cancellation proof) a reset after it cannot be waited for."""
    client.patience = Patience.CHILD_EXISTS
    reset = int(clock.now().timestamp()) + 300
    run_reply(mocked, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)})
    client.get_run(42)
    with pytest.raises(DeadlineExceeded, match="quota is spent until its reset"):
        client.get_run(42, deadline=clock.monotonic() + 120)
    assert clock.sleeps == []
    assert len(mocked.calls) == 1


def test_rate_limit_overview_is_read_from_core(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """GET /rate_limit: `resources.core` fills the known quota."""
    reset = int(clock.now().timestamp()) + 900
    core = {"limit": 1000, "remaining": 17, "reset": reset, "used": 983}
    mocked.get(f"{API}/rate_limit", json={"resources": {"core": core}})
    client.get_rate_limit()
    assert (client.stats.rate_remaining, client.stats.rate_limit) == (17, 1000)
    assert client.quota_known()
    assert client.seconds_to_reset() == 901.0


def test_retry_after_as_an_http_date(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """retry-after may be a date: the wait is measured from the Clock's now."""
    when = (clock.now() + timedelta(seconds=20)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    error_reply(mocked, 429, "secondary rate limit", headers={"retry-after": when})
    run_reply(mocked)
    client.get_run(42)
    assert clock.sleeps == [20.0]


@pytest.mark.parametrize(
    ("ahead", "wait"),
    [
        pytest.param(37, 38.0, id="reset-37s-ahead-plus-1s-margin"),
        pytest.param(-5, 0.0, id="reset-already-passed"),
    ],
)
def test_primary_limit_waits_until_reset(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock, ahead: int, wait: float
) -> None:
    """x-ratelimit-remaining 0: wait until the reset (on the Clock's now) + 1 s."""
    reset = int(clock.now().timestamp()) + ahead
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
    error_reply(mocked, 403, "API rate limit exceeded", headers=headers)
    run_reply(mocked)
    client.get_run(42)
    assert clock.sleeps == [wait]


@pytest.mark.parametrize(
    ("status", "headers", "message", "kind"),
    [
        pytest.param(429, {}, "Too many requests", "secondary", id="bare-429"),
        pytest.param(
            403, {}, "You have exceeded a secondary rate limit", "secondary", id="message"
        ),
        pytest.param(
            403,
            {"x-ratelimit-remaining": "0"},
            "You have exceeded a secondary rate limit",
            "secondary",
            id="remaining-0-secondary-message",
        ),
        pytest.param(429, {"x-ratelimit-remaining": "0"}, "limit", "primary", id="remaining-0"),
    ],
)
def test_rate_limit_without_a_time_waits_60_seconds(
    *,
    client: GitHubClient,
    mocked: responses.RequestsMock,
    clock: FakeClock,
    status: int,
    headers: dict[str, str],
    message: str,
    kind: str,
) -> None:
    """Neither retry-after nor a reset: one minute, then two, which the spec's cap refuses."""
    for _ in range(2):
        error_reply(mocked, status, message, headers=headers)
    with pytest.raises(RateLimited) as caught:
        client.get_run(42)
    assert clock.sleeps == [60.0]
    assert caught.value.kind == kind
    assert caught.value.attempts == 2
    assert f"{kind} rate limit" in str(caught.value)


def test_rate_limit_then_server_error_each_use_their_wait(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """Mixed failures share the two-retry budget; each wait follows its own rule."""
    error_reply(mocked, 429, "slow down", headers={"retry-after": "3"})
    error_reply(mocked, 500)
    run_reply(mocked)
    client.get_run(42)
    assert clock.sleeps == [3.0, 10.0]


def test_rate_remaining_is_tracked(client: GitHubClient, mocked: responses.RequestsMock) -> None:
    """stats.rate_remaining is the last x-ratelimit-remaining seen."""
    run_reply(mocked, headers={"x-ratelimit-remaining": "812"})
    assert client.stats.rate_remaining is None
    client.get_run(42)
    assert client.stats.rate_remaining == 812


# -- never retried ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"),
    [
        pytest.param(401, Unauthorized, id="401"),
        pytest.param(403, PermissionDenied, id="403-not-rate-limit"),
        pytest.param(404, NotFound, id="404"),
        pytest.param(409, Conflict, id="409"),
        pytest.param(422, Unprocessable, id="422"),
        pytest.param(400, GitHubAPIError, id="400"),
    ],
)
def test_client_errors_fail_at_once(
    client: GitHubClient,
    mocked: responses.RequestsMock,
    clock: FakeClock,
    status: int,
    error: type[GitHubAPIError],
) -> None:
    """401, non-rate-limit 403, 404, 409, 422 and other 4xx: one request, no wait."""
    error_reply(mocked, status, "Resource not accessible by integration")
    with pytest.raises(error) as caught:
        client.get_run(42)
    assert type(caught.value) is error
    assert len(mocked.calls) == 1
    assert clock.sleeps == []
    assert caught.value.attempts == 1
    assert "attempts: 1" in str(caught.value)


def test_permission_denied_explains_the_fix(
    client: GitHubClient, mocked: responses.RequestsMock
) -> None:
    """A refused token names the permissions to grant."""
    error_reply(mocked, 403, "Resource not accessible by integration")
    with pytest.raises(PermissionDenied, match=r"actions: write"):
        client.get_run(42)


# -- cancellation -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "suffix"),
    [("cancel_run", "cancel"), ("force_cancel_run", "force-cancel")],
)
def test_cancel_outcomes(
    client: GitHubClient, mocked: responses.RequestsMock, method: str, suffix: str
) -> None:
    """202 is ACCEPTED; a 409 is ALREADY_COMPLETED, not an error, once a fresh read says so."""
    mocked.post(f"{RUN_URL}/{suffix}", status=202, json={})
    error_reply(
        mocked,
        409,
        "Cannot cancel a workflow run that is completed.",
        method=responses.POST,
        url=f"{RUN_URL}/{suffix}",
    )
    # the fresh read a 409 calls for
    mocked.get(RUN_URL, json=payloads.workflow_run(status="completed", conclusion="cancelled"))
    cancel = getattr(client, method)
    assert cancel(42) is CancelOutcome.ACCEPTED
    assert cancel(42) is CancelOutcome.ALREADY_COMPLETED


def test_cancel_is_retried_like_a_read(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """A cancel that meets a 502 and a timeout is retried after 5 s and 10 s."""
    error_reply(mocked, 502, method=responses.POST, url=f"{RUN_URL}/cancel")
    mocked.post(f"{RUN_URL}/cancel", body=requests.exceptions.ReadTimeout("read"))
    mocked.post(f"{RUN_URL}/cancel", status=202, json={})
    assert client.cancel_run(42) is CancelOutcome.ACCEPTED
    assert clock.sleeps == [5.0, 10.0]


def test_cancel_refused_is_permission_denied_at_once(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """A cancel without actions: write fails at once."""
    error_reply(mocked, 403, "Forbidden", method=responses.POST, url=f"{RUN_URL}/cancel")
    with pytest.raises(PermissionDenied):
        client.cancel_run(42)
    assert clock.sleeps == []


# -- deadlines --------------------------------------------------------------------------------


def test_retry_wait_past_the_deadline_is_not_taken(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """Deadline 8 s away: the 5 s wait is taken, the 10 s one is not; the last error is kept."""
    deadline = clock.monotonic() + 8
    error_reply(mocked, 502, "Bad Gateway")
    error_reply(mocked, 503, "Unavailable")
    with pytest.raises(DeadlineExceeded) as caught:
        client.get_run(42, deadline=deadline)
    assert clock.sleeps == [5.0]
    assert len(mocked.calls) == 2
    assert "503" in caught.value.last_error
    assert "attempts: 2" in caught.value.last_error
    assert isinstance(caught.value.__cause__, ServerError)
    assert f"GET {RUN_PATH}" in str(caught.value)


def test_reply_after_the_deadline_is_refused(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """A 200 that arrives after the deadline cannot be used."""
    deadline = clock.monotonic() + 8

    def slow(_request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        clock.advance(9)
        return 200, {}, json.dumps(payloads.workflow_run())

    mocked.add_callback(responses.GET, RUN_URL, callback=slow)
    with pytest.raises(DeadlineExceeded) as caught:
        client.get_run(42, deadline=deadline)
    assert "HTTP 200 arrived 1s after the deadline" in caught.value.last_error
    assert clock.sleeps == []


def test_timeout_ending_after_the_deadline_is_not_retried(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """A request that fails after the deadline ends the call: no wait, DeadlineExceeded."""
    deadline = clock.monotonic() + 10

    def hang(_request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        clock.advance(15)
        raise requests.exceptions.ReadTimeout("read timed out")

    mocked.add_callback(responses.GET, RUN_URL, callback=hang)
    with pytest.raises(DeadlineExceeded, match="timed out"):
        client.get_run(42, deadline=deadline)
    assert clock.sleeps == []


def test_late_404_is_a_deadline_not_a_not_found(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """Any reply after the deadline is unusable, including one the caller would tolerate."""
    deadline = clock.monotonic() + 1

    def late(_request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        clock.advance(2)
        return 404, {}, json.dumps({"message": "Not Found"})

    mocked.add_callback(responses.GET, RUN_URL, callback=late)
    with pytest.raises(DeadlineExceeded, match="HTTP 404"):
        client.get_run(42, deadline=deadline)


def test_no_request_once_the_deadline_has_passed(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """A call that starts past its deadline sends nothing."""
    clock.advance(10)
    with pytest.raises(DeadlineExceeded):
        client.get_run(42, deadline=5.0)
    assert client.stats.sent == 0


def test_retries_within_the_deadline_succeed(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """Waits that end before the deadline are taken as usual."""
    error_reply(mocked, 500)
    error_reply(mocked, 500)
    run_reply(mocked)
    assert client.get_run(42, deadline=clock.monotonic() + 15).id == 42
    assert clock.sleeps == [5.0, 10.0]


def test_attempts_run_out_before_the_deadline(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """With time left, the third failure is raised as itself, not as a deadline."""
    for _ in range(3):
        error_reply(mocked, 500)
    with pytest.raises(ServerError):
        client.get_run(42, deadline=clock.monotonic() + 120)


# -- conditional requests ---------------------------------------------------------------------


def test_repeated_get_is_conditional_and_304_is_free(
    client: GitHubClient, mocked: responses.RequestsMock
) -> None:
    """The second GET sends If-None-Match; its 304 returns the cached run and is not counted."""
    etag = 'W/"abc123"'
    run_reply(mocked, headers={"ETag": etag})
    mocked.get(
        RUN_URL,
        status=304,
        match=[matchers.header_matcher({"If-None-Match": etag})],
    )
    first = client.get_run(42)
    second = client.get_run(42)
    assert second == first
    assert "If-None-Match" not in mocked.calls[0].request.headers
    assert client.stats.sent == 2
    assert client.stats.not_modified == 1
    assert client.stats.counted == 1


def test_changed_resource_replaces_the_cache(
    client: GitHubClient, mocked: responses.RequestsMock
) -> None:
    """A 200 with a new ETag replaces the cached body and the next If-None-Match."""
    run_reply(mocked, headers={"ETag": '"v1"'})
    mocked.get(
        RUN_URL,
        json=payloads.workflow_run(status="in_progress"),
        headers={"ETag": '"v2"'},
        match=[matchers.header_matcher({"If-None-Match": '"v1"'})],
    )
    mocked.get(RUN_URL, status=304, match=[matchers.header_matcher({"If-None-Match": '"v2"'})])
    client.get_run(42)
    assert client.get_run(42).status == "in_progress"
    assert client.get_run(42).status == "in_progress"


def test_unconditional_client_never_sends_if_none_match(
    clock: FakeClock, mocked: responses.RequestsMock
) -> None:
    """conditional=False: no cache, no If-None-Match."""
    run_reply(mocked, headers={"ETag": '"v1"'})
    run_reply(mocked, headers={"ETag": '"v1"'})
    with requests.Session() as session:
        client = GitHubClient(session, API, payloads.REPOSITORY, TOKEN, clock, conditional=False)
        client.get_run(42)
        client.get_run(42)
    assert all("If-None-Match" not in call.request.headers for call in mocked.calls)
    assert client.stats.counted == 2


def test_malformed_body_is_not_cached(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """A body that failed to parse is not kept, so the retry asks unconditionally."""
    mocked.get(RUN_URL, body="{oops", headers={"ETag": '"bad"'})
    run_reply(mocked, headers={"ETag": '"good"'})
    assert client.get_run(42).id == 42
    assert "If-None-Match" not in mocked.calls[1].request.headers
    assert clock.sleeps == [5.0]


# -- secrecy ----------------------------------------------------------------------------------


def test_token_is_never_shown(
    client: GitHubClient, mocked: responses.RequestsMock, logs: list[str]
) -> None:
    """Neither repr, errors, nor log lines show the token, even when a reply echoes it."""
    assert TOKEN not in repr(client)
    assert payloads.REPOSITORY in repr(client)
    error_reply(mocked, 500, f"bad credentials {TOKEN}")
    mocked.get(RUN_URL, body=requests.exceptions.ConnectionError(f"proxy said {TOKEN}"))
    error_reply(mocked, 401, f"Bad credentials: {TOKEN}")
    with pytest.raises(PermissionDenied) as caught:
        client.get_run(42)
    assert_secret_free(str(caught.value), repr(caught.value), *logs)
    assert len(logs) == 2


def test_repository_must_be_owner_slash_name(clock: FakeClock) -> None:
    """A malformed repository is refused before any request."""
    with requests.Session() as session, pytest.raises(ValueError, match="owner/name"):
        GitHubClient(session, API, "just-a-name", TOKEN, clock)


@pytest.mark.parametrize(("retry_after", "waited"), [("60", True), ("61", False)])
def test_without_a_child_a_rate_limit_wait_of_one_minute_is_the_most_taken(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock, retry_after, waited
) -> None:
    """Spec: rate-limit retries wait "at most one minute each": 60 s is waited, 61 s is not."""
    error_reply(
        mocked,
        429,
        "You have exceeded a secondary rate limit",
        headers={"retry-after": retry_after},
    )
    if waited:
        run_reply(mocked)
        client.get_run(42)
        assert clock.sleeps == [60.0]
    else:
        with pytest.raises(RateLimited):
            client.get_run(42)
        assert clock.sleeps == []


@pytest.mark.parametrize(("ahead", "wait"), [(3630, 3631.0), (3700, 60.0)])
def test_a_reset_is_waited_for_up_to_an_hour_and_a_minute_of_clock_margin(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock, ahead, wait
) -> None:
    """No quota window is longer than an hour: a reset up to a minute beyond it is a clock
    difference and is waited for; one further away is not believed: it is absent, and the
    limit is waited out as one without a reset (a minute's back-off)."""
    client.patience = Patience.CHILD_EXISTS
    reset = int(clock.now().timestamp()) + ahead
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)}
    error_reply(mocked, 403, "API rate limit exceeded", headers=headers)
    run_reply(mocked)
    client.get_run(42)
    assert clock.sleeps == [wait]


#: A reset of 17 digits: a year no date can hold (`datetime.fromtimestamp` raises).
HUGE_RESET = "12345678901234567"


@pytest.mark.parametrize(
    "reset",
    [
        pytest.param(lambda _now: HUGE_RESET, id="17-digits"),
        pytest.param(lambda _now: "253402300800", id="year-10000"),
        pytest.param(lambda now: str(now + 3700), id="an-hour-and-more-ahead"),
    ],
)
def test_a_reset_beyond_the_hour_is_absent_in_every_read_of_it(
    client: GitHubClient,
    mocked: responses.RequestsMock,
    clock: FakeClock,
    reset: Callable[[int], str],
) -> None:
    """A reply with 0 left and an unbelievable reset: nothing waits for it, and `reset_time()`
    (which log lines on the way to a cancel call) says `?` instead of raising."""
    client.patience = Patience.CHILD_EXISTS
    header = reset(int(clock.now().timestamp()))
    run_reply(mocked, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": header})
    client.get_run(42)
    assert client.stats.rate_reset is None
    assert client.reset_time() == "?"
    assert client.quota_reset_in() is None
    assert client.seconds_to_reset() == 0.0
    mocked.post(f"{RUN_URL}/cancel", status=202, json={})
    assert client.cancel_run(42) is CancelOutcome.ACCEPTED  # sent at once, no wait
    assert clock.sleeps == []


def test_a_rate_limit_overview_with_a_17_digit_reset_is_absent(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """GET /rate_limit's body is read the same way: a reset no date holds is none."""
    core = {"limit": 1000, "remaining": 0, "reset": int(HUGE_RESET), "used": 1000}
    mocked.get(f"{API}/rate_limit", json={"resources": {"core": core}})
    client.get_rate_limit()
    assert client.stats.rate_remaining == 0
    assert client.stats.rate_reset is None
    assert not client.quota_known()
    assert client.reset_time() == "?"


def test_reset_time_never_raises_whatever_the_stats_hold(client: GitHubClient) -> None:
    """`reset_time()` formats only a believable reset; anything else is `?`."""
    for value in (float(HUGE_RESET), float("inf"), float("nan"), -1.0):
        client.stats.rate_reset = value
        assert client.reset_time() == "?"


def test_once_a_child_exists_one_request_takes_at_most_four_rate_limit_waits(
    client: GitHubClient, mocked: responses.RequestsMock, clock: FakeClock
) -> None:
    """Documented: the waits are taken in full, up to 4 a request; the fifth refusal is reported."""
    client.patience = Patience.CHILD_EXISTS
    for _ in range(5):
        error_reply(
            mocked, 429, "You have exceeded a secondary rate limit", headers={"retry-after": "30"}
        )
    with pytest.raises(RateLimited):
        client.get_run(42)
    assert clock.sleeps == [30.0] * 4


# -- one place builds every path; an error body nested past any stack ---------------------------


@pytest.mark.found_by("review", issue=15)
def test_client_refuses_dot_segments_and_encodes_each_segment(no_network):
    """One place builds every path: `..` is refused, `/` inside a single value is encoded."""
    session, adapter = no_network
    client = GitHubClient(session, "https://api.github.test", "o/r", "t", FakeClock())
    with pytest.raises(GitHubError, match=r"segment '\.\.'"):
        client.get_commit_sha("heads/x/../../other")
    with pytest.raises(GitHubError, match="segment ''"):
        client.get_file_sha(".github//x.yml", "main")
    assert adapter.sent == []
    with pytest.raises(AssertionError):  # the no-network adapter: a request was attempted
        client.dispatch_workflow("a/b.yml", "main", {})
    assert adapter.sent[-1].split(" ")[1].endswith("/actions/workflows/a%2Fb.yml/dispatches")


@pytest.mark.found_by("review", issue=15)
def test_deeply_nested_error_body_is_cut_not_raised():
    """A 502 whose body is JSON nested 100,000 deep, while the child is queued.

    Before: RecursionError from reading GitHub's `message` escaped `Coordinator.run`: no
    cleanup, no `::error`. After: the message is cut and the reply is a retried server error.
    """
    deep = b"[" * 100_000 + b"]" * 100_000
    fired: list[float] = []

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        if method == "GET" and child_run_id(path, world) and world.now() > 40 and not fired:
            fired.append(world.now())
            return Reply(502, {"Content-Type": "application/json"}, deep)
        return None

    w = minute_queues(watched=True).pools(FOREVER, ())
    w.tamper.rules.append(rule)
    result = w.run()
    assert fired
    assert result.exit_code == 0, result.log
