"""The fake's rate limits as GitHub documents them: 403 or 429, secondary limits, ETags per read."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from githubkit_schemas.v2026_03_10.models import BasicError, RateLimitOverview, WorkflowRun

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import (
    Scenario,
    SecondaryLimits,
    SecondaryMeter,
    Timings,
    VirtualClock,
)
from tests.test_sim_support import API_VERSION, AUTH, REPO, advance_to, dispatch, get, make_world

if TYPE_CHECKING:
    from pydantic import BaseModel

RUN = "/actions/runs/4242"


def strict(model: type[BaseModel], body: bytes) -> Any:
    return model.model_validate_json(body, strict=True, extra="forbid")


def rate_limit(world, version: str = API_VERSION):
    return world.handle("GET", "/rate_limit", AUTH | {"X-GitHub-Api-Version": version})


# -- the primary quota: 403 or 429 ----------------------------------------------------------


@pytest.mark.parametrize("status", [403, 429])
def test_an_exhausted_quota_answers_in_the_form_the_world_chooses(status):
    clock = FakeClock()
    world = make_world(clock, quota=2, rate_limit_status=status)
    assert [get(world, RUN).status for _ in range(3)] == [200, 200, status]
    refused = world.ledger[-1]
    reply = get(world, RUN)
    assert reply.status == status
    assert reply.headers["X-RateLimit-Remaining"] == "0"
    assert reply.headers["X-RateLimit-Used"] == "2"
    assert int(reply.headers["X-RateLimit-Reset"]) == int(clock.now().timestamp()) + 3600
    assert "API rate limit exceeded" in strict(BasicError, reply.body).message
    assert "Retry-After" not in reply.headers  # a primary refusal says when the window resets
    assert (refused.limit, refused.counted) == ("primary", False)


def test_the_default_form_is_403():
    world = make_world(quota=0)
    assert get(world, RUN).status == 403


# -- secondary limits -----------------------------------------------------------------------


def test_points_per_minute_cost_1_per_get_and_5_per_post_then_refuse_with_retry_after():
    clock = FakeClock()
    world = make_world(clock, secondary=SecondaryLimits(points_per_minute=10))
    for _ in range(4):
        assert get(world, RUN).status == 200
    dispatch(world)  # POST: 5 points, 9 in all
    assert [e.points for e in world.ledger] == [1, 1, 1, 1, 5]
    assert get(world, RUN).status == 200  # 10: the budget is full
    refused = get(world, RUN)
    assert refused.status == 403
    assert refused.headers["Retry-After"] == "60"
    assert refused.headers["X-RateLimit-Remaining"] != "0"  # not the primary quota
    assert int(refused.headers["X-RateLimit-Remaining"]) == 1000 - 6
    assert "secondary rate limit" in strict(BasicError, refused.body).message
    entry = world.ledger[-1]
    assert (entry.limit, entry.counted, entry.points) == ("secondary", False, 0)
    assert world.counted_requests() == 6  # a secondary refusal is not counted against the quota


def test_the_points_window_slides():
    clock = FakeClock()
    world = make_world(clock, secondary=SecondaryLimits(points_per_minute=3))
    for at in (0.0, 20.0, 40.0):
        advance_to(clock, at)
        assert get(world, RUN).status == 200
    advance_to(clock, 59.0)
    assert get(world, RUN).status == 403
    advance_to(clock, 60.0)  # the first read left the window
    assert get(world, RUN).status == 200
    assert get(world, RUN).status == 403


def test_a_304_costs_points_though_it_is_free_against_the_quota():
    world = make_world(secondary=SecondaryLimits(points_per_minute=2))
    first = get(world, RUN)
    again = get(world, RUN, AUTH | {"If-None-Match": first.headers["ETag"]})
    assert again.status == 304
    assert [(e.counted, e.points) for e in world.ledger] == [(True, 1), (False, 1)]
    assert get(world, RUN, AUTH | {"If-None-Match": first.headers["ETag"]}).status == 403


def test_a_primary_refusal_costs_points_too():
    world = make_world(quota=1, secondary=SecondaryLimits(points_per_minute=3))
    assert [get(world, RUN).status for _ in range(4)] == [200, 403, 403, 403]
    assert [e.limit for e in world.ledger] == [None, "primary", "primary", "secondary"]
    last = world.handle("GET", REPO + RUN, AUTH)
    assert "secondary rate limit" in last.json()["message"]


@pytest.mark.parametrize("status", [403, 429])
def test_a_secondary_refusal_uses_the_worlds_status_and_may_leave_out_retry_after(status):
    limits = SecondaryLimits(points_per_minute=1, retry_after=None)
    world = make_world(secondary=limits, rate_limit_status=status)
    assert get(world, RUN).status == 200
    refused = get(world, RUN)
    assert refused.status == status
    assert "Retry-After" not in refused.headers
    assert refused.headers["X-RateLimit-Remaining"] == "999"


def test_concurrent_requests_over_the_limit_are_refused():
    clock = VirtualClock()
    limits = SecondaryLimits(concurrent=2)
    world = make_world(clock, secondary=limits, timings=Timings(latency=1.0))

    def client(delay: float):
        def run() -> int:
            clock.sleep(delay)
            return get(world, RUN).status

        return run

    # three arrive together while each reply takes a second; the fourth comes after they are done
    statuses = clock.run_all([client(0.0), client(0.0), client(0.5), client(1.0)])
    assert statuses == [200, 200, 403, 200]
    assert [e.limit for e in world.ledger] == [None, None, "secondary", None]


def test_the_meter_counts_requests_in_flight_until_their_reply():
    meter = SecondaryMeter(SecondaryLimits(concurrent=1))
    meter.charge(0.0, "GET", reply_at=0.25)
    assert meter.in_flight(0.1) == 1
    assert meter.refuse(0.1, "GET") == "concurrent"
    assert meter.in_flight(0.25) == 0
    assert meter.refuse(0.25, "POST") is None
    assert meter.points_in_window(0.25) == 1


def test_without_secondary_limits_nothing_is_charged():
    world = make_world()
    for _ in range(5):
        get(world, RUN)
    assert world.secondary is None
    assert {e.points for e in world.ledger} == {0}


# -- ETags ------------------------------------------------------------------------------------


def test_stable_etags_answer_an_unchanged_resource_304():
    world = make_world()
    first = get(world, RUN)
    assert get(world, RUN, AUTH | {"If-None-Match": first.headers["ETag"]}).status == 304


def test_etags_that_change_on_every_read_never_answer_304():
    world = make_world(etags="every-read")
    first = get(world, RUN)
    again = get(world, RUN, AUTH | {"If-None-Match": first.headers["ETag"]})
    assert again.status == 200
    assert again.headers["ETag"] != first.headers["ETag"]
    assert again.body == first.body  # the resource did not change, only its tag
    strict(WorkflowRun, again.body)
    assert world.counted_requests() == 2


# -- GET /rate_limit --------------------------------------------------------------------------


def test_rate_limit_is_free_answers_when_the_quota_is_spent_and_validates():
    clock = FakeClock()
    world = make_world(clock, quota=3)
    for _ in range(4):
        get(world, RUN)
    reply = rate_limit(world)
    assert reply.status == 200
    overview = strict(RateLimitOverview, reply.body)
    core = overview.resources.core
    assert (core.limit, core.used, core.remaining) == (3, 3, 0)
    assert core.reset == int(reply.headers["X-RateLimit-Reset"])
    assert "rate" not in reply.json()  # gone in 2026-03-10
    assert world.ledger[-1].counted is False
    assert rate_limit(world, "2022-11-28").json()["rate"] == reply.json()["resources"]["core"]


def test_rate_limit_costs_a_secondary_point():
    world = make_world(secondary=SecondaryLimits(points_per_minute=1))
    assert rate_limit(world).status == 200
    assert rate_limit(world).status == 403


# -- scenarios --------------------------------------------------------------------------------


def test_a_scenario_sets_the_limits_the_status_and_the_etags():
    scenario = Scenario.from_mapping(
        {
            "rate_limit_status": 429,
            "etags": "every-read",
            "secondary": {"points_per_minute": 50, "concurrent": 5, "retry_after": None},
        }
    )
    world = scenario.build(FakeClock())
    assert world.rate_limit_status == 429
    assert world.etags == "every-read"
    assert world.secondary is not None
    assert world.secondary.limits == SecondaryLimits(
        points_per_minute=50, concurrent=5, retry_after=None
    )
    with pytest.raises(ValueError, match="rate_limit_status"):
        Scenario.from_mapping({"rate_limit_status": 418})
