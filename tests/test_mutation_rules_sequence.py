"""The queue, cancellation, execution and quota phases: rules the fixed mutation runner found
held by no test (issue 35).

Each test states one rule and fails when it breaks: a cancel GitHub refuses at the queue
deadline is sent again 5 s later, then forced, and the unconfirmed error quotes the refusal; the
execution rounds and a re-queue say how long is left to the execution timeout; a candidate that
fits the job to the second after a quota reset is waited for and dispatched; an attempt ended
in the queue counts as queued; after a quota pause the queue clock and a later candidate's
startup window are counted as the rules say; a wait that outlasts the job, or ends exactly at
its end, is warned of (naming the run-name when only that is known), once a reset; at a queue
deadline with the quota spent the wait for the reset comes before the fresh read. Every test
drives `cli.main` against the fake GitHub (the re-queue: the catalogue's scenario, as in
`tests/test_platform.py`).
"""

from __future__ import annotations

import re

import pytest

from runner_queue_fallback.core import timing
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings, Workload
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import SimulationRun
from tests.invariants import dispatch_posts
from tests.outside import JOBS_PATH, Tamper, child_run_id, json_body, with_json
from tests.test_coordinator import FOREVER, Scenario, attempts
from tests.test_job_time import coordinator_yaml, job_scenario, run, short_quota
from tests.test_platform import CATALOGUE
from tests.test_platform import _simulated as simulated
from tests.test_quota import RESET, coordinator_requests, spend_all_at
from tests.test_quota_pauses import end_job_after

#: GitHub answers 409 to every cancel and force-cancel while the run stays queued.
REFUSED = Fault("status", status=409, method="POST", path=r"/(force-)?cancel$")
#: The first candidate's queue deadline: the first read at 15 s, then 10 minutes.
DEADLINE = 615.0


def test_a_cancel_refused_at_the_queue_deadline_is_sent_again_then_forced_and_quoted():
    s = Scenario(faults=[REFUSED]).pools(FOREVER, [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    sent = [(e.time, e.path.rsplit("/", 1)[-1]) for e in s.world.ledger if e.method == "POST"]
    assert sent[1:4] == [
        (DEADLINE, "cancel"),
        (DEADLINE + 5.0, "cancel"),
        (DEADLINE + 10.0, "force-cancel"),
    ]
    error = next(line for line in result.log.splitlines() if "was not confirmed within" in line)
    assert "; GitHub refused the cancel: POST " in error
    assert "-> 409: " in error


def test_each_execution_round_says_how_long_is_left_to_the_execution_timeout():
    """15 minutes of execution timeout; the runner was allocated at 6 s: at 15 s, 891 s left."""
    s = Scenario().pools([], [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 0, result.log
    [first, *_] = [line for _, line in result.log_lines if line.startswith("Executing round")]
    assert "15s since dispatch, 891s left to the execution timeout; next check in 60s" in first


def test_a_candidate_that_fits_the_job_to_the_second_after_the_reset_is_waited_for():
    """timeout-minutes 95 from a job started 59 s before the step: after the reset (3,601 s with
    its margin) exactly the 34 minutes the candidate needs are left, so it is dispatched."""
    s = job_scenario(coordinator_yaml("95"), job_started=-59.0)
    short_quota(s)
    result = run(s)
    assert result.exit_code == 0, result.log
    assert len(dispatch_posts(s.world)) == 1
    s = job_scenario(coordinator_yaml("95"), job_started=-60.0)
    short_quota(s)
    assert run(s).exit_code == 1, "a second less, and it is not"
    assert dispatch_posts(s.world) == []


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


def test_a_sequence_ended_while_its_child_waits_in_the_queue_counts_the_attempt_as_queued():
    """Every read of the child is refused from 100 s on (a permission taken away): the attempt
    ends as it was, queued."""
    refused = Fault("forbidden", method="GET", path=r"/actions/runs/9\d{9}$", start=100.0)
    s = Scenario(faults=[refused]).pools(FOREVER, [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    assert [a["outcome"] for a in attempts(result)] == ["queued"]


@pytest.mark.parametrize(("jobs_delay", "ago"), [(297.0, 3300), (3596.0, 1)])
def test_after_a_startup_pause_the_queue_clock_starts_at_the_jobs_created_at_and_says_so(
    jobs_delay: float, ago: int
):
    """The quota is spent at 27 s and resets at 3,601 s; the job was created at 300 s (or 2 s
    before the reset): its clock starts a second after `created_at` (GitHub's whole seconds),
    and the line says how long ago that was."""
    s = Scenario(timings=Timings(jobs_delay=jobs_delay)).pools(FOREVER, [], [])
    spend_all_at(s, 27.0)
    result = s.run(post_step=False)
    [line] = [line for _, line in result.log_lines if "the queue clock starts" in line]
    assert f"the queue clock starts, {ago}s ago (its created_at) (10 min" in line


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


def test_a_quota_wait_that_outlasts_the_jobs_end_by_minutes_is_warned_of(monkeypatch):
    """The job ends at 3,400 s; the quota is spent at 300 s and resets at 3,600 s: the wait
    begun then outlasts the job by about 4 minutes, and is warned of."""
    end_job_after(monkeypatch, 3400.0)
    s = Scenario().pools(FOREVER, [], [])
    spend_all_at(s, 300.0)
    result = s.run(post_step=False)
    assert "::warning title=Job ends during a quota wait::" in result.log


#: The quota spent at 5 s, the startup window's read at 15 s pauses for the reset: until 3,601 s.
PAUSED_AT, RESUMED = timing.STARTUP_FIRST_CHECK_SECONDS, RESET + 1.0


def job_ending_at(monkeypatch: pytest.MonkeyPatch, end: float, **run: float) -> SimulationRun:
    """The job ends `end` s after the step starts; the quota is spent at 5 s with the child
    queued (its runner comes at 100 s), so the startup window waits from 15 s to the reset."""
    end_job_after(monkeypatch, end)
    s = Scenario(timings=Timings(cancel_delay=3.0)).pools([(0.0, 100.0)], [], [])
    spend_all_at(s, 5.0)
    return s.run(post_step=False, **run)


def job_end_warnings(result: SimulationRun) -> list[tuple[float, str]]:
    return [(t, line) for t, line in result.log_lines if "Job ends during a quota wait" in line]


def test_a_quota_wait_that_ends_exactly_at_the_jobs_end_is_warned_of(monkeypatch):
    """The wait taken at 15 s ends at 3,601 s: a job ending then is warned of (it ends during
    the wait, not after it), a job ending a second later is not."""
    [(_, warning)] = job_end_warnings(job_ending_at(monkeypatch, RESUMED))
    wait = f"{RESUMED - PAUSED_AT:.0f}s"
    assert f"({wait} from now), but this job reaches its end" in warning
    assert f"in {wait}: the runner will cancel the job during the wait" in warning
    assert job_end_warnings(job_ending_at(monkeypatch, RESUMED + 1.0)) == []


def test_a_second_wait_for_a_reset_already_warned_of_is_not_warned_of_again(monkeypatch):
    """The job ends at 3,597 s, during the wait for the reset warned of at 15 s: the runner's
    SIGTERM then starts the cleanup, whose cancel waits the last 4 s for the same reset. One
    warning, the first: the second wait is only logged."""
    end = RESUMED - 4.0
    result = job_ending_at(monkeypatch, end, interrupt_at=end)
    assert [t for t, _ in job_end_warnings(result)] == [PAUSED_AT]
    [waited_at] = [
        t
        for t, line in result.log_lines
        if "waiting for its reset at 10:00:00Z (4s) before POST " in line
    ]
    assert waited_at == end, "the cleanup's cancel waited for the same reset"


def test_a_quota_wait_with_a_lost_dispatch_in_flight_names_the_run_name_to_look_for(monkeypatch):
    """The dispatch reply is lost and the quota is spent at 2 s, the job ends at 30 minutes:
    the warning before the wait names the run-name, since no run id is known."""
    end_job_after(monkeypatch, 1800.0)
    lost = Fault(kind="lost_reply", method="POST", path=r"/dispatches$", count=1, status=502)
    s = Scenario(faults=[lost]).pools(FOREVER, [], [])
    spend_all_at(s, 2.0)
    result = s.run(post_step=False)
    [warning] = [line for line in result.log.splitlines() if "Job ends during a quota wait" in line]
    request_id = re.search(r"rqf-[\w-]+", warning)
    assert request_id is not None, warning
    assert f"the child dispatched as {request_id[0]} (its reply was lost: look for run-name" in (
        warning
    )


def test_at_a_queue_deadline_with_the_quota_spent_the_wait_comes_first_and_is_said_once():
    """The poll on the deadline (615 s) spends the last of the quota: the deadline's line says
    the fresh read and the cancel wait for the reset; the fresh read is announced after that wait
    (at the reset, 3,601 s) and is not paused again, and nothing is sent in between."""
    s = Scenario().pools(FOREVER, [], FOREVER)
    s.world.etags = "every-read"  # every poll counts: the poll at the deadline spends the last two
    s.world._at(600.0, lambda: s.world.spend_quota(s.world.quota - s.world._quota_used() - 2))
    result = s.run()
    assert result.exit_code == 0, result.log
    [(waited_at, waited)] = [
        (t, line) for t, line in result.log_lines if line.startswith("Queue deadline reached")
    ]
    assert waited_at == DEADLINE
    assert "the fresh read and the cancel wait 2986s" in waited
    [read_at] = [t for t, line in result.log_lines if "fresh read before cancelling" in line]
    assert read_at == RESET + 1.0, "the fresh read comes after the wait, at the reset"
    assert "pauses for" not in result.log, "the wait is said once, by the deadline's line"
    assert coordinator_requests(s, DEADLINE + 1.0, RESET) == []
