"""The request id's grammar: what the coordinator writes, the guard and `stats` read back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from runner_queue_fallback.core.request_id import (
    RequestId,
    created_since,
    parse,
    stated_time,
)


def test_a_formatted_request_id_parses_back_to_its_parts() -> None:
    request_id = RequestId(9000000001, 2, 3, "0a1b2c3d")

    assert str(request_id) == "rqf-9000000001-2-3-0a1b2c3d"
    assert parse(str(request_id)) == request_id


@pytest.mark.parametrize(
    "text",
    [
        "hello",
        "rqf-1-1-1",  # no token
        "rqf-01-1-1-0a1b2c3d",  # leading zero
        "rqf-1-0-1-0a1b2c3d",  # attempt 0
        "rqf-1-1-1-0A1B2C3D",  # upper-case token
        "rqf-1-1-1-0a1b2c3d ",  # trailing space
        "rqf-1-1-1-0a1b2c3d\n",  # trailing newline
        " rqf-1-1-1-0a1b2c3d",
        "rqf-1-1-1-0a1b2c3dx",
        "rqf-\u0661-1-1-0a1b2c3d",  # non-ASCII digit
    ],
)
def test_anything_but_an_exact_request_id_is_refused(text: str) -> None:
    assert parse(text) is None


# -- issue 44, finding 4: the request id states a time of GitHub's clock -------------------------

STATED = datetime(2026, 11, 2, 9, 0, 40, tzinfo=UTC)
A_MINUTE = timedelta(seconds=60)  # the stated margin


def test_a_request_id_states_a_time_in_utc_to_the_second_and_parses_back() -> None:
    request_id = RequestId(9000000001, 2, 3, "0a1b2c3d", not_before=STATED)

    assert str(request_id) == "rqf-9000000001-2-3-0a1b2c3d-20261102T090040Z"
    assert parse(str(request_id)) == request_id


def test_an_id_of_the_older_form_still_parses_and_states_no_time() -> None:
    """What a coordinator of an earlier commit made: the guard, the post step and `stats` read it."""
    request = parse("rqf-9000000001-2-3-0a1b2c3d")

    assert request == RequestId(9000000001, 2, 3, "0a1b2c3d")
    assert request is not None
    assert request.not_before is None
    assert str(request) == "rqf-9000000001-2-3-0a1b2c3d"


@pytest.mark.parametrize(
    "suffix",
    [
        "20261302T090040Z",  # month 13
        "20261102T250040Z",  # hour 25
        "20261102T090061Z",  # second 61
        "20261102t090040z",  # lower case
        "20261102T090040",  # no zone
        "2026-11-02T09:00:40Z",  # the extended form
        "20261102T0900400Z",  # a digit too many
        "1793610040",  # epoch seconds
    ],
)
def test_a_stated_time_is_a_real_utc_second_in_the_basic_form(suffix: str) -> None:
    assert parse("rqf-1-1-1-0a1b2c3d-20261102T090040Z") is not None
    assert parse(f"rqf-1-1-1-0a1b2c3d-{suffix}") is None


@pytest.mark.parametrize(
    ("github_now", "started", "stated"),
    [
        pytest.param(STATED, STATED - timedelta(hours=2), STATED - A_MINUTE, id="date"),
        pytest.param(
            STATED, STATED - timedelta(seconds=30), STATED - timedelta(seconds=30), id="start"
        ),
        pytest.param(
            STATED + timedelta(microseconds=900_000),
            None,
            STATED - A_MINUTE,
            id="whole-seconds-rounded-down",
        ),
        pytest.param(None, STATED, STATED, id="no-date"),
        pytest.param(None, None, None, id="nothing-known"),
    ],
)
def test_the_stated_time_is_githubs_date_less_a_minute_never_before_the_attempts_start(
    github_now: datetime | None, started: datetime | None, stated: datetime | None
) -> None:
    assert stated_time(github_now, started) == stated


def test_a_search_starts_at_the_stated_time_when_that_is_earlier_than_its_own_bound() -> None:
    """The post step's and the run-name search's bound comes from the runner's clock."""
    named = "rqf-1-1-1-0a1b2c3d-20261102T090040Z"
    later, earlier = STATED + timedelta(minutes=5), STATED - timedelta(minutes=5)

    assert created_since(named, later) == STATED
    assert created_since(named, earlier) == earlier
    assert created_since("rqf-1-1-1-0a1b2c3d", later) == later  # the older form states none
