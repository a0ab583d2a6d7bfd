"""Rate limits and retries: rules the fixed mutation runner found held by no test (issue 35).

Each test states one rule of `github/retry.py` and fails when it breaks: which resets are
believed (the epoch itself is a past reset; the bound is an hour and a minute, margin included),
that a `Retry-After` beginning like a number is a number or nothing (never a date), and, when a
call's deadline and its retry budget both end it, which error the caller gets. The header rules
call the helpers the client reads headers with; the budget rules run `spec_retrying`, the
client's whole retry policy, on a fake clock.
"""

from __future__ import annotations

import email.utils
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
from runner_queue_fallback.github.retry import (
    RESET_MARGIN_SECONDS,
    Patience,
    believable_reset,
    retry_after_seconds,
    spec_retrying,
)

NOW = EPOCH


@pytest.mark.parametrize("epoch", [0.0, 0.5])
def test_a_reset_at_the_epoch_itself_is_a_past_reset_believed_not_an_odd_one(epoch: float):
    """Only a negative reset is odd; 0 (1970) is long past: it asks for no wait."""
    assert believable_reset(epoch, NOW) == epoch


def test_a_reset_is_believed_up_to_an_hour_and_a_minute_away_margin_included():
    """The wait, with its 1 s margin, may be `RESET_WAIT_MAX_SECONDS` and no more."""
    furthest = NOW.timestamp() + timing.RESET_WAIT_MAX_SECONDS - RESET_MARGIN_SECONDS
    assert believable_reset(furthest, NOW) == furthest
    assert believable_reset(furthest + 0.5, NOW) is None


def test_a_retry_after_beginning_like_a_number_is_never_read_as_a_date():
    """`02 Nov 2026 ...` parses as a date, but an HTTP date begins with its weekday: a value
    that begins with a digit is a number or nothing (absent)."""
    http_date = email.utils.format_datetime(NOW + timedelta(seconds=30), usegmt=True)
    without = http_date.partition(", ")[2].lstrip("0")  # no weekday: "2 Nov 2026 ..."
    assert without[0].isdigit()
    assert retry_after_seconds(http_date, NOW) == 30.0
    assert retry_after_seconds(without, NOW) is None


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


def test_a_patient_call_stopped_by_its_deadline_at_its_fourth_wait_ends_past_its_deadline():
    """A child exists: four waits are allowed; the fourth would end past the deadline, so the
    call ends with DeadlineExceeded (the caller's window), not with the refusal itself."""
    assert call(lambda: limited(100.0), 350.0, Patience.CHILD_EXISTS) == (DeadlineExceeded, 4)


def test_a_patient_call_whose_waits_ran_out_ends_with_the_refusal_itself():
    """The fifth wait is over the budget (and past the deadline too): the refusal is raised."""
    assert call(lambda: limited(100.0), 450.0, Patience.CHILD_EXISTS) == (RateLimited, 5)


def test_a_patient_wait_of_exactly_an_hour_and_a_minute_is_within_the_budget():
    """Past the deadline, so the call ends there: DeadlineExceeded, not the refusal."""
    wait = timing.RESET_WAIT_MAX_SECONDS
    assert call(lambda: limited(wait), 100.0, Patience.CHILD_EXISTS) == (DeadlineExceeded, 1)


def test_without_a_child_a_wait_of_exactly_a_minute_is_within_the_specs_cap():
    wait = timing.RATE_LIMIT_WAIT_CAP_SECONDS
    assert call(lambda: limited(wait), 30.0, Patience.SPEC) == (DeadlineExceeded, 1)


def test_a_server_error_whose_retry_would_end_past_the_deadline_ends_the_call_there():
    def failure() -> ServerError:
        return ServerError("GET", "/x", 502, "bad gateway")

    assert call(failure, 2.0, Patience.SPEC) == (DeadlineExceeded, 1)
