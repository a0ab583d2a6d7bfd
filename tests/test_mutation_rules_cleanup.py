"""Cleanup and the shared reads: rules the fixed mutation runner found held by no test (issue 35).

Each test states one rule of `action/cleanup.py` and fails when it breaks: what an unconfirmed cleanup
reports (a failed cancel or read, a refused read, a spent quota, a run that had a job), that it
waits for a reset that comes exactly at its limit, that it reads until the last poll of its
window and no longer than its window without a wait of its own, that a refused cancel accepted
when sent again is not forced, that a later run gets only what is left of the shared window,
and how the post step finds the runs the main step left. The cleanup is called as the
coordinator and the post step call it, on a client of the fake GitHub; the startup test drives
`cli.main`.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from runner_queue_fallback.action.cleanup import (
    cancel_and_confirm,
    cancel_and_confirm_all,
    runs_left_by_main_step,
)
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github.faults import Fault, FaultPlan
from runner_queue_fallback.fake_github.model import Platform, Timings
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.retry import RESET_MARGIN_SECONDS, Patience
from tests.test_cleanup import POST_TOKEN, post_step
from tests.test_coordinator import FOREVER, Scenario
from tests.test_sim_support import GROUP, dispatch, make_world

#: The child's job listing (the parent's run id is shorter).
CHILD_JOBS = r"/actions/runs/9\d{9}/attempts/1/jobs$"
#: The child's run, and its cancels.
CHILD_RUN = r"/actions/runs/9\d{9}$"
CANCEL = r"/actions/runs/9\d{9}/(force-)?cancel$"
LISTING = r"/workflows/[^/]+/runs$"
#: Honoured never (within any window here).
NEVER = 10_000.0


class Child:
    """A dispatched child whose job stays queued (no runner), and a client to clean it up."""

    def __init__(self, *faults: Fault, platform: Platform | None = None, **timings: float) -> None:
        """Dispatch the child 30 s before the cleanup starts; `faults` apply from then on."""
        self.clock = FakeClock()
        self.world = make_world(
            self.clock,
            timings=Timings(**timings),
            faults=FaultPlan([replace(f, start=30.0) for f in faults]),
            platform=platform or Platform(),
        )
        self.world.add_pool(GROUP, "linux-amd64-cpu8", runners=0)
        self.run_id = dispatch(self.world, "rqf-1", labels="linux-amd64-cpu8")
        self.clock.advance(30)
        session = self.world.session()
        self.client = GitHubClient(
            session, self.world.api_url, self.world.repository, POST_TOKEN, self.clock
        )
        self.lines: list[str] = []
        self.said = ""

    def clean_up(self, **kwargs: float) -> str:
        """Cancel and confirm the child; what the result says."""
        result = cancel_and_confirm(
            self.client, self.clock, self.run_id, log=self.lines.append, **kwargs
        )
        self.confirmed = result.confirmed
        return result.describe()

    def cancels(self) -> list[tuple[float, str]]:
        return [
            (e.time, e.path.rsplit("/", 1)[-1])
            for e in self.world.ledger
            if e.method == "POST" and e.path.endswith("cancel")
        ]

    def reads(self) -> list[float]:
        return [
            e.time
            for e in self.world.ledger
            if e.method == "GET" and e.path.endswith(f"/runs/{self.run_id}")
        ]


# -- what an unconfirmed cleanup reports -------------------------------------------------------


def test_an_unconfirmed_cleanup_of_a_run_that_had_a_job_does_not_say_github_made_none():
    """The cancel is never honoured; the run's queued job was read: no 'never created' report."""
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER)
    said = child.clean_up()
    assert not child.confirmed
    assert "never created its job" not in said
    assert any(line.startswith("Cleanup check: run ") for line in child.lines)


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (Fault("forbidden", method="POST", path=CANCEL), "cancel failed: POST "),
        (Fault("status", status=502, method="GET", path=CHILD_RUN), "last read failed: GET "),
    ],
    ids=["cancel-forbidden", "reads-failing"],
)
def test_an_unconfirmed_cleanup_says_what_failed(fault: Fault, said: str):
    child = Child(fault, cancel_delay=NEVER, force_cancel_delay=NEVER)
    text = child.clean_up()
    assert not child.confirmed
    assert said in text
    assert "; ;" not in text, "no empty part (the run had its job: nothing on GitHub's side)"


def test_a_cleanup_whose_reads_are_refused_ends_unconfirmed_at_once():
    child = Child(Fault("forbidden", method="GET", path=CHILD_RUN))
    text = child.clean_up()
    assert not child.confirmed
    assert "read refused: GET " in text
    assert child.clock.monotonic() == 30.0


def test_a_zombies_report_ends_with_githubs_refusal_and_nothing_after_it():
    """Cancel and force-cancel refused, nothing else failed: the report has no empty part."""
    child = Child(platform=Platform(zombies=(1,)))
    text = child.clean_up()
    assert "GitHub never created its job" in text
    assert not text.rstrip().endswith(";"), text
    assert "; ;" not in text


def test_a_cancel_refused_then_failing_when_sent_again_is_reported():
    """The zombie's cancel is refused (409); sent again 5 s later it fails (403): said."""
    failing = Fault("forbidden", method="POST", path=CANCEL, start=31.0)
    child = Child(platform=Platform(zombies=(1,)))
    child.world.faults.add(failing)
    text = child.clean_up()
    assert "cancel failed: POST " in text


def test_a_quota_spent_until_after_the_window_ends_the_cleanup_at_once_saying_so():
    """Other workflows spend the quota: its reset is beyond the window, so the cleanup stops."""
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER)
    child.world.spend_quota(child.world.quota)
    text = child.clean_up()
    assert not child.confirmed
    assert "the API quota is spent until its reset at " in text
    assert child.clock.monotonic() == 30.0, "no poll is waited for"


def quota_spent_by_the_first_read(limit: float) -> Child:
    """A cleanup at 30 s whose cancel and first read (3 requests) spend the last of the quota
    (its window began at the dispatch, 0 s: the client may send again at 3,601 s), with the
    reset budget that puts its limit (30 s + window + budget) at `limit`. The cancel takes 20 s;
    the client waits out the quota as the coordinator's cleanup does (a child exists)."""
    child = Child(cancel_delay=20.0)
    child.client.patience = Patience.CHILD_EXISTS
    child.world.spend_quota(child.world.quota - child.world._quota_used() - 3)
    child.said = child.clean_up(reset_budget=limit - 30.0 - timing.CANCEL_WINDOW_SECONDS)
    return child


def test_a_reset_exactly_at_the_cleanups_limit_is_waited_for():
    """Limit 3,601 s, the reset then: the cleanup waits for it and confirms the run at the
    read after it; a limit a second earlier ends the cleanup at once, saying why."""
    resumed = timing.QUOTA_WINDOW_SECONDS + RESET_MARGIN_SECONDS
    child = quota_spent_by_the_first_read(resumed)
    assert child.confirmed
    assert child.reads() == [30.0, resumed]
    early = quota_spent_by_the_first_read(resumed - 1.0)
    assert not early.confirmed
    assert early.reads() == [30.0]
    assert early.clock.monotonic() == 30.0


def test_a_cleanup_ended_by_the_spent_quota_says_so_with_no_empty_part():
    """Nothing else to report: the reason is the quota, not `...; . Check run ...`."""
    early = quota_spent_by_the_first_read(timing.QUOTA_WINDOW_SECONDS + RESET_MARGIN_SECONDS - 1)
    reset = early.client.reset_time()
    assert f"; the API quota is spent until its reset at {reset}. Check run" in early.said
    assert "; ." not in early.said


# -- its window ---------------------------------------------------------------------------------


def test_a_cleanup_reads_every_5_s_up_to_the_last_poll_of_its_window():
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER)
    child.clean_up()
    window = timing.CANCEL_WINDOW_SECONDS
    assert child.reads()[-1] == 30.0 + window
    assert child.clock.monotonic() == 30.0 + window


def test_quota_waited_before_the_cleanup_does_not_lengthen_its_window():
    """A reset budget extends the window only by what the cleanup itself waits for."""
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER)
    child.client.stats.quota_waited = 600.0  # waited earlier in the sequence
    child.clean_up(reset_budget=60.0)
    assert child.clock.monotonic() == 30.0 + timing.CANCEL_WINDOW_SECONDS


def test_a_refused_cancel_accepted_when_sent_again_is_not_force_cancelled():
    """GitHub refuses the first cancel (409, still queued), then accepts it 5 s later: no
    force-cancel follows while the cancel takes its time."""
    child = Child(platform=Platform(zombies=(1,)), cancel_delay=20.0)

    def revive() -> None:
        child.world.runs[child.run_id].zombie = False

    child.world._at(32.0, revive)
    child.clean_up()
    assert child.cancels() == [(30.0, "cancel"), (35.0, "cancel")]
    assert child.confirmed


# -- several runs, and the post step's search ---------------------------------------------------


def test_each_further_run_is_sent_its_cancel_and_a_failure_is_said():
    child = Child()
    other = dispatch(child.world, "rqf-2", labels="linux-amd64-cpu8")
    child.clock.advance(10)  # visible
    child.world.faults.add(Fault("forbidden", method="POST", path=rf"/runs/{other}/cancel$"))
    cancel_and_confirm_all(child.client, child.clock, [child.run_id, other], log=child.lines.append)
    assert any(line.startswith(f"Cancel of run {other} failed: POST ") for line in child.lines)
    assert f"Cancel requested for run {other}: accepted" not in child.lines
    third = dispatch(child.world, "rqf-3", labels="linux-amd64-cpu8")
    child.clock.advance(10)  # visible
    cancel_and_confirm_all(child.client, child.clock, [child.run_id, third], log=child.lines.append)
    assert f"Cancel requested for run {third}: accepted" in child.lines


def test_a_later_run_gets_only_what_is_left_of_the_shared_window_however_little():
    """Every reply takes 0.75 s: the first run's cleanup (its cancel never honoured) ends half a
    second before the shared 10 s window does. The second run's cancel goes out in that half
    second; its read, which could only start after the window's end, is never sent."""
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER, latency=0.75)
    other = dispatch(child.world, "rqf-2", labels="linux-amd64-cpu8")
    child.clock.advance(10)  # visible
    start = child.clock.monotonic()
    end = start + 10.0
    _, second = cancel_and_confirm_all(
        child.client, child.clock, [child.run_id, other], window=10.0, log=child.lines.append
    )
    sent = [(e.time, e.method, e.path) for e in child.world.ledger if e.time >= start]
    assert max(time for time, _, _ in sent) == end - 0.5, "nothing starts after the window"
    assert [t for t, method, path in sent if method == "GET" and f"/runs/{other}" in path] == []
    assert "last seen: never observed" in second.describe()


def left_runs(child: Child, state: dict[str, str], **kwargs: float) -> list[int]:
    return runs_left_by_main_step(
        child.client, child.clock, state, "runner-worker.yml", child.lines.append, **kwargs
    ).run_ids


def test_the_post_step_reads_a_saved_run_id_with_surrounding_space():
    child = Child()
    assert left_runs(child, {"child-run-id": f" {child.run_id}\n"}) == [child.run_id]


def test_the_post_steps_single_find_is_not_called_several_runs():
    child = Child()
    assert left_runs(child, {"request-id": "rqf-1"}) == [child.run_id]
    assert not [line for line in child.lines if "runs bear run-name" in line]


def test_an_earlier_candidates_child_is_not_the_post_steps_child_of_a_later_dispatch():
    """The saved run id is candidate 1's; candidate 2's dispatch was in flight: its run is the
    one looked after."""
    child = Child()
    later = dispatch(child.world, "rqf-2", labels="linux-amd64-cpu8")
    state = {"child-run-id": str(child.run_id), "child-request-id": "rqf-1", "request-id": "rqf-2"}
    assert left_runs(child, state) == [later]


def test_the_post_step_says_from_when_it_looked_for_an_unlisted_dispatch():
    """With its dispatch time, from 5 minutes before it; without, from 6 hours before now."""
    child = Child()
    dispatched = child.clock.now()
    left_runs(child, {"request-id": "rqf-none", "dispatched-at": dispatched.isoformat()})
    since = (dispatched - timedelta(minutes=5)).isoformat()
    assert (
        f"No run with run-name rqf-none was found since {since}: if one appears" in child.lines[-1]
    )
    child.lines.clear()
    now = child.clock.now()
    left_runs(child, {"request-id": "rqf-none"})
    since = (now - timedelta(hours=6)).isoformat()
    assert (
        f"No run with run-name rqf-none was found since {since}: if one appears" in child.lines[-1]
    )


def listings_during(child: Child, state: dict[str, str], **kwargs: float) -> list[float]:
    """When (from its start) the post step's search listed the workflow's runs."""
    before, start = len(child.world.ledger), child.clock.monotonic()
    left_runs(child, state, **kwargs)
    new = child.world.ledger[before:]
    return sorted({e.time - start for e in new if e.path.endswith("/runs")})


def test_the_post_steps_search_lists_every_5_s_up_to_the_end_of_its_window_or_its_deadline():
    child = Child()
    nothing = {"request-id": "rqf-none"}
    assert listings_during(child, nothing) == [5.0 * n for n in range(25)]  # 0, 5, ..., 120
    deadline = child.clock.monotonic() + 30.0
    assert listings_during(child, nothing, deadline=deadline) == [5.0 * n for n in range(7)]


def test_the_post_step_keeps_the_child_the_main_step_found_by_run_name_when_listing_fails():
    """Its listing refused, the post step still looks after the child and its saved copy."""
    child = Child(Fault("forbidden", method="GET", path=LISTING))
    copy = dispatch(child.world, "rqf-1", labels="linux-amd64-cpu8")
    state = {
        "request-id": "rqf-1",
        "child-request-id": "rqf-1",
        "child-found-by-name": "rqf-1",
        "child-run-id": str(child.run_id),
        "child-copies": str(copy),
    }
    assert left_runs(child, state) == [child.run_id, copy]


def test_once_a_run_is_found_the_post_step_lists_until_two_minutes_after_the_dispatch():
    """A listing that lags may hide a run only that long: the post step, 10 s after the
    dispatch, lists every 5 s up to then (110 s on), and no longer."""
    child = Child()
    dispatched = child.clock.now() - timedelta(seconds=10)
    state = {"request-id": "rqf-1", "dispatched-at": dispatched.isoformat()}
    settled = timing.STARTUP_WINDOW_SECONDS - 10.0
    assert listings_during(child, state) == [5.0 * n for n in range(int(settled / 5) + 1)]


@pytest.mark.parametrize(
    "fault",
    [
        Fault("forbidden", method="GET", path=LISTING),
        Fault("status", status=404, method="GET", path=LISTING, count=1),
    ],
    ids=["refused", "failed-once"],
)
def test_a_post_step_listing_that_fails_is_said(fault: Fault):
    child = Child(fault)
    left_runs(child, {"request-id": "rqf-1"})
    assert any(line.startswith("Could not look for run-name rqf-1: GET ") for line in child.lines)


# -- the startup window's reads ------------------------------------------------------------------


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


def test_the_post_step_sends_nothing_past_its_4_minutes_even_after_a_quota_wait(tmp_path: Path):
    """GitHub ends a post step 5 minutes after a cancellation; a minute is kept for the rest. The
    child's first read waits 201 s for a quota reset; the cancel is never honoured: the cleanup
    reads every 5 s and stops at its last poll inside the 4 minutes."""
    child = Child(cancel_delay=NEVER, force_cancel_delay=NEVER)
    spent = Fault(
        "primary_rate_limit", method="GET", path=rf"/runs/{child.run_id}$", count=1, retry_after=200
    )
    child.world.faults.add(spent)
    state = {"request-id": "rqf-1", "child-run-id": str(child.run_id), "child-request-id": "rqf-1"}
    code, log = post_step(child.world, child.clock, state, tmp_path)
    assert code == 1
    assert "cleanup NOT confirmed" in log
    sent = [e.time - 30.0 for e in child.world.ledger if e.time >= 30.0]
    limit = 300.0 - 60.0  # GitHub's 5 minutes, written out: the constants must not define them
    assert max(sent) == limit - 4.0  # 201 s, then every 5 s: 236 s is the last poll that fits
    assert child.clock.monotonic() - 30.0 <= limit


def test_a_found_run_whose_cancel_failed_and_that_completed_is_left_as_completed(tmp_path: Path):
    """The post step finds the lost dispatch's run already over; its cancel fails (403): the run
    is not counted as one this step cancelled, so it is reported as already completed."""
    clock = FakeClock()
    world = make_world(clock)
    run_id = dispatch(world, "rqf-1")
    clock.advance(200)  # its 60 s workload is over
    world.faults.add(Fault("forbidden", method="POST", path=CANCEL))
    code, log = post_step(world, clock, {"request-id": "rqf-1"}, tmp_path)
    assert code == 0
    assert f"Cancel of run {run_id} failed: POST " in log
    assert f"Child run {run_id} is already completed: nothing to clean up" in log
