"""The guard narrows a second execution of its job (issue 44, finding 3).

GitHub has run one job on two runners (actions/runner#3010, #3544, #4179). The guard reads its
run attempt's jobs and requires exactly one job `worker`, shown on the runner it runs on
(RUNNER_NAME); a job shown elsewhere is read once more 5 s later (GitHub re-queues jobs to other
runners) before the guard refuses, naming both runners. Unit tests drive the guard as the CLI
builds it against the stateful fake GitHub (`tests.test_guard`); the end-to-end test lets the
real coordinator dispatch a child whose job GitHub runs twice (`Platform.twice`).
"""

from __future__ import annotations

import pytest

from runner_queue_fallback.action.guard import RUNNER
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import FakeGitHub, Platform
from tests.test_guard import (
    GROUP,
    LABEL,
    coordinate,
    dispatch_child,
    e2e_world,
    guard_environ,
    make_world,
    only_child,
    refused_at,
    run_guard,
)

FIRST, SECOND = f"{LABEL}-001", f"{LABEL}-002"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def allocated(clock: FakeClock, platform: Platform | None = None) -> tuple[FakeGitHub, int]:
    """A child whose job is listed at 2 s and taken by the pool's first runner (FIRST)."""
    world = make_world(clock)
    if platform is not None:
        world.platform = platform
    world.add_pool(GROUP, LABEL, runners=2)
    run_id = dispatch_child(world)
    clock.advance(3.0)
    return world, run_id


def job_reads(world: FakeGitHub, run_id: int) -> int:
    return sum(1 for e in world.ledger if e.path.endswith(f"/runs/{run_id}/attempts/1/jobs"))


def test_the_guard_on_the_runner_github_shows_passes_for_one_more_request(clock: FakeClock):
    world, run_id = allocated(clock)
    result = run_guard(world, clock, guard_environ(world, run_id, RUNNER_NAME=FIRST))
    assert result.passed, result.log_lines()
    assert result.checks[-1].name == RUNNER
    assert result.checks[-1].observed == f"the job worker shown on this runner, {FIRST!r}"
    assert job_reads(world, run_id) == 1
    assert [(e.method, e.status) for e in world.ledger] == [("GET", 200)] * 5
    assert clock.sleeps == []


def test_a_second_execution_on_another_runner_is_refused_after_a_second_read(clock: FakeClock):
    """Both runners named, and the platform's issue; the job is read twice, 5 s apart."""
    world, run_id = allocated(clock)
    result = run_guard(world, clock, guard_environ(world, run_id, RUNNER_NAME=SECOND))
    refusal = refused_at(result, RUNNER)
    assert refusal.observed == (
        f"the job worker shown on runner {FIRST!r} at a second read, and this is runner "
        f"{SECOND!r}: a second execution of one job (actions/runner#3010)"
    )
    assert "the workload runs only on the runner GitHub shows" in str(refusal)
    assert job_reads(world, run_id) == 2
    assert clock.sleeps == [5.0]


def test_a_job_github_moves_to_this_runner_between_the_reads_passes(clock: FakeClock):
    """GitHub re-queues a job its first runner never picked up (reference section 12): the
    first read still shows that runner, the second, 5 s later, shows this one."""
    platform = Platform(requeue="visible", requeue_after=4.0)
    world, run_id = allocated(clock, platform)  # FIRST is assigned at 2 s, never starts
    job = world.runs[run_id].job
    assert job is not None
    assert job.runner_name == FIRST
    result = run_guard(world, clock, guard_environ(world, run_id, RUNNER_NAME=SECOND))
    assert result.passed, result.log_lines()
    assert result.checks[-1].observed == f"the job worker shown on this runner, {SECOND!r}"
    assert job_reads(world, run_id) == 2


def test_without_the_runners_name_the_check_says_so_and_holds(clock: FakeClock):
    world, run_id = allocated(clock)
    result = run_guard(world, clock, guard_environ(world, run_id))
    assert result.passed, result.log_lines()
    assert result.checks[-1].observed == (
        "RUNNER_NAME not set: the runner is not compared (no request)"
    )
    assert "(this runner's name unknown: not compared)" in result.checks[-1].expected
    assert job_reads(world, run_id) == 0


def test_a_job_that_shows_no_runner_is_not_compared(clock: FakeClock):
    """No pool took the job: GitHub shows no runner, so there is nothing to compare."""
    world = make_world(clock)
    run_id = dispatch_child(world)
    clock.advance(3.0)
    result = run_guard(world, clock, guard_environ(world, run_id, RUNNER_NAME=FIRST))
    assert result.passed, result.log_lines()
    assert (
        result.checks[-1].observed == f"the job worker shows no runner: not compared with {FIRST!r}"
    )


@pytest.mark.parametrize("name", ["build", None], ids=["another-name", "no-job-listed"])
def test_a_run_without_exactly_one_job_worker_is_refused(clock: FakeClock, name: str | None):
    world, run_id = allocated(clock)
    run = world.runs[run_id]
    assert run.job is not None
    if name is None:
        run.job = None
    else:
        run.job.name = name
    refusal = refused_at(
        run_guard(world, clock, guard_environ(world, run_id, RUNNER_NAME=FIRST)), RUNNER
    )
    listed = 0 if name is None else 1
    assert refusal.observed == (
        f"0 job(s) named worker among the {listed} of run {run_id} attempt 1"
    )


def test_a_job_github_runs_twice_runs_its_workload_once(clock: FakeClock, capsys):
    """The real coordinator dispatches; GitHub starts the job on its runner and on a second one
    the job never shows (`Platform.twice`): the guard there refuses."""
    world, worker = e2e_world(clock)
    world.platform = Platform(twice=(1,))
    assert coordinate(world, clock) == 0
    assert world.hook_errors == []
    history = world.history[only_child(world)]
    assert history.workload_started_at is not None
    assert history.conclusion == "success"
    assert (history.second_runner, history.second_guard_passed) == (f"{FIRST}-2", False)
    assert [r.passed for r in worker.results] == [True, False]
    refusal = worker.results[1].refusal
    assert refusal is not None
    assert refusal.check == RUNNER
    assert f"shown on runner {FIRST!r} at a second read, and this is runner '{FIRST}-2'" in (
        refusal.observed
    )
