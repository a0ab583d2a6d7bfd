"""Rate limits and retries (`github/retry.py`): which waits GitHub's headers ask for, and what a
call does when its deadline or its retry budget ends it.

The header rules call the helpers the client reads its replies' headers with (a past wait is no
wait, a negative or endless one is absent, a reset is believed up to an hour and a minute away);
the budget rules run `spec_retrying`, the client's whole retry policy, on a fake clock; the
departures (README, 1 and 3) run one client call, or the real coordinator through `cli.main`,
against the fake GitHub (`tests.scenario`).
"""

from __future__ import annotations

import email.utils
import itertools
import math
from collections.abc import Callable
from datetime import timedelta

import pytest

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import EPOCH, FakeClock
from runner_queue_fallback.core.errors import (
    DeadlineExceeded,
    GitHubError,
    RateLimited,
    ServerError,
)
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.retry import (
    RESET_MARGIN_SECONDS,
    Patience,
    RateLimit,
    RateLimitKind,
    believable_reset,
    classify_rate_limit,
    rate_limit_wait,
    reset_seconds,
    retry_after_seconds,
    spec_retrying,
)
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, TOKEN, standard_world
from tests.invariants import dispatch_posts
from tests.outside import Rule, Tamper, child_run_id, error_reply
from tests.scenario import FOREVER, Scenario, minute_queues

#: The Clock's wall time for the header tests (any aware time would do).
NOW = EPOCH

# -- which resets are believed ------------------------------------------------------------------


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize("epoch", [0.0, 0.5])
def test_a_reset_at_the_epoch_itself_is_a_past_reset_believed_not_an_odd_one(epoch: float):
    """Only a negative reset is odd; 0 (1970) is long past: it asks for no wait."""
    assert believable_reset(epoch, NOW) == epoch


@pytest.mark.found_by("mutation", issue=35)
def test_a_reset_is_believed_up_to_an_hour_and_a_minute_away_margin_included():
    """The wait, with its 1 s margin, may be `RESET_WAIT_MAX_SECONDS` and no more."""
    furthest = NOW.timestamp() + timing.RESET_WAIT_MAX_SECONDS - RESET_MARGIN_SECONDS
    assert believable_reset(furthest, NOW) == furthest
    assert believable_reset(furthest + 0.5, NOW) is None


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize("epoch", [-1.0, -0.5, math.inf, -math.inf, math.nan])
def test_a_negative_or_endless_reset_is_not_believed_and_a_past_one_is(epoch: float):
    """`believable_reset` (every reset the client reads, `GET /rate_limit` too): a negative or
    endless number is absent; a reset 30 s ago is kept (it asks for no wait)."""
    assert believable_reset(epoch, NOW) is None
    past = NOW.timestamp() - 30
    assert believable_reset(past, NOW) == past


# -- rate-limit headers: a past time, a short wait, an odd number -------------------------------


SPENT = "API rate limit exceeded for installation."


def _http_date(seconds_from_now: float) -> str:
    """An HTTP date (`Retry-After`'s other form) `seconds_from_now` from `NOW`."""
    return email.utils.format_datetime(NOW + timedelta(seconds=seconds_from_now), usegmt=True)


def _spent_quota(reset: str) -> dict[str, str]:
    """A spent primary quota's headers, resetting at `reset` (epoch seconds, as sent)."""
    return {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}


@pytest.mark.found_by("mutation", issue=35)
def test_a_retry_after_date_already_past_is_a_wait_of_0_s_never_a_negative_one():
    """GitHub's clock and ours differ: a `Retry-After` date 30 s ago asks for no wait."""
    limit = classify_rate_limit(429, {"retry-after": _http_date(-30)}, "slow down", NOW)
    assert limit == RateLimit(RateLimitKind.SECONDARY, 0.0, "retry-after")


@pytest.mark.found_by("mutation", issue=35)
def test_a_quota_reset_already_past_is_a_wait_of_0_s_never_a_negative_one():
    """A spent quota whose reset was 30 s ago (29 s ago with its 1 s margin) asks for no wait."""
    past = str(int(NOW.timestamp()) - 30)
    limit = classify_rate_limit(403, _spent_quota(past), SPENT, NOW)
    assert limit == RateLimit(RateLimitKind.PRIMARY, 0.0, "reset")


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize(("value", "wait"), [("1", 1.0), ("0.5", 0.5), ("0", 0.0)])
def test_a_retry_after_of_at_most_one_second_is_waited_not_dropped(value: str, wait: float):
    """`Retry-After: 1` is a wait of 1 s (not 0, not the 60 s back-off of an absent header)."""
    limit = classify_rate_limit(429, {"retry-after": value}, "slow down", NOW)
    assert limit == RateLimit(RateLimitKind.SECONDARY, wait, "retry-after")


@pytest.mark.found_by("mutation", issue=35)
def test_a_retry_after_beginning_like_a_number_is_never_read_as_a_date():
    """`02 Nov 2026 ...` parses as a date, but an HTTP date begins with its weekday: a value
    that begins with a digit is a number or nothing (absent)."""
    http_date = email.utils.format_datetime(NOW + timedelta(seconds=30), usegmt=True)
    without = http_date.partition(", ")[2].lstrip("0")  # no weekday: "2 Nov 2026 ..."
    assert without[0].isdigit()
    assert retry_after_seconds(http_date, NOW) == 30.0
    assert retry_after_seconds(without, NOW) is None


ODD_NUMBERS = ["-30", "-0.5", "inf", "-inf", "1e999", "nan"]


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize("value", ODD_NUMBERS)
def test_a_negative_or_infinite_retry_after_is_read_as_absent(value: str):
    """As the docstring says: no `Retry-After` at all, so a spent quota's reset decides the
    wait, and without one the minute's back-off does."""
    assert retry_after_seconds(value, NOW) is None
    reset = str(int(NOW.timestamp()) + 30)
    with_reset = {"retry-after": value, **_spent_quota(reset)}
    assert rate_limit_wait(with_reset, NOW) == 31.0  # until the reset, with its 1 s margin
    backoff = timing.SECONDARY_BACKOFF_FIRST_SECONDS
    alone = classify_rate_limit(429, {"retry-after": value}, "slow down", NOW)
    assert alone == RateLimit(RateLimitKind.SECONDARY, backoff, "backoff")


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize("value", ODD_NUMBERS)
def test_a_negative_or_infinite_reset_is_read_as_absent(value: str):
    """A spent quota with such a reset is waited out as a limit without a time (a minute)."""
    assert reset_seconds(value, NOW) is None
    limit = classify_rate_limit(403, _spent_quota(value), SPENT, NOW)
    assert limit == RateLimit(
        RateLimitKind.PRIMARY, timing.SECONDARY_BACKOFF_FIRST_SECONDS, "backoff"
    )


def rate_limit_once_while_queued(retry_after: str) -> Rule:
    fired: list[float] = []

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        if method == "GET" and child_run_id(path, world) and world.now() > 40 and not fired:
            fired.append(world.now())
            message = "You have exceeded a secondary rate limit. Please wait."
            return error_reply(403, message, {"Retry-After": retry_after})
        return None

    return rule


@pytest.mark.found_by("review", issue=15)
@pytest.mark.parametrize(
    "retry_after",
    [
        pytest.param("Thu, 01 Jan 2026 00:00:30 -0000", id="http-date-without-zone"),
        pytest.param("nan", id="nan"),
        pytest.param("inf", id="inf"),
        pytest.param("-30", id="negative"),
    ],
)
def test_odd_retry_after_is_read_as_absent(retry_after: str):
    """A `Retry-After` HTTP date ending in `-0000`, or NaN/inf/negative seconds.

    Before: the date raised TypeError (naive minus aware datetime) out of `Coordinator.run`: a
    traceback, no cleanup, the child left queued; `nan` made the wait NaN. After: read as absent
    (the default wait, capped at 60 s), and the sequence goes on.
    """
    w = minute_queues(watched=True).pools(FOREVER, ())
    w.tamper.rules.append(rate_limit_once_while_queued(retry_after))
    result = w.run()
    assert w.tamper.fired == 1
    assert result.exit_code == 0, result.log
    assert all(math.isfinite(s) and 0 <= s <= 60 for s in w.clock.sleeps), w.clock.sleeps


# -- a call's deadline and its retry budget -----------------------------------------------------


def limited(wait: float, kind: str = "secondary") -> RateLimited:
    return RateLimited(
        "GET", "/x", 429, "slow down", kind=kind, retry_after=wait, basis="retry-after"
    )


def call(
    failure: Callable[[], GitHubError], deadline: float, patience: Patience
) -> tuple[type[GitHubError], int]:
    """Every attempt fails with `failure()`: the error the call ends with, and attempts made."""
    clock = FakeClock()
    made = 0

    def run() -> None:
        nonlocal made
        for attempt in spec_retrying(clock, deadline, method="GET", path="/x", patience=patience):
            with attempt:
                made += 1
                raise failure()

    with pytest.raises(GitHubError) as ended:
        run()
    return type(ended.value), made


@pytest.mark.found_by("mutation", issue=35)
def test_a_patient_call_stopped_by_its_deadline_at_its_fourth_wait_ends_past_its_deadline():
    """A child exists: four waits are allowed; the fourth would end past the deadline, so the
    call ends with DeadlineExceeded (the caller's window), not with the refusal itself."""
    assert call(lambda: limited(100.0), 350.0, Patience.CHILD_EXISTS) == (DeadlineExceeded, 4)


@pytest.mark.found_by("mutation", issue=35)
def test_a_patient_call_whose_waits_ran_out_ends_with_the_refusal_itself():
    """The fifth wait is over the budget (and past the deadline too): the refusal is raised."""
    assert call(lambda: limited(100.0), 450.0, Patience.CHILD_EXISTS) == (RateLimited, 5)


@pytest.mark.found_by("mutation", issue=35)
def test_a_patient_wait_of_exactly_an_hour_and_a_minute_is_within_the_budget():
    """Past the deadline, so the call ends there: DeadlineExceeded, not the refusal."""
    wait = timing.RESET_WAIT_MAX_SECONDS
    assert call(lambda: limited(wait), 100.0, Patience.CHILD_EXISTS) == (DeadlineExceeded, 1)


@pytest.mark.found_by("mutation", issue=35)
def test_without_a_child_a_wait_of_exactly_a_minute_is_within_the_specs_cap():
    wait = timing.RATE_LIMIT_WAIT_CAP_SECONDS
    assert call(lambda: limited(wait), 30.0, Patience.SPEC) == (DeadlineExceeded, 1)


@pytest.mark.found_by("mutation", issue=35)
def test_a_server_error_whose_retry_would_end_past_the_deadline_ends_the_call_there():
    def failure() -> ServerError:
        return ServerError("GET", "/x", 502, "bad gateway")

    assert call(failure, 2.0, Patience.SPEC) == (DeadlineExceeded, 1)


# -- departure 3: before any dispatch, a secondary limit without retry-after gets one retry -----


@pytest.mark.found_by("audit", issue=26)
def test_before_any_dispatch_a_secondary_limit_without_retry_after_gets_one_retry_not_two():
    """Back-off from a minute: the first retry waits 60 s, the second would wait 120 s, over the
    spec's one-minute cap, so the request ends there (README, departure 3); with no admission
    budget the error is reported (with one, admission waits: departure 23, tests/test_quota.py)."""

    def secondary_without_retry_after(method: str, path: str, reply: Reply, world: FakeGitHub):
        if method != "GET" or "/git/ref/" not in path:
            return None
        headers = {"x-ratelimit-remaining": "500", "x-ratelimit-limit": "1000"}
        return error_reply(403, "You have exceeded a secondary rate limit.", headers)

    s = Scenario().pools([], [], [])
    Tamper(s.world, [secondary_without_retry_after]).install()
    result = s.run({"admission-timeout-minutes": "0"})
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    reads = [e.time for e in s.world.ledger if "/git/ref/" in e.path]
    assert [t - reads[0] for t in reads] == [0.0, timing.SECONDARY_BACKOFF_FIRST_SECONDS]
    assert "secondary" in result.log.split("::error", 1)[1].splitlines()[0]


# -- departure 1: once a child exists, one request waits out up to 5 resets ---------------------


@pytest.mark.found_by("audit", issue=26)
def test_once_a_child_exists_one_read_waits_out_four_resets_then_reports_the_fifth_refusal():
    """README, departure 1 (and what `plan` says it leaves out): a read refused for a spent quota
    after every reset waits 4 resets, one after each refusal, and reports the fifth refusal."""
    hour = int(timing.QUOTA_WINDOW_SECONDS)
    refusals = timing.PATIENT_RATE_LIMIT_WAITS + 1
    spent = Fault(
        "primary_rate_limit",
        method="GET",
        path=r"/actions/runs/9\d+$",
        start=200.0,
        count=refusals,
        retry_after=hour,
    )
    s = Scenario(faults=[spent]).pools(FOREVER, [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    refused = [e.time for e in s.world.ledger if e.fault == "primary_rate_limit"]
    assert len(refused) == refusals
    gaps = [later - earlier for earlier, later in itertools.pairwise(refused)]
    assert gaps == [hour + 1.0] * 4, "the 4 resets the README and plan state"
    assert "API rate limit" in result.log.split("::error", 1)[1].splitlines()[0]
    assert len(dispatch_posts(s.world)) == 1


@pytest.mark.found_by("audit", issue=26)
def test_a_read_sent_when_the_last_reply_said_the_quota_is_spent_waits_that_reset_first():
    """The fifth reset of departure 1: the reply before said 0 left, so the read waits for that
    reset before it is sent, then up to 4 more after refusals, then reports the error."""
    clock = FakeClock()
    world, _ = standard_world(clock)
    world.spend_quota(world.quota - 1)
    client = GitHubClient(world.session(), world.api_url, world.repository, TOKEN, clock)
    client.patience = Patience.CHILD_EXISTS
    client.get_run(PARENT_RUN_ID)  # served: the last request of the hour, "0 left"
    assert client.quota_reset_in() is not None
    hour = int(timing.QUOTA_WINDOW_SECONDS)
    world.inject(Fault("primary_rate_limit", count=5, retry_after=hour))
    with pytest.raises(RateLimited):
        client.get_run(PARENT_RUN_ID)
    assert len(clock.sleeps) == 1 + 4
    assert all(hour <= wait <= timing.RESET_WAIT_MAX_SECONDS for wait in clock.sleeps)
