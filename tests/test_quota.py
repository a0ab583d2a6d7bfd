"""The shared API quota: admission before dispatch, waiting out a spent quota, sparser polls.

Everything runs the real coordinator (and its post step) against the fake GitHub on a fake clock.
"""

from __future__ import annotations

import json
import math
import random
import re

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.action.sequence.admission import (
    CANDIDATE_COST_REQUESTS,
    RESERVE_REQUESTS,
)
from runner_queue_fallback.action.sequence.queue import next_interval
from runner_queue_fallback.core import timing
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings
from runner_queue_fallback.fake_github.reply import LedgerEntry
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, run_coordinator
from tests.invariants import children, dispatch_posts
from tests.test_coordinator import FOREVER, Scenario

ONE_POOL = json.dumps([{"group": "nv-cpu-general", "labels": "linux-amd64-cpu16"}])
#: The fake's quota window starts with the first counted request, at virtual time 0.
RESET = timing.QUOTA_WINDOW_SECONDS


def coordinator_requests(
    s: Scenario, start: float = 0.0, end: float = math.inf
) -> list[LedgerEntry]:
    """Requests the coordinator sent (the guard and the post step use other tokens or come later)."""
    return [e for e in s.world.ledger if e.client == 0 and start <= e.time < end]


def refused(s: Scenario) -> list[LedgerEntry]:
    return [e for e in coordinator_requests(s) if e.status in (403, 429)]


def spend_all_at(s: Scenario, at: float) -> None:
    """At `at`, other workflows use up what is left of the repository's hourly quota."""
    s.world._at(at, lambda: s.world.spend_quota(s.world.quota))


# -- measured cost and the reserve --------------------------------------------------------------


def test_one_candidate_costs_what_the_reserve_is_sized_from():
    """Preflight to proof of a ten-minute candidate: the documented figure, and the reserve 2x it."""
    s = Scenario().pools(FOREVER)
    s.inputs["runners"] = ONE_POOL
    result = s.run(post_step=False)
    assert "all 1 queue(s) exhausted" in result.log
    parent_check = 1  # GET the parent run, before the candidate
    cost = len(coordinator_requests(s)) - parent_check
    assert CANDIDATE_COST_REQUESTS - 3 <= cost <= CANDIDATE_COST_REQUESTS, cost
    assert 2 * cost + 10 <= RESERVE_REQUESTS


def test_a_queued_hour_sends_at_most_sixty_requests_and_cancels_on_the_deadline():
    """Sixty minutes queued: at most 60 requests sent (the spec's polls sent 240); cancel <= 5 s."""
    s = Scenario().pools(FOREVER)
    s.inputs["runners"] = ONE_POOL
    s.inputs["queue-timeout-minutes"] = "60"
    result = s.run()
    queued_at = children(s.world)[0].job_queued_at
    assert queued_at <= timing.STARTUP_FIRST_CHECK_SECONDS
    # The queue clock starts at the first check (15 s); the hour ends on the deadline poll.
    deadline = timing.STARTUP_FIRST_CHECK_SECONDS + 3600.0
    hour = coordinator_requests(s, timing.STARTUP_FIRST_CHECK_SECONDS + 1, deadline)
    assert len(hour) <= 60, len(hour)
    [cancel] = s.cancels()
    assert deadline <= cancel <= deadline + 5
    # Each waiting round is still logged with its number, child, status, elapsed and next interval.
    rounds = [line for line in result.log.splitlines() if line.startswith("Waiting round")]
    assert len(rounds) >= 15
    assert all("since dispatch," in line and "; next check in" in line for line in rounds)


def test_polls_are_sparse_far_from_the_deadline_and_dense_near_it():
    """As documented (README, departure 4): 4 minutes apart far away, a third of what is left
    nearer but at least 1 minute, one landing on the deadline."""
    assert next_interval(3600.0) == 240.0
    assert next_interval(300.0) == 100.0
    assert next_interval(90.0) == 60.0
    assert next_interval(20.0) == 20.0  # lands on the deadline


def test_the_execution_timeout_starts_at_githubs_allocation_time():
    """The runner arrives between two polls: the execution deadline counts from `started_at`."""
    s = Scenario().pools([(0.0, 100.0)])
    s.inputs["runners"] = ONE_POOL
    s.inputs["execution-timeout-minutes"] = "5"
    s.world.add_pool("nv-cpu-general", "never", runners=0)
    result = s.run()
    [kid] = children(s.world)
    assert kid.conclusion == "success"
    assert "Runner allocated to child" in result.log
    assert "ago: fallback is now disabled" in result.log


# -- admission ----------------------------------------------------------------------------------


def test_admission_waits_for_the_reset_then_dispatches():
    """Too little quota for one candidate: a warning, a wait past the reset, then the dispatch."""
    s = Scenario().pools([], FOREVER, FOREVER)
    s.world.spend_quota(s.world.quota - 10)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert "::warning title=Waiting for API quota::" in result.log
    [dispatched] = dispatch_posts(s.world)
    assert RESET <= dispatched <= RESET + timing.ADMISSION_SPREAD_SECONDS + 5
    assert refused(s) == []


def test_the_admission_spread_comes_from_the_injected_random_source():
    """Two coordinators (two parent runs) wake at different times after the same reset.

    A simulated run seeds the spread with its run's identity; the same run wakes at the same time.
    """
    woke = []
    for parent in (PARENT_RUN_ID, PARENT_RUN_ID + 1, PARENT_RUN_ID):
        s = Scenario().pools([], FOREVER, FOREVER)
        if parent != PARENT_RUN_ID:
            s.world.add_parent_run(parent)
        s.world.spend_quota(s.world.quota - 10)
        run_coordinator(
            s.world, s.clock, s.inputs, post_step=False, parent_run_id=parent, main=cli.main
        )
        woke.append(dispatch_posts(s.world)[0])
    assert woke[0] != woke[1]
    assert woke[0] == woke[2]


def test_the_admission_timeout_fails_with_no_dispatch():
    """The reset is 60 minutes away and admission-timeout-minutes is 30: fail now, no child."""
    s = Scenario().pools([], FOREVER, FOREVER)
    s.inputs["admission-timeout-minutes"] = "30"
    s.world.spend_quota(s.world.quota - 10)
    result = s.run()
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    assert "API quota too low to dispatch candidate 1" in result.log
    assert "admission-timeout-minutes (30)" in result.log
    assert s.clock.monotonic() < 60, "no point waiting for a reset beyond the budget"


def test_admission_timeout_zero_fails_at_once():
    s = Scenario().pools([], FOREVER, FOREVER)
    s.inputs["admission-timeout-minutes"] = "0"
    s.world.spend_quota(s.world.quota - 10)
    result = s.run()
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    assert "admission-timeout-minutes (0)" in result.log


def test_a_bad_admission_timeout_is_an_input_error_with_no_request():
    s = Scenario().pools([], [], [])
    s.inputs["admission-timeout-minutes"] = "-5"
    result = run_coordinator(s.world, s.clock, s.inputs, post_step=False, main=cli.main)
    assert result.exit_code == 2
    assert "input 'admission-timeout-minutes'" in result.log
    assert "allowed: 0 (do not wait) to 360" in result.log
    assert s.world.ledger == []


def test_admission_reads_rate_limit_only_when_no_reply_said():
    """The parent check's reply says how much is left: no GET /rate_limit on a normal run."""
    s = Scenario().pools([], [], [])
    s.run()
    assert not any(e.path == "/rate_limit" for e in s.world.ledger)


# -- a spent quota once a child exists ------------------------------------------------------------


def test_quota_spent_while_queued_with_the_reset_after_the_deadline():
    """Spent at 200 s, reset at 3600 s, deadline at 615 s: wait, fresh read, cancel, fall back."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    spend_all_at(s, 200.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert len(refused(s)) <= 1, "nothing more is sent that can only be refused"
    assert "nothing is sent until" in result.log or "waiting for its reset" in result.log
    [cancel] = s.cancels()
    assert RESET <= cancel <= RESET + 5
    first, second = children(s.world)
    assert first.conclusion == "cancelled"
    assert first.completed_at <= dispatch_posts(s.world)[1]
    assert second.conclusion == "success"
    assert not result.log.count("queue/start race")


def test_a_runner_seen_at_the_read_after_the_reset_is_an_allocation_not_a_race():
    """The runner came while the coordinator waited for the reset: no cancel, no fallback."""
    s = Scenario().pools([(0.0, 1000.0)], [], [])
    spend_all_at(s, 200.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert s.cancels() == []
    assert len(dispatch_posts(s.world)) == 1
    assert "race" not in result.log


def test_quota_spent_while_queued_with_the_reset_before_the_deadline():
    """A 60-minute queue outlives the reset: polling goes on after it and cancels on the deadline."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    s.inputs["queue-timeout-minutes"] = "60"
    spend_all_at(s, 200.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert len(refused(s)) <= 1
    deadline = timing.STARTUP_FIRST_CHECK_SECONDS + 3600.0
    assert deadline > RESET
    cancel = s.cancels()[0]
    assert deadline <= cancel <= deadline + 5


def test_quota_spent_during_the_cancellation_proof_stops_and_cleans_up_after_the_reset():
    """The proof's window still decides: no other pool; the cleanup waits for the reset."""
    s = Scenario(timings=Timings(cancel_delay=20.0)).pools(FOREVER, [], [])
    spend_all_at(s, 617.0)
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    assert "was not confirmed within 2 minutes" in result.log
    [kid] = children(s.world)
    assert kid.conclusion == "cancelled"
    assert f"cleanup confirmed: child run {kid.run_id}" in result.log
    assert len(refused(s)) <= 1


def long_retry_after(path: str = "/git/ref/", method: str = "GET", count: int = 1) -> Fault:
    """A secondary limit asking two minutes, before any dispatch (the source ref's read)."""
    return Fault(
        kind="secondary_rate_limit",
        method=method,
        path=path,
        start=0.0,
        end=10.0,
        count=count,
        retry_after=120,
    )


def _dispatch_refused(count: int | None = 1, retry_after: int = 60) -> Fault:
    """GitHub's secondary limit refuses the dispatch POST `count` times (None: every time)."""
    return Fault(
        kind="secondary_rate_limit",
        method="POST",
        path=r"/dispatches$",
        count=count,
        retry_after=retry_after,
    )


def test_a_long_retry_after_before_dispatch_is_an_admission_wait():
    """A departure: no child exists, so the two minutes asked are waited (plus a random spread)
    within admission-timeout-minutes, never a minute early; then every check and the dispatch."""
    s = Scenario(faults=[long_retry_after()]).pools([], [], [])
    result = s.run()
    assert result.exit_code == 0, result.log
    assert "retry after 120s" in result.log
    [wait] = s.clock.sleeps[:1]
    assert 120 <= wait <= 120 + timing.SECONDARY_SPREAD_SECONDS
    assert "::warning title=Waiting for GitHub's secondary rate limit::" in result.log
    [dispatched] = dispatch_posts(s.world)
    assert dispatched >= wait
    reads = [e for e in coordinator_requests(s) if "/git/ref/" in e.path]
    assert [e.status for e in reads[:2]] == [403, 200], "the source is read again after the wait"
    assert reads[1].time >= wait


def test_a_long_retry_after_before_dispatch_fails_with_no_child_at_admission_timeout_zero():
    """The spec's rule with `admission-timeout-minutes: 0`: not retried, no child, input named."""
    s = Scenario(faults=[long_retry_after()]).pools([], [], [])
    result = s.run({"admission-timeout-minutes": "0"})
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    assert "retry after 120s" in result.log
    assert s.clock.sleeps == [], "not retried a minute early"
    assert "beyond what is left of admission-timeout-minutes (0); no child was dispatched" in (
        result.log
    )


def test_a_dispatch_refused_by_the_secondary_limit_goes_again_after_the_wait():
    """A departure: the refusal created nothing, so after admission's wait every check before
    the dispatch runs again and the dispatch goes once more, with the same request id."""
    refused_once = _dispatch_refused()
    s = Scenario(faults=[refused_once]).pools([])
    result = s.run()
    assert result.exit_code == 0, result.log
    first, second = dispatch_posts(s.world)
    assert 60 <= second - first <= 60 + timing.SECONDARY_SPREAD_SECONDS + 5
    sent = [e for e in coordinator_requests(s) if e.path.endswith("/dispatches")]
    assert [e.status for e in sent] == [403, 200]
    between = [e.path for e in coordinator_requests(s, first + 1, second + 0.001)]
    assert any("/git/ref/" in path for path in between), "the source is checked again"
    [kid] = children(s.world)
    assert result.outputs["attempts"] == "1"
    assert result.outputs["run-id"] == str(kid.run_id)
    assert f"Dispatch of child {kid.request_id} refused by a rate limit" in result.log
    assert "::warning title=Waiting for GitHub's secondary rate limit::" in result.log
    assert "run-name" not in result.post_log, "the post step has no lost dispatch to look for"


def test_a_dispatch_sent_again_whose_reply_is_lost_is_found_by_its_run_name_and_cancelled():
    """The refusal is over once the dispatch goes again: a lost reply to that one is recovered
    as any lost reply is (the run found by its run-name, cancelled, no other pool)."""
    s = Scenario(
        faults=[
            _dispatch_refused(),
            Fault(kind="lost_reply", method="POST", path=r"/dispatches$", count=1),
        ]
    ).pools(FOREVER, [])
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 2
    [kid] = children(s.world)
    assert kid.conclusion == "cancelled"
    assert "the dispatch reply was lost" in result.log
    assert f"run {kid.run_id} with run-name {kid.request_id} was found" in result.log


def test_a_dispatch_refused_by_the_secondary_limit_at_admission_timeout_zero_stops():
    """With no admission budget the refusal is final (the spec's rule): one POST, no child."""
    refused_once = _dispatch_refused()
    s = Scenario(faults=[refused_once]).pools([])
    result = s.run({"admission-timeout-minutes": "0"})
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    assert children(s.world) == []
    assert "admission-timeout-minutes (0); no child was dispatched" in result.log


def test_a_secondary_wait_that_fills_what_is_left_of_the_budget_is_taken_without_spread():
    """One minute of admission budget and GitHub asks a minute: the wait is taken, and its random
    spread is cut to what is left (none), then the dispatch goes."""
    refused_once = _dispatch_refused()
    s = Scenario(faults=[refused_once]).pools([])
    result = s.run({"admission-timeout-minutes": "1"})
    assert result.exit_code == 0, result.log
    assert 60.0 in s.clock.sleeps
    assert all(wait <= 60.0 for wait in s.clock.sleeps)
    assert len(dispatch_posts(s.world)) == 2


@pytest.mark.parametrize(
    ("latency", "ended_by"),
    [(0.0, "retry 2 of 2 in 60s"), (0.25, "did not show as active within 2 minutes")],
)
def test_the_parent_check_refused_past_its_grace_is_checked_again_after_the_wait(
    latency: float, ended_by: str
):
    """The secondary limit refuses the parent's read through its 2-minute grace (its retries end
    it, or with replies that take time the grace itself): that grace was never the parent's, so
    admission waits and the check starts again, with a new grace."""
    parent_refused = Fault(
        kind="secondary_rate_limit",
        method="GET",
        path=rf"/actions/runs/{PARENT_RUN_ID}$",
        end=150.0,
        retry_after=60,
    )
    s = Scenario(faults=[parent_refused], timings=Timings(latency=latency)).pools([])
    result = s.run()
    assert result.exit_code == 0, result.log
    assert ended_by in result.log
    assert "::warning title=Waiting for GitHub's secondary rate limit::" in result.log
    reads = [e for e in coordinator_requests(s) if e.path.endswith(f"/runs/{PARENT_RUN_ID}")]
    assert reads[-1].status == 200
    assert reads[-1].time >= 150.0
    assert len(dispatch_posts(s.world)) == 1


def test_secondary_limits_before_the_dispatch_share_the_admission_budget():
    """Refused again and again: the waits add up against admission-timeout-minutes, then stop."""
    always = _dispatch_refused(count=None)
    s = Scenario(faults=[always]).pools([])
    result = s.run({"admission-timeout-minutes": "10"})
    assert result.exit_code == 1
    assert children(s.world) == []
    waits = [w for w in s.clock.sleeps if w >= 60]
    assert sum(waits) <= 10 * 60
    assert len(dispatch_posts(s.world)) == len(waits) + 1
    assert "admission-timeout-minutes (10); no child was dispatched" in result.log


def test_a_long_retry_after_once_a_child_exists_is_waited_out():
    """A departure: with a child queued, the full retry-after is waited, and the watch goes on."""
    long_wait = Fault(
        kind="secondary_rate_limit",
        method="GET",
        path=r"/actions/runs/\d+$",
        start=200.0,
        end=230.0,
        count=1,
        retry_after=120,
    )
    s = Scenario(faults=[long_wait]).pools(FOREVER, [], [])
    result = s.run()
    assert result.exit_code == 0, result.log
    assert 120.0 in s.clock.sleeps
    assert "a child exists, so the wait is taken in full" in result.log


# -- no child yet: a spent quota is an admission wait, and the post step has nothing to read --------


def test_a_quota_spent_before_any_dispatch_is_waited_out_not_a_failure():
    """Other workflows spent the whole quota: the parent check is refused, no child exists yet.

    Before: the spec's rule (two retries of at most a minute) ended the sequence at once, a
    "clean" failure that a fleet past its quota turned into a lost job. Now the refusal is one
    more admission wait: the dispatch comes after the reset, and the child succeeds.
    """
    s = Scenario().pools([])
    s.world.spend_quota(s.world.quota)
    result = s.run()
    assert result.exit_code == 0, result.log
    assert refused(s), "the parent check met the spent quota"
    [dispatched] = dispatch_posts(s.world)
    assert RESET <= dispatched <= RESET + timing.ADMISSION_SPREAD_SECONDS + 5
    assert "::warning title=Waiting for API quota::" in result.log


def test_a_quota_spent_before_any_dispatch_still_ends_at_the_admission_timeout():
    """The same, with admission-timeout-minutes 0: no wait, no child, and the input is named."""
    s = Scenario().pools([])
    s.inputs["admission-timeout-minutes"] = "0"
    s.world.spend_quota(s.world.quota)
    result = s.run()
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    assert "admission-timeout-minutes (0)" in result.log


@pytest.mark.found_by("mutation", issue=35)
def test_a_quota_known_spent_at_the_queue_deadline_is_waited_out_before_the_fresh_read():
    """The last poll's reply says 0 left: the fresh read and the cancel wait for the reset.

    Sending them inside the window would only be refused: the cancellation window would close
    with nothing proven. After the reset the child gets a whole window and the run falls back.
    The deadline's line says the wait; the fresh read is announced after it (at the reset) and
    is not paused again: the wait is said once (the mutation runner's test of this, on the same
    world, merged here).
    """
    s = Scenario().pools(FOREVER, [], FOREVER)
    s.world.etags = "every-read"  # every poll counts: the poll at the deadline spends the last two
    s.world._at(600.0, lambda: s.world.spend_quota(s.world.quota - s.world._quota_used() - 2))
    result = s.run()
    assert result.exit_code == 0, result.log
    deadline = timing.STARTUP_FIRST_CHECK_SECONDS + 600.0
    assert "the fresh read and the cancel wait" in result.log
    assert refused(s) == [], "nothing was sent that could only be refused"
    assert [e.time for e in coordinator_requests(s, deadline + 1, RESET)] == []
    [cancel] = s.cancels()
    assert RESET <= cancel <= RESET + 5
    first, second = children(s.world)
    assert (first.conclusion, second.conclusion) == ("cancelled", "success")
    [waited] = re.findall(r"; (-?\d+)s waited for a spent quota", result.log)
    assert RESET - deadline - 5 <= int(waited) <= RESET - deadline + 5
    [(said_at, said)] = [
        (t, line) for t, line in result.log_lines if line.startswith("Queue deadline reached")
    ]
    assert said_at == deadline
    assert "the fresh read and the cancel wait 2986s" in said
    [read_at] = [t for t, line in result.log_lines if "fresh read before cancelling" in line]
    assert read_at == RESET + 1.0, "the fresh read comes after the wait, at the reset"
    assert "pauses for" not in result.log, "the wait is said once, by the deadline's line"


def test_admission_timeout_minutes_are_minutes_a_reset_beyond_them_fails_at_once():
    """58 minutes (3,480 s) of admission budget, a reset 3,500 s away: no wait, no child."""
    s = Scenario().pools([], FOREVER, FOREVER)
    s.inputs["admission-timeout-minutes"] = "58"
    s.world.spend_quota(s.world.quota - 10)  # the quota window starts now
    s.clock.sleep(100.0)  # the coordinator starts 100 s later
    result = s.run()
    assert result.exit_code == 1
    assert dispatch_posts(s.world) == []
    assert "admission-timeout-minutes (58)" in result.log
    s = Scenario().pools([], FOREVER, FOREVER)
    s.inputs["admission-timeout-minutes"] = "59"  # 3,540 s: the reset is within it
    s.world.spend_quota(s.world.quota - 10)
    s.clock.sleep(100.0)
    assert s.run().exit_code == 0


def test_exactly_the_reserve_left_is_enough_to_dispatch():
    """No dispatch *below* the reserve: with the reserve itself left, no wait."""
    s = Scenario().pools([], FOREVER, FOREVER)
    s.world.spend_quota(s.world.quota - RESERVE_REQUESTS - 1)  # the parent check spends one
    result = s.run()
    assert result.exit_code == 0, result.log
    assert "Waiting for API quota" not in result.log
    assert dispatch_posts(s.world)[0] < 1.0
    s = Scenario().pools([], FOREVER, FOREVER)
    s.world.spend_quota(s.world.quota - RESERVE_REQUESTS)  # one less after the parent check
    assert "Waiting for API quota" in s.run().log


def test_the_admission_waits_of_all_candidates_share_one_budget():
    """Candidate 1 waited an hour for the reset; when candidate 2 finds the quota low again,
    what is left of admission-timeout-minutes (60) does not cover another reset: no child."""
    s = Scenario().pools(FOREVER, [], [])
    s.world.spend_quota(s.world.quota - 10)
    spend_at = RESET + timing.ADMISSION_SPREAD_SECONDS + 60  # while candidate 1 is queued
    s.world._at(spend_at, lambda: s.world.spend_quota(s.world.quota - s.world._quota_used() - 40))
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    assert "API quota too low to dispatch candidate 2" in result.log


class _LowestSpread(random.Random):
    """A random source whose every draw is the lowest value allowed."""

    def uniform(self, a: float, b: float) -> float:
        del b
        return a


class _HighestSpread(random.Random):
    """A random source whose every draw is the highest value allowed."""

    def uniform(self, a: float, b: float) -> float:
        del a
        return b


def test_the_admission_spread_starts_at_zero_minutes(monkeypatch):
    """Documented: the reset plus 0 to 5 minutes. The lowest draw wakes at the reset itself."""
    monkeypatch.setattr(cli, "_spread_source", lambda *_args, **_kwargs: _LowestSpread())
    s = Scenario().pools([], FOREVER, FOREVER)
    s.world.spend_quota(s.world.quota - 10)
    result = s.run()
    assert result.exit_code == 0, result.log
    [dispatched] = dispatch_posts(s.world)
    assert dispatched == RESET + 1.0  # the reset's whole second, +1 s for the clocks


def test_the_secondary_spread_starts_at_zero_and_ends_at_two_minutes(monkeypatch):
    """Documented: GitHub's wait plus 0 to 2 minutes; the lowest draw waits GitHub's wait alone,
    the highest two minutes more."""
    refused_once = _dispatch_refused()
    for source, spread in ((_LowestSpread, 0.0), (_HighestSpread, 120.0)):
        monkeypatch.setattr(cli, "_spread_source", lambda *_args, _s=source, **_kwargs: _s())
        s = Scenario(faults=[refused_once]).pools([])
        result = s.run()
        assert result.exit_code == 0, result.log
        assert 60.0 + spread in s.clock.sleeps


def test_a_retry_after_of_zero_is_no_wait_before_the_spread(monkeypatch):
    """GitHub may ask for no wait at all: with the lowest draw the coordinator waits nothing."""
    monkeypatch.setattr(cli, "_spread_source", lambda *_args, **_kwargs: _LowestSpread())
    refused = _dispatch_refused(retry_after=0)
    s = Scenario(faults=[refused]).pools([])
    result = s.run()
    assert result.exit_code == 0, result.log
    first, second = dispatch_posts(s.world)
    assert second == first  # the checks again and the dispatch, with no time between
