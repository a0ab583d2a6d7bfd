"""Rules an independent mutation run found held by no test (issue 35, item 3), on the fake GitHub.

Each test states one rule and fails when it breaks: the signal's cleanup uses its whole grace
and no more, a signal once the child is known cancels it without a run-name search, the
allocation time is never earlier than the last read that showed the job queued, a job without
a link of its own is linked by its run's; a past `Retry-After` or reset is no wait, one of a
second or less is waited, a negative or endless one is absent; on an older server the copies
of the run-name are named (all of them, once), the searches are counted, and the run found is
checked at once. The coordinator's tests drive it through `cli.main` (see
`tests.test_coordinator`); the header rules call the retry helpers the client reads them with.
"""

from __future__ import annotations

import email.utils
import math
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.action.summary import RUN_LINK_ONLY, WORKER_LINK
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import EPOCH, FakeClock
from runner_queue_fallback.fake_github import DispatchRefused
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import FakeRun, Timings, Workload
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.github.retry import (
    RateLimit,
    RateLimitKind,
    believable_reset,
    classify_rate_limit,
    rate_limit_wait,
    reset_seconds,
    retry_after_seconds,
)
from runner_queue_fallback.tools.simulate.steps import SimulationRun, run_coordinator
from tests.invariants import children
from tests.outside import JOBS_PATH, Rule, Tamper, child_run_id, json_body, with_json
from tests.test_coordinator import FOREVER, Scenario, attempts
from tests.test_older_server import inputs as older_inputs
from tests.test_older_server import older_world
from tests.test_rules import posts, run_reads, searches
from tests.test_timeline import bar

#: The queued poll that the signal interrupts (the first candidate's queue, 10 minutes).
SIGNAL_AT = 215.0
#: A child run's path (the parent's id is shorter), for faults on the child's reads only.
CHILD_RUN = r"/actions/runs/9\d{9}$"


def _requests_after(s: Scenario, at: float) -> list[float]:
    """When the coordinator sent each request from `at` on (client 0: the main step's token)."""
    return [e.time for e in s.world.ledger if e.client == 0 and e.time >= at]


def _jobs_rule(change: Callable[[dict[str, Any]], dict[str, Any]]) -> Rule:
    """A rule rewriting every job of the child's job listings with `change(job) -> job`."""

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method != "GET" or not JOBS_PATH.search(path) or child_run_id(path, world) is None:
            return None
        if not isinstance(body, dict):
            return None
        return with_json(reply, {**body, "jobs": [change(job) for job in body.get("jobs", [])]})

    return rule


# -- the signal's cleanup: its whole remaining grace, and nothing past it ----------------------


def test_a_signals_cleanup_polls_for_all_of_its_remaining_grace():
    """SIGTERM at 215 s; the cancel takes 4 s: the poll 5 s later, the last one the 6 s budget
    holds, confirms the child in the main step (the post step is not needed)."""
    s = Scenario(timings=Timings(cancel_delay=4.0)).pools(FOREVER, [], [])
    result = s.run(interrupt_at=SIGNAL_AT, post_step=False)
    [kid] = children(s.world)
    assert result.exit_code == 1
    [(_, cancel)] = posts(s, "/cancel")
    assert cancel == SIGNAL_AT
    reads = [t for _, t in run_reads(s, kid.run_id) if t >= SIGNAL_AT]
    assert reads == [SIGNAL_AT, SIGNAL_AT + timing.CANCEL_POLL_SECONDS]
    assert f"cleanup confirmed: child run {kid.run_id}" in result.log


def test_a_quota_reset_waited_for_in_a_signals_cleanup_does_not_extend_its_grace():
    """The child's read at the signal is refused for a spent quota that resets a second later:
    the cleanup waits for the reset and reads again, and sends nothing past its 6 s budget (a
    cleanup after an error may extend its window by the reset it waited for; a signal's may not).
    """
    spent = Fault(
        "primary_rate_limit", method="GET", path=CHILD_RUN, start=SIGNAL_AT, count=1, retry_after=1
    )
    s = Scenario(timings=Timings(cancel_delay=3.0), faults=[spent]).pools(FOREVER, [], [])
    result = s.run(interrupt_at=SIGNAL_AT, post_step=False)
    [kid] = children(s.world)
    assert result.exit_code == 1
    refused = [e.time for e in s.world.ledger if e.fault == "primary_rate_limit"]
    assert refused == [SIGNAL_AT]
    reads = [t for _, t in run_reads(s, kid.run_id) if t > SIGNAL_AT]
    assert reads, "read again after the reset"
    assert max(_requests_after(s, SIGNAL_AT)) <= SIGNAL_AT + timing.SIGNAL_CLEANUP_BUDGET_SECONDS


# -- a signal once the child is known -----------------------------------------------------------


def test_once_the_childs_run_is_known_a_later_signal_does_not_search_for_it_by_run_name():
    """The dispatch reply named the run: a SIGTERM 400 s later (past the run-name search's 300 s
    look-back) cancels that run at once, lists no runs and warns of no missing child."""
    s = Scenario(timings=Timings(cancel_delay=3.0)).pools(FOREVER, [], [])
    result = s.run(interrupt_at=400.0, post_step=False)
    [kid] = children(s.world)
    assert result.exit_code == 1
    assert "SIGTERM" in result.log
    assert searches(s) == []
    [(_, cancel)] = posts(s, "/cancel")
    [signalled, *_] = _requests_after(s, 400.0)
    assert cancel == signalled, "the cancel is the first request after the signal"
    assert "Child run not found" not in result.log
    assert f"cleanup confirmed: child run {kid.run_id}" in result.log


# -- the allocation time ----------------------------------------------------------------------


def test_the_allocation_time_from_started_at_is_never_earlier_than_the_last_queued_read():
    """GitHub's `started_at` of the allocated job still shows its creation (as a queued job's
    does): the runner came after the read at 215 s that showed the job queued, so the queue wait
    runs to 215 s and the execution starts there, not at the dispatch."""

    def created_as_started(job):
        return {**job, "started_at": job["created_at"]}

    s = Scenario(workload=Workload(duration=300.0)).pools([(0.0, 250.0)], [], [])
    Tamper(s.world, [_jobs_rule(created_as_started)]).install()
    result = s.run()
    assert result.exit_code == 0, result.log
    queued = timing.STARTUP_FIRST_CHECK_SECONDS
    last_queued_read = 215.0
    [entry] = attempts(result)
    assert entry["queued-seconds"] == last_queued_read - queued
    assert bar(result.summary, 1, "queue wait") == (round(queued), last_queued_read)
    assert bar(result.summary, 1, "execution")[0] == last_queued_read


# -- the worker's link ------------------------------------------------------------------------


def test_a_job_without_a_link_of_its_own_is_linked_by_its_runs_url_and_job_id():
    """GitHub's job schema allows a null `html_url`: the worker link is then built from the
    run's URL and the job id, still a job link (not the run-only fallback)."""

    def no_link(job):
        return {**job, "html_url": None}

    s = Scenario(workload=Workload(duration=120.0)).pools([], [], [])
    Tamper(s.world, [_jobs_rule(no_link)]).install()
    result = s.run()
    assert result.exit_code == 0, result.log
    [kid] = children(s.world)
    job = s.world.runs[kid.run_id].job
    assert job is not None
    [entry] = attempts(result)
    job_link = f"{entry['run-url']}/job/{job.id}"
    assert f"{WORKER_LINK}: {job_link}" in result.log
    assert job_link in result.summary
    assert RUN_LINK_ONLY not in result.summary


# -- rate-limit headers: a past time, a short wait, an odd number --------------------------------

#: The Clock's wall time for the header tests (any aware time would do).
NOW = EPOCH
SPENT = "API rate limit exceeded for installation."


def _http_date(seconds_from_now: float) -> str:
    """An HTTP date (`Retry-After`'s other form) `seconds_from_now` from `NOW`."""
    return email.utils.format_datetime(NOW + timedelta(seconds=seconds_from_now), usegmt=True)


def _spent_quota(reset: str) -> dict[str, str]:
    """A spent primary quota's headers, resetting at `reset` (epoch seconds, as sent)."""
    return {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}


def test_a_retry_after_date_already_past_is_a_wait_of_0_s_never_a_negative_one():
    """GitHub's clock and ours differ: a `Retry-After` date 30 s ago asks for no wait."""
    limit = classify_rate_limit(429, {"retry-after": _http_date(-30)}, "slow down", NOW)
    assert limit == RateLimit(RateLimitKind.SECONDARY, 0.0, "retry-after")


def test_a_quota_reset_already_past_is_a_wait_of_0_s_never_a_negative_one():
    """A spent quota whose reset was 30 s ago (29 s ago with its 1 s margin) asks for no wait."""
    past = str(int(NOW.timestamp()) - 30)
    limit = classify_rate_limit(403, _spent_quota(past), SPENT, NOW)
    assert limit == RateLimit(RateLimitKind.PRIMARY, 0.0, "reset")


@pytest.mark.parametrize(("value", "wait"), [("1", 1.0), ("0.5", 0.5), ("0", 0.0)])
def test_a_retry_after_of_at_most_one_second_is_waited_not_dropped(value: str, wait: float):
    """`Retry-After: 1` is a wait of 1 s (not 0, not the 60 s back-off of an absent header)."""
    limit = classify_rate_limit(429, {"retry-after": value}, "slow down", NOW)
    assert limit == RateLimit(RateLimitKind.SECONDARY, wait, "retry-after")


ODD_NUMBERS = ["-30", "-0.5", "inf", "-inf", "1e999", "nan"]


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


@pytest.mark.parametrize("value", ODD_NUMBERS)
def test_a_negative_or_infinite_reset_is_read_as_absent(value: str):
    """A spent quota with such a reset is waited out as a limit without a time (a minute)."""
    assert reset_seconds(value, NOW) is None
    limit = classify_rate_limit(403, _spent_quota(value), SPENT, NOW)
    assert limit == RateLimit(
        RateLimitKind.PRIMARY, timing.SECONDARY_BACKOFF_FIRST_SECONDS, "backoff"
    )


@pytest.mark.parametrize("epoch", [-1.0, -0.5, math.inf, -math.inf, math.nan])
def test_a_negative_or_endless_reset_is_not_believed_and_a_past_one_is(epoch: float):
    """`believable_reset` (every reset the client reads, `GET /rate_limit` too): a negative or
    endless number is absent; a reset 30 s ago is kept (it asks for no wait)."""
    assert believable_reset(epoch, NOW) is None
    past = NOW.timestamp() - 30
    assert believable_reset(past, NOW) == past


# -- the older server: the run found by its run-name ------------------------------------------


class SleepLog(FakeClock):
    """A FakeClock that keeps when each sleep began: (monotonic time, seconds)."""

    def __init__(self) -> None:
        """No sleep yet."""
        super().__init__()
        self.timed: list[tuple[float, float]] = []

    def sleep(self, seconds: float) -> None:
        """Note the sleep, then take it."""
        self.timed.append((self.monotonic(), seconds))
        super().sleep(seconds)


def _older(
    *, listing_delay: float = 0.0, copies: tuple[float, ...] = ()
) -> tuple[FakeGitHub, SimulationRun, SleepLog]:
    """The coordinator's main step on an older server (dispatch answers 204), CPU16 free.

    `copies`: someone else dispatches the same inputs (the same run-name) that many seconds
    after each dispatch.
    """
    clock = SleepLog()
    world, sha = older_world(clock, listing_delay=listing_delay, cpu16_busy=False)
    world.on_worker_start = None
    real = world.dispatch

    def dispatch(file: str, ref: str, inputs: Mapping[str, object]) -> FakeRun | DispatchRefused:
        run = real(file, ref, inputs)
        if not isinstance(run, DispatchRefused):
            for after in copies:
                world.dispatch_at(world.now() + after, file, ref, inputs)
        return run

    world.dispatch = dispatch  # type: ignore[method-assign]  # the fake calls it per request
    result = run_coordinator(world, clock, older_inputs(sha), main=cli.main, post_step=False)
    return world, result, clock


def _named(world: FakeGitHub) -> list[FakeRun]:
    """The runs bearing the child's run-name, the one created first first."""
    kids = [run for run in world.runs.values() if run.display_title.startswith("rqf-9")]
    return sorted(kids, key=lambda run: (run.created_at, run.id))


#: The run-name search's path: the workflow's runs.
LISTING = re.compile(r"/actions/workflows/[^/]+/runs(\?|$)")


def _search_times(world: FakeGitHub) -> list[float]:
    """When the main step searched for its run by run-name (one time per search)."""
    listings = [e.time for e in world.ledger if e.client == 0 and LISTING.search(e.path)]
    return sorted(set(listings))


def _not_unique_warnings(result: SimulationRun) -> list[tuple[float, str]]:
    """The "Run-name not unique" warnings, with when each was printed."""
    return [(t, line) for t, line in result.log_lines if "title=Run-name not unique" in line]


def _logged_at(result: SimulationRun, text: str) -> float:
    """When the first log line holding `text` was printed."""
    return next(t for t, line in result.log_lines if text in line)


def test_on_an_older_server_a_unique_run_name_match_warns_nothing():
    """One run bears the request id: it is followed, and no copy is warned of."""
    world, result, _ = _older()
    [child] = _named(world)
    assert result.exit_code == 0, result.log
    assert f"Found run {child.id} named" in result.log
    assert "Run-name not unique" not in result.log
    assert "someone else" not in result.log


def test_on_an_older_server_a_copy_of_the_run_name_gets_the_not_unique_warning_when_found():
    """A copy dispatched 3 s later is listed with the child at the first search: one warning,
    printed with the child's finding, names it (and the listing one poll later does not again)."""
    world, result, _ = _older(copies=(3.0,))
    child, copy = _named(world)
    assert result.exit_code == 0, result.log
    assert result.outputs["run-id"] == str(child.id)
    [(warned_at, warning)] = _not_unique_warnings(result)
    assert warning == (
        f"::warning title=Run-name not unique::2 runs are named {child.display_title}: run "
        f"{child.id}, created first, is the dispatched child; run(s) {copy.id} were dispatched "
        "by someone else with the same run-name: check them"
    )
    assert warned_at == _logged_at(result, f"Found run {child.id} named")


def test_the_not_unique_warning_names_every_other_run_and_not_the_child():
    """Two copies (3 s and 6 s later): the one warning names both, the child only as the child."""
    world, result, _ = _older(copies=(3.0, 6.0))
    child, first_copy, second_copy = _named(world)
    assert result.exit_code == 0, result.log
    [(_, warning)] = _not_unique_warnings(result)
    assert f"3 runs are named {child.display_title}: run {child.id}, created first" in warning
    assert f"; run(s) {first_copy.id}, {second_copy.id} were dispatched by someone" in warning


def test_the_found_line_counts_the_searches_made():
    """Listed 90 s late: found at the 17th search (15 s, then every 5 s)."""
    world, result, _ = _older(listing_delay=90.0)
    [child] = _named(world)
    assert result.exit_code == 0, result.log
    found_at = _logged_at(result, f"Found run {child.id} named")
    made = [t for t in _search_times(world) if t <= found_at]
    assert len(made) == 17
    assert f"Found run {child.id} named {child.display_title} after 17 search(es)" in result.log


def test_the_lost_run_error_counts_the_searches_made():
    """Never listed within the window: the error gives the number of searches made (22: at
    15 s, then every 5 s up to 120 s)."""
    world, result, _ = _older(listing_delay=150.0)
    assert result.exit_code == 1
    made = _search_times(world)
    assert len(made) == 22
    error = next(line for line in result.log.splitlines() if line.startswith("::error"))
    assert "appeared within 2 minutes (22 searches)" in error


def test_a_run_found_by_run_name_is_checked_at_once_without_waiting_the_first_15_s_again():
    """The search already waited the startup window's first 15 s: the run found at 95 s is
    read at 95 s, and no second first-check wait starts then."""
    world, result, clock = _older(listing_delay=90.0)
    [child] = _named(world)
    assert result.exit_code == 0, result.log
    found_at = _logged_at(result, f"Found run {child.id} named")
    assert found_at == 95.0
    reads = [e.time for e in world.ledger if e.path.endswith(f"/actions/runs/{child.id}")]
    assert reads[0] == found_at
    first_check = timing.STARTUP_FIRST_CHECK_SECONDS
    assert [at for at, seconds in clock.timed if seconds == first_check] == [0.0]
