"""Rules an independent mutation run found held by no test (issue 35, item 3), on the fake GitHub.

Each test states one rule and fails when it breaks: the signal's cleanup uses its whole grace
and no more, a signal once the child is known cancels it without a run-name search, the
allocation time is never earlier than the last read that showed the job queued, and a job
without a link of its own is linked by its run's. Every test drives the real coordinator
through `cli.main` (see `tests.test_coordinator`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runner_queue_fallback import timing
from runner_queue_fallback.sim.faults import Fault
from runner_queue_fallback.sim.model import Timings, Workload
from runner_queue_fallback.sim.reply import Reply
from runner_queue_fallback.sim.world import FakeGitHub
from runner_queue_fallback.summary import RUN_LINK_ONLY, WORKER_LINK
from tests.invariants import children
from tests.outside import JOBS_PATH, Rule, Tamper, child_run_id, json_body, with_json
from tests.test_coordinator import FOREVER, Scenario, attempts
from tests.test_rules import posts, run_reads, searches

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
    assert f"queue wait :{queued:.0f}, {last_queued_read:.0f}" in result.summary
    assert f"execution :{last_queued_read:.0f}, " in result.summary


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
