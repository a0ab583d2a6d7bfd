"""Execution (`action/sequence/execution.py`): from the runner's allocation to the verdict.

The execution timeout is counted from the first allocation GitHub shows, never earlier than the
last read that showed the job queued, and a re-queue does not restart it; each round says how
long is left of it; a job listing that once shows no job changes nothing; a completed report that
lags (the run's conclusion, the job's completion) is waited for in one settling window before
the verdict; under `pinned-after-start` the parent's cancellation still stops the worker. Every
test drives `cli.main` against the fake GitHub (`tests.scenario`; the re-queue: the catalogue's
scenario), a fuzzer's find replayed as its own `Case`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from runner_queue_fallback.core import timing
from runner_queue_fallback.fake_github.model import Timings, Workload
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID
from tests.invariants import children, dispatch_posts
from tests.outside import JOBS_PATH, Rule, Tamper, child_run_id, json_body, with_json
from tests.scenario import CATALOGUE, Scenario, attempts, minute_queues, simulated
from tests.test_fuzz_coordinator import Case, PoolPlan, base_inputs, execute
from tests.test_timeline import bar


def jobs_rule(change: Callable[[dict[str, Any]], dict[str, Any]]) -> Rule:
    """A rule rewriting every job of the child's job listings with `change(job) -> job`."""

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method != "GET" or not JOBS_PATH.search(path) or child_run_id(path, world) is None:
            return None
        if not isinstance(body, dict):
            return None
        return with_json(reply, {**body, "jobs": [change(job) for job in body.get("jobs", [])]})

    return rule


def lag_conclusion(reads: int, *, when: str) -> Rule:
    """Show a completed child run with a null conclusion for its first `reads` reads."""
    seen: dict[int, int] = {}

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        run_id = child_run_id(path, world)
        body = json_body(reply)
        if method != "GET" or run_id is None or not path.endswith(f"/runs/{run_id}"):
            return None
        if not isinstance(body, dict) or body.get("conclusion") != when:
            return None
        seen[run_id] = seen.get(run_id, 0) + 1
        if seen[run_id] > reads:
            return None
        return with_json(reply, {**body, "conclusion": None})

    return rule


# -- the allocation, and the execution timeout counted from it ----------------------------------


@pytest.mark.found_by("mutation", issue=35)
def test_the_allocation_time_from_started_at_is_never_earlier_than_the_last_queued_read():
    """GitHub's `started_at` of the allocated job still shows its creation (as a queued job's
    does): the runner came after the read at 215 s that showed the job queued, so the queue wait
    runs to 215 s and the execution starts there, not at the dispatch."""

    def created_as_started(job):
        return {**job, "started_at": job["created_at"]}

    s = Scenario(workload=Workload(duration=300.0)).pools([(0.0, 250.0)], [], [])
    Tamper(s.world, [jobs_rule(created_as_started)]).install()
    result = s.run()
    assert result.exit_code == 0, result.log
    queued = timing.STARTUP_FIRST_CHECK_SECONDS
    last_queued_read = 215.0
    [entry] = attempts(result)
    assert entry["queued-seconds"] == last_queued_read - queued
    assert bar(result.summary, 1, "queue wait") == (round(queued), last_queued_read)
    assert bar(result.summary, 1, "execution")[0] == last_queued_read


@pytest.mark.found_by("mutation", issue=35)
def test_each_execution_round_says_how_long_is_left_to_the_execution_timeout():
    """15 minutes of execution timeout; the runner was allocated at 6 s: at 15 s, 891 s left."""
    s = Scenario().pools([], [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 0, result.log
    [first, *_] = [line for _, line in result.log_lines if line.startswith("Executing round")]
    assert "15s since dispatch, 891s left to the execution timeout; next check in 60s" in first


@pytest.mark.found_by("mutation", issue=35)
def test_a_requeue_says_how_long_is_left_of_the_execution_timeout_from_the_first_allocation():
    """Allocated at 5 s, 15 minutes of execution timeout: when the re-queue is seen, the line
    says what is left of them then."""
    sim = simulated(CATALOGUE["requeue-visible"])
    (run,) = sim.runs
    (kid,) = sim.children(run)
    [(seen, said)] = [(t, line) for t, line in run.log_lines if "re-queued by GitHub" in line]
    assert kid.allocated_at is not None
    left = kid.allocated_at + 15 * 60 - seen  # GitHub's whole seconds: up to 1 s later
    told = re.search(r"the execution timeout, (\d+)s from now \(counted from the first", said)
    assert told is not None, said
    assert left <= int(told[1]) <= left + 1


@pytest.mark.found_by("mutation", issue=35)
def test_a_job_listing_that_shows_no_job_once_during_execution_changes_nothing():
    """GitHub lists no job for the child once, a minute into its execution: the round goes
    on, and the worker is followed to its result."""
    s = Scenario(workload=Workload(duration=300.0)).pools([], [], [])
    emptied: list[float] = []

    def no_job_once(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method != "GET" or not JOBS_PATH.search(path) or not isinstance(body, dict):
            return None
        if child_run_id(path, world) is None or world.now() < 60.0 or emptied:
            return None
        emptied.append(world.now())
        return with_json(reply, {**body, "total_count": 0, "jobs": []})

    Tamper(s.world, [no_job_once]).install()
    result = s.run(post_step=False)
    assert emptied, "the listing was emptied once"
    assert result.exit_code == 0, result.log
    assert "The worker succeeded." in result.log


@pytest.mark.found_by("review", issue=15)
def test_pinned_after_start_still_honours_parent_cancellation():
    """An allocated worker under `pinned-after-start` still stops when the parent is cancelled."""
    w = minute_queues(watched=True, workload=Workload(duration=600.0)).pools((), ())
    w.world.finish_parent(PARENT_RUN_ID, "cancelled", at=120.0)
    result = w.run({"source-policy": "pinned-after-start", "execution-timeout-minutes": "15"})
    assert result.exit_code == 1
    assert f"parent run {PARENT_RUN_ID}" in result.log.lower() or "parent" in result.log
    assert children(w.world)[0].conclusion == "cancelled"


# -- the verdict: reports that lag are waited for -----------------------------------------------


@pytest.mark.found_by("review", issue=15)
def test_lagging_conclusion_after_a_successful_worker_is_success():
    """The worker succeeded; the run read `completed` with a null conclusion twice.

    Before: "the worker did not succeed: run concluded None": a green worker, a red parent.
    After: waited for in the 2-minute settle window; success.
    """
    w = minute_queues(watched=True).pools((), ())
    w.tamper.rules.append(lag_conclusion(2, when="success"))
    result = w.run()
    assert result.exit_code == 0, result.log
    assert "concluded None" not in result.log
    assert "lagging report" in result.log


@pytest.mark.found_by("fuzz")
def test_worker_done_at_the_execution_deadline_with_a_lagging_job_report_is_not_a_timeout():
    """The workload ended before the execution deadline, but the job's report lagged 10 s.

    Before: the poll on the deadline saw the run completed/success and the job still
    in progress, declared "did not finish within execution-timeout-minutes; it is cancelled",
    and failed, although nothing was cancelled and the worker had succeeded in time.
    Fix: when the run or the job already says completed at the deadline, the coordinator
    lets the other report settle (5 s polls, one cancellation window) before judging.
    """
    case = Case(
        inputs=base_inputs({"queue-timeout-minutes": "1", "execution-timeout-minutes": "2"}),
        pools=(PoolPlan("nv-cpu-general", "linux-amd64-cpu16"),),
        timings=Timings(visibility_delay=0.0, job_completion_lag=10.0, latency=0.25),
        # 110 s of workload after the guard: done just inside the 2 minutes counted from the
        # runner's allocation (the job's started_at), with the job's report 10 s behind.
        workload=Workload(outcome="success", duration=110.0),
    )
    outcome = execute(case)
    run = outcome.run
    assert run.exit_code == 0, run.log
    assert "waiting for the lagging report" in run.log
    assert "did not finish within execution-timeout-minutes" not in run.log
    [kid] = children(outcome.world)
    assert kid.conclusion == "success"
    assert len(dispatch_posts(outcome.world)) == 1
