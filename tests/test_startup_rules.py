"""The startup window (`action/sequence/startup.py`): from the dispatch to the child's identity
and worker job, read at 15 s, then every 5 s up to 120 s.

Each test runs the real coordinator through `cli.main` (`tests.scenario`) against the fake
GitHub and states one rule: what the window's expiry reports, when a zombie run is named as one,
how much of the window a quota pause says is left (also for a later candidate, after a pause
before it), that a wrong job fails at the first read, that a run-name not filled in yet is
waited for (and one seen matching that changes is not), that a read in flight across the
window's end is judged on its reply, that a failing read is retried only within the window, and
that a run found by run-name is listed again at the next poll.
"""

from __future__ import annotations

import re

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Platform, Timings
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import SimulationRun, run_coordinator
from tests.invariants import children, dispatch_posts
from tests.outside import Rule, child_run_id, json_body, with_json
from tests.scenario import cancels, minute_queues
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


@pytest.mark.found_by("mutation", issue=35)
def test_a_child_read_404_until_the_window_ends_fails_naming_the_404_as_its_last_observation():
    s = never_visible()
    result = s.run(post_step=False)
    assert result.exit_code == 1
    line = startup_failure(result)
    last = line.split("last: ", 1)[1]
    assert "404" in last, line
    assert len(dispatch_posts(s.world)) == 1


@pytest.mark.found_by("mutation", issue=35)
def test_a_run_that_shows_its_identity_but_never_a_job_reports_the_missing_worker_job():
    s = zombie()
    result = s.run(post_step=False)
    assert result.exit_code == 1
    line = startup_failure(result)
    assert "jobs: expected one job named 'worker', observed none yet" in line, line
    assert len(dispatch_posts(s.world)) == 1


@pytest.mark.found_by("mutation", issue=35)
def test_a_child_never_read_is_not_reported_as_a_run_github_made_no_job_for():
    result = never_visible().run(post_step=False)
    assert result.exit_code == 1
    assert NEVER_CREATED not in startup_failure(result)


@pytest.mark.found_by("mutation", issue=35)
def test_a_zombie_run_read_and_never_given_a_job_is_reported_as_such():
    result = zombie().run(post_step=False)
    assert result.exit_code == 1
    assert NEVER_CREATED in startup_failure(result)


@pytest.mark.found_by("mutation", issue=35)
def test_a_child_whose_job_was_seen_is_not_reported_as_one_github_made_no_job_for():
    """The job is listed from 5 s on; only the run-name stays pending until the window ends."""
    s = Scenario().pools(FOREVER, [], [])
    run_name_never_filled_in(s)
    result = s.run(post_step=False)
    assert result.exit_code == 1
    line = startup_failure(result)
    assert "run-name (display_title)" in line, line
    assert NEVER_CREATED not in line


@pytest.mark.found_by("mutation", issue=35)
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


@pytest.mark.found_by("mutation", issue=35)
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


@pytest.mark.found_by("mutation", issue=35)
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


# -- the window after a quota pause before it ---------------------------------------------------


@pytest.mark.found_by("mutation", issue=35)
def test_a_later_candidates_startup_window_is_two_minutes_after_a_quota_pause_before_it():
    """Candidate 1 waits out a spent quota in its queue; candidate 2's run answers 404 for good:
    its startup window still ends 2 minutes after its dispatch."""
    hidden = Fault("status", status=404, method="GET", path=r"/actions/runs/9000000002$")
    s = Scenario(faults=[hidden]).pools(FOREVER, FOREVER, [])
    spend_all_at(s, 300.0)
    result = s.run(post_step=False)
    assert result.exit_code == 1
    second = dispatch_posts(s.world)[1]
    assert "did not show its identity and worker job within the 2-minute startup" in result.log
    assert s.cancels()[1] == second + timing.STARTUP_WINDOW_SECONDS, "the cleanup's cancel"


# -- the run-name as the spec words it: pending until filled in ---------------------------------


def pending_title(until: float, *, after: float = 0.0) -> Rule:
    """Show the child's run-name as the workflow's name between `after` and `until` (relative)."""

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        run_id = child_run_id(path, world)
        body = json_body(reply)
        if (
            method != "GET"
            or run_id is None
            or not isinstance(body, dict)
            or "display_title" not in body
        ):
            return None
        age = world.now() - world.history[run_id].dispatched_at
        if after <= age < until:
            return with_json(reply, {**body, "display_title": body["name"]})
        return None

    return rule


@pytest.mark.found_by("review", issue=15)
def test_pending_run_name_at_the_first_startup_read_is_waited_for():
    """The first read showed the run-name still equal to the workflow's name.

    Before: failed at once ("not the run that was dispatched") and cancelled a good child.
    After: tolerated until the window's expiry; here it fills in at 30 s and all goes on.
    """
    w = minute_queues(watched=True).pools((), ())
    w.tamper.rules.append(pending_title(30.0))
    result = w.run()
    assert result.exit_code == 0, result.log
    assert len(dispatch_posts(w.world)) == 1


@pytest.mark.found_by("review", issue=15)
def test_pending_run_name_until_expiry_reports_expected_and_observed():
    """A run-name that never fills in fails at the window's expiry, naming both values."""
    w = minute_queues(watched=True).pools((), ())
    w.tamper.rules.append(pending_title(10.0**9))
    result = w.run()
    assert result.exit_code == 1
    assert "2-minute startup window" in result.log
    assert "expected 'rqf-" in result.log
    assert "observed 'Runner worker' (not filled in yet)" in result.log


@pytest.mark.found_by("review", issue=15)
def test_run_name_seen_matching_then_pending_fails_at_once():
    """A field seen matching that then changes fails at once, even inside the startup window."""
    w = minute_queues(watched=True, timings=Timings(jobs_delay=60.0)).pools((), ())
    w.tamper.rules.append(pending_title(10.0**9, after=25.0))
    result = w.run()
    assert result.exit_code == 1
    assert "changed after it was seen matching" in result.log
    cancel = cancels(w.world)[0]
    assert cancel < children(w.world)[0].dispatched_at + 40


# -- its reads: in flight across the end, retried only within it --------------------------------


@pytest.mark.found_by("review", issue=15)
def test_read_in_flight_across_the_startup_window_end_is_judged_on_its_reply():
    """The last startup read was sent inside the window; its reply arrived after it.

    Before: the late reply was thrown away and the startup failed, cancelling a good child.
    After: judged on its reply (the spec: in-flight requests extend the observation window).
    """
    # Each request takes 1.75 s: the last startup read is sent at 118.75 s, answered at 120.5 s.
    w = minute_queues(watched=True, timings=Timings(latency=1.75)).pools(FOREVER, ())

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        run_id = child_run_id(path, world)
        body = json_body(reply)
        if (
            method != "GET"
            or run_id is None
            or run_id != min(world.history)
            or not path.endswith("/jobs")
        ):
            return None
        if world.now() - world.history[run_id].dispatched_at < HIDDEN and isinstance(body, dict):
            return with_json(reply, {**body, "total_count": 0, "jobs": []})
        return None

    w.tamper.rules.append(rule)
    result = w.run()
    assert result.exit_code == 0, result.log
    assert "2-minute startup window" not in result.log
    first = children(w.world)[0]
    reads = [
        e.time - first.dispatched_at
        for e in w.world.ledger
        if e.path.endswith(f"/runs/{first.run_id}/attempts/1/jobs")
    ]
    shown = [t for t in reads if t >= HIDDEN]
    assert shown[0] > STARTUP_WINDOW_SECONDS  # sent after the run's reply, which came late


#: The job list stays empty until just before the window's end: only the in-flight read sees it.
HIDDEN = 118.0


STARTUP_WINDOW_SECONDS = 120.0


#: The child's job listing (the parent's run id is shorter).
CHILD_JOBS = r"/actions/runs/9\d{9}/attempts/1/jobs$"


@pytest.mark.found_by("mutation", issue=35)
def test_a_startup_reads_failing_job_listing_is_retried_only_within_the_window():
    """Every listing of the child's jobs answers 502: the read at 115 s retries once, at 120 s
    (the window's end), and no more; the window has ended, and the cancel goes out then."""
    failing = Fault("status", status=502, method="GET", path=CHILD_JOBS)
    s = Scenario(faults=[failing]).pools(FOREVER, [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    window = timing.STARTUP_WINDOW_SECONDS
    last_read = window - timing.STARTUP_POLL_SECONDS
    [(_, retried)] = [(t, line) for t, line in result.log_lines if t == last_read and "502" in line]
    assert retried.endswith("retry 1 of 2 in 5s")
    assert s.cancels()[0] == window
