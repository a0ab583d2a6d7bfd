"""The startup window's rules that the mutation runner showed no test held (issue 35).

Each test runs the real coordinator through `cli.main` (the `Scenario` helper) against the fake
GitHub, and states one rule of `action/sequence/startup.py`: what the window's expiry reports, when a
zombie run is named as one, how much of the window a quota pause says is left, that a wrong
job fails at the first read, and that a run found by run-name is listed again at the next poll.
"""

from __future__ import annotations

import re

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github.model import Platform, Timings
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import SimulationRun, run_coordinator
from tests.invariants import dispatch_posts
from tests.test_coordinator import FOREVER, Scenario
from tests.test_older_server import inputs as older_inputs
from tests.test_older_server import older_world
from tests.test_quota import spend_all_at

FIRST_CHILD = 9000000001
NEVER = 10_000.0
NEVER_CREATED = "GitHub never created its worker job"


#: The run-name search's listing (the workflow's runs), on an older server.
LISTING = re.compile(r"/actions/workflows/[^/]+/runs(\?|$)")


def run_name_listings(world: FakeGitHub) -> list[float]:
    """When the main step listed the workflow's runs (one time per listing)."""
    return sorted({e.time for e in world.ledger if e.client == 0 and LISTING.search(e.path)})


def startup_failure(result: SimulationRun) -> str:
    """The one log line that reports the startup window's expiry."""
    [line] = [line for _, line in result.log_lines if "did not show its identity" in line]
    return line


def never_visible() -> Scenario:
    """A child whose run answers 404 until long after the startup window."""
    return Scenario(timings=Timings(visibility_delay=NEVER)).pools([], [], [])


def zombie() -> Scenario:
    """A child whose run shows its identity and stays queued with no job (`Platform.zombies`)."""
    s = Scenario().pools([], [], [])
    s.world.platform = Platform(zombies=(1,))
    return s


def run_name_never_filled_in(s: Scenario) -> None:
    """The child's run-name stays the workflow's name (GitHub has not filled it in yet)."""
    real = s.world.dispatch

    def dispatch_then_blank(*args, **kwargs):  # the run-name pending, for good
        made = real(*args, **kwargs)
        run = s.world.runs.get(FIRST_CHILD)
        if run is not None:
            run.display_title = run.workflow_name
        return made

    s.world.dispatch = dispatch_then_blank  # type: ignore[method-assign]  # the adapters look it up


def test_a_child_read_404_until_the_window_ends_fails_naming_the_404_as_its_last_observation():
    s = never_visible()
    result = s.run(post_step=False)
    assert result.exit_code == 1
    line = startup_failure(result)
    last = line.split("last: ", 1)[1]
    assert "404" in last, line
    assert len(dispatch_posts(s.world)) == 1


def test_a_run_that_shows_its_identity_but_never_a_job_reports_the_missing_worker_job():
    s = zombie()
    result = s.run(post_step=False)
    assert result.exit_code == 1
    line = startup_failure(result)
    assert "jobs: expected one job named 'worker', observed none yet" in line, line
    assert len(dispatch_posts(s.world)) == 1


def test_a_child_never_read_is_not_reported_as_a_run_github_made_no_job_for():
    result = never_visible().run(post_step=False)
    assert result.exit_code == 1
    assert NEVER_CREATED not in startup_failure(result)


def test_a_zombie_run_read_and_never_given_a_job_is_reported_as_such():
    result = zombie().run(post_step=False)
    assert result.exit_code == 1
    assert NEVER_CREATED in startup_failure(result)


def test_a_child_whose_job_was_seen_is_not_reported_as_one_github_made_no_job_for():
    """The job is listed from 5 s on; only the run-name stays pending until the window ends."""
    s = Scenario().pools(FOREVER, [], [])
    run_name_never_filled_in(s)
    result = s.run(post_step=False)
    assert result.exit_code == 1
    line = startup_failure(result)
    assert "run-name (display_title)" in line, line
    assert NEVER_CREATED not in line


@pytest.mark.parametrize(("spent_at", "paused_at"), [(27.0, 30.0), (118.0, 120.0)])
def test_a_quota_pause_inside_the_startup_window_names_how_much_of_the_window_was_left(
    spent_at: float, paused_at: float
):
    """The job is listed late (at 300 s): the reads every 5 s from 15 s wait for it; the quota
    is spent just before the read at `paused_at`, which pauses with the rest of the 2-minute
    window left (none at its last read, 120 s). After the reset the job is there."""
    s = Scenario(timings=Timings(jobs_delay=297.0)).pools([], [], [])
    spend_all_at(s, spent_at)
    result = s.run(post_step=False)
    assert result.exit_code == 0, result.log
    left = timing.STARTUP_WINDOW_SECONDS - paused_at
    [pause] = [line for _, line in result.log_lines if "The API quota is spent" in line]
    assert f"the startup window of child {FIRST_CHILD} ({left:.0f}s of it left)" in pause, pause


def rename_the_job(s: Scenario, name: str) -> None:
    """The child's one job is listed under another name (from 10 s, before the first read)."""

    def rename() -> None:
        job = s.world.runs[FIRST_CHILD].job
        assert job is not None  # listed at 5 s
        job.name = name

    s.world._at(10.0, rename)


def test_a_child_whose_one_job_has_another_name_fails_at_the_first_startup_read():
    """The error is logged after the cleanup; the cancel at 15 s shows when it was raised."""
    s = Scenario().pools(FOREVER, [], [])
    rename_the_job(s, "build")
    result = s.run(post_step=False)
    assert result.exit_code == 1
    [line] = [line for _, line in result.log_lines if "is not the run" in line]
    assert "jobs: expected exactly one job named 'worker', observed ['build']" in line, line
    # Refused at the first read: the cleanup's cancel goes out then, and no queue round began.
    [cancel] = s.cancels()
    assert cancel == timing.STARTUP_FIRST_CHECK_SECONDS
    assert "Waiting round" not in result.log


def test_a_run_found_by_run_name_is_listed_again_at_the_next_poll_while_its_job_is_not_listed():
    """An older server; the run found at 15 s has no job listed before 33 s: the startup reads
    go on every 5 s, and the one listing again comes with the first of them (20 s), not later."""
    clock = FakeClock()
    world, sha = older_world(clock, cpu16_busy=False)
    world.timings = Timings(jobs_delay=30.0)
    world.on_worker_start = None
    result = run_coordinator(world, clock, older_inputs(sha), main=cli.main, post_step=False)
    assert result.exit_code == 0, result.log
    found = timing.STARTUP_FIRST_CHECK_SECONDS
    assert f"Found run {FIRST_CHILD} named" in result.log
    assert run_name_listings(world) == [found, found + timing.STARTUP_POLL_SECONDS]
