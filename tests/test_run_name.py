"""The child found by its run-name (`action/sequence/run_name.py`): on an older server, whose
dispatch answers 204 without the run's id, the main step looks for the run named after its
request id, follows the first created of the runs bearing it and names the others as copies.

Every test drives `cli.main` against the fake GitHub on an older server (`tests.scenario`'s
`older_server`): the search says what it does and from when, counts its searches, says a failed
search and stops on a refused one, pauses for a spent quota; the listing again (once the run is
found) names a copy it finds, and an earlier run that replaces the child (or ends the sequence)
moves the attempts, the state and the queue clock to it. A copy is a second dispatch the fake
receives a few seconds after the real one (`copy_every_dispatch`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from urllib.parse import parse_qs

import pytest

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import DispatchRefused
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import FakeRun, Timings
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import SimulationRun
from tests.invariants import dispatch_posts
from tests.scenario import (
    Scenario,
    attempts,
    copy_every_dispatch,
    named_over,
    older_server,
    real_and_copy,
)
from tests.test_quota import spend_all_at
from tests.test_sim_support import child_inputs

LISTING = r"/actions/workflows/[^/]+/runs$"
#: The first search comes 15 s after the dispatch; the listing again 5 s after the find.
FOUND = 15.0


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


def older(
    *faults: Fault,
    busy: bool = False,
    listing_delay: float = 0.0,
    copies: tuple[float, ...] = (),
    copy_after: float | None = None,
    hide_real: float = 0.0,
    interrupt_at: float | None = None,
) -> tuple[FakeGitHub, SimulationRun, SleepLog]:
    """The main step on an older server (`older_server`), CPU16 free unless `busy`, the child's
    runs listed `listing_delay` s late, `faults` planned.

    `copies`: someone else dispatches the same inputs (the same run-name) that many seconds after
    each dispatch; `copy_after`: one copy that many seconds after, with the real run shown (and
    listed) `hide_real` s later than usual, so that the copy may be listed first.
    """
    clock = SleepLog()
    s = older_server(busy=busy, listing_delay=listing_delay, clock=clock)
    for fault in faults:
        s.world.faults.add(fault)
    for after in copies:
        copy_every_dispatch(s.world, after=after)
    if copy_after is not None:
        copy_every_dispatch(s.world, after=copy_after, hide_real_for=hide_real)
    result = s.run(post_step=False, interrupt_at=interrupt_at, invariants=False)
    return s.world, result, clock


def request_ids(result: SimulationRun) -> list[str]:
    """The request ids the main step dispatched, in order (its run-names)."""
    return re.findall(r"Dispatch of (rqf-[\w-]+) accepted without its run id", result.log)


def warnings(result: SimulationRun, title: str) -> list[str]:
    return [line for line in result.log.splitlines() if f"::warning title={title}::" in line]


def _named(world: FakeGitHub) -> list[FakeRun]:
    """The runs bearing the child's run-name, the one created first first."""
    kids = [run for run in world.runs.values() if run.display_title.startswith("rqf-9")]
    return sorted(kids, key=lambda run: (run.created_at, run.id))


def _search_times(world: FakeGitHub) -> list[float]:
    """When the main step searched for its run by run-name (one time per search)."""
    listings = [e.time for e in world.ledger if e.client == 0 and re.search(LISTING, e.path)]
    return sorted(set(listings))


def _not_unique_warnings(result: SimulationRun) -> list[tuple[float, str]]:
    """The "Run-name not unique" warnings, with when each was printed."""
    return [(t, line) for t, line in result.log_lines if "title=Run-name not unique" in line]


def _logged_at(result: SimulationRun, text: str) -> float:
    """When the first log line holding `text` was printed."""
    return next(t for t, line in result.log_lines if text in line)


# -- the search: what it says, from when, how many, and when it fails ---------------------------


@pytest.mark.found_by("mutation", issue=35)
def test_the_search_says_what_it_looks_for_and_from_when():
    """Candidate 2 (CPU16 busy for its minute): its search asks for runs created since its
    dispatch less 5 minutes, on the coordinator's clock."""
    world, result, _ = older(busy=True)
    assert result.exit_code == 0, result.log
    request_id = request_ids(result)[1]
    assert (
        f"Dispatch of {request_id} accepted without its run id (API version 2022-11-28): "
        f"looking for the run named {request_id}"
    ) in result.log
    second = dispatch_posts(world)[1]
    listing = next(e for e in world.ledger if re.search(LISTING, e.path) and e.time > second)
    [created] = parse_qs(listing.query)["created"]
    since = datetime.fromisoformat(created.removeprefix(">="))
    dispatched = world.clock.now() - timedelta(seconds=world.now() - second)
    assert since == dispatched.replace(microsecond=0) - timedelta(minutes=5)


@pytest.mark.found_by("mutation", issue=35)
def test_the_found_line_counts_the_searches_made():
    """Listed 90 s late: found at the 17th search (15 s, then every 5 s)."""
    world, result, _ = older(listing_delay=90.0)
    [child] = _named(world)
    assert result.exit_code == 0, result.log
    found_at = _logged_at(result, f"Found run {child.id} named")
    made = [t for t in _search_times(world) if t <= found_at]
    assert len(made) == 17
    assert f"Found run {child.id} named {child.display_title} after 17 search(es)" in result.log


@pytest.mark.found_by("mutation", issue=35)
def test_a_run_found_by_run_name_is_checked_at_once_without_waiting_the_first_15_s_again():
    """The search already waited the startup window's first 15 s: the run found at 95 s is
    read at 95 s, and no second first-check wait starts then."""
    world, result, clock = older(listing_delay=90.0)
    [child] = _named(world)
    assert result.exit_code == 0, result.log
    found_at = _logged_at(result, f"Found run {child.id} named")
    assert found_at == 95.0
    reads = [e.time for e in world.ledger if e.path.endswith(f"/actions/runs/{child.id}")]
    assert reads[0] == found_at
    first_check = timing.STARTUP_FIRST_CHECK_SECONDS
    assert [at for at, seconds in clock.timed if seconds == first_check] == [0.0]


@pytest.mark.found_by("mutation", issue=35)
def test_a_run_never_listed_is_counted_as_a_dispatch_accepted_and_its_run_not_found():
    _, result, _ = older(listing_delay=150.0)
    assert result.exit_code == 1
    assert [a["outcome"] for a in attempts(result)] == ["dispatch accepted, run not found"]


@pytest.mark.found_by("mutation", issue=35)
def test_the_lost_run_error_counts_the_searches_made():
    """Never listed within the window: the error gives the number of searches made (22: at
    15 s, then every 5 s up to 120 s)."""
    world, result, _ = older(listing_delay=150.0)
    assert result.exit_code == 1
    made = _search_times(world)
    assert len(made) == 22
    error = next(line for line in result.log.splitlines() if line.startswith("::error"))
    assert "appeared within 2 minutes (22 searches)" in error


@pytest.mark.found_by("mutation", issue=35)
def test_a_search_that_fails_once_is_said_and_the_next_one_finds_the_run():
    failing = Fault("status", status=502, method="GET", path=LISTING, count=3)  # and 2 retries
    _, result, _ = older(failing)
    assert result.exit_code == 0, result.log
    assert re.search(r"Looking for run-name rqf-[\w-]+: GET ", result.log)
    assert "after 2 search(es)" in result.log


@pytest.mark.found_by("mutation", issue=35)
def test_a_search_refused_outright_stops_the_sequence_naming_the_run_name():
    _, result, _ = older(Fault("forbidden", method="GET", path=LISTING))
    assert result.exit_code == 1
    [request_id] = request_ids(result)
    error = next(line for line in result.log.splitlines() if line.startswith("::error"))
    assert f"the dispatch of {request_id} was accepted without its run id, and looking" in error
    assert "failed: GET " in error
    assert [a["outcome"] for a in attempts(result)] == ["dispatch accepted, run not found"]


@pytest.mark.found_by("mutation", issue=35)
@pytest.mark.parametrize(("spent_at", "listed_after"), [(5.0, 0.0), (117.0, 600.0)])
def test_a_quota_pause_of_the_search_says_how_much_of_its_window_was_left(
    spent_at: float, listed_after: float
):
    """The quota is spent at `spent_at`: the next search pauses with what is left of the
    2-minute window (105 s at 15 s; none at the last search, 120 s, of a run listed late)."""
    s = Scenario(timings=Timings(listing_delay=listed_after)).pools([], [], [])
    s.inputs["api-version"] = "2022-11-28"
    spend_all_at(s, spent_at)
    result = s.run(post_step=False)
    [(paused_at, line)] = [(t, line) for t, line in result.log_lines if "the search for" in line]
    left = timing.STARTUP_WINDOW_SECONDS - paused_at
    assert "the search for run-name rqf-" in line
    assert f" ({left:.0f}s of its window left) pauses for " in line


# -- copies: the run created first is the child, the others are named ---------------------------


@pytest.mark.found_by("mutation", issue=35)
def test_on_an_older_server_a_unique_run_name_match_warns_nothing():
    """One run bears the request id: it is followed, and no copy is warned of."""
    world, result, _ = older()
    [child] = _named(world)
    assert result.exit_code == 0, result.log
    assert f"Found run {child.id} named" in result.log
    assert "Run-name not unique" not in result.log
    assert "someone else" not in result.log


@pytest.mark.found_by("mutation", issue=35)
def test_on_an_older_server_a_copy_of_the_run_name_gets_the_not_unique_warning_when_found():
    """A copy dispatched 3 s later is listed with the child at the first search: one warning,
    printed with the child's finding, names it (and the listing one poll later does not again)."""
    world, result, _ = older(copies=(3.0,))
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


@pytest.mark.found_by("mutation", issue=35)
def test_the_not_unique_warning_names_every_other_run_and_not_the_child():
    """Two copies (3 s and 6 s later): the one warning names both, the child only as the child."""
    world, result, _ = older(copies=(3.0, 6.0))
    child, first_copy, second_copy = _named(world)
    assert result.exit_code == 0, result.log
    [(_, warning)] = _not_unique_warnings(result)
    assert f"3 runs are named {child.display_title}: run {child.id}, created first" in warning
    assert f"; run(s) {first_copy.id}, {second_copy.id} were dispatched by someone" in warning


@pytest.mark.found_by("review", issue=26)
def test_on_an_older_server_the_real_child_is_found_beyond_the_first_page():
    """100 newer runs of the workflow between the real child and its copy: the search reads every
    page, so the copy on page 1 does not hide the real child on page 2.

    Before: the search stopped at the first page holding a match, the copy.
    """
    s = older_server()
    world = s.world
    real_dispatch = world.dispatch

    def crowded(file: str, ref: str, inputs: Mapping[str, object]) -> FakeRun | DispatchRefused:
        run = real_dispatch(file, ref, inputs)
        if not isinstance(run, DispatchRefused):
            for n in range(100):
                other = child_inputs(f"rqf-other-{n}", "no-such-pool")
                world.dispatch_at(world.now() + 1.0, file, ref, other)
            world.dispatch_at(world.now() + 2.0, file, ref, inputs)
        return run

    world.dispatch = crowded  # type: ignore[method-assign]  # the fake calls it per request
    result = s.run(invariants=False)
    assert result.exit_code == 0, result.log
    kids = [r for r in world.runs.values() if r.display_title.startswith("rqf-9")]
    real, copy = sorted(kids, key=lambda r: (r.created_at, r.id))
    assert result.outputs["run-id"] == str(real.id)
    assert f"Found run {real.id} named" in result.log
    assert f"run(s) {copy.id} were dispatched by someone else" in result.log
    assert len(dispatch_posts(world)) == 1


# -- the listing again: a copy listed late, an earlier run that replaces the child --------------


@pytest.mark.found_by("mutation", issue=35)
def test_a_listing_again_that_fails_is_said_and_the_child_is_followed_as_found():
    """The listing at 20 s is refused: said; the child found at 15 s is read once, not again."""
    refused = Fault("forbidden", method="GET", path=LISTING, start=FOUND + 1.0, count=1)
    world, result, _ = older(refused)
    assert result.exit_code == 0, result.log
    assert re.search(r"Listing run-name rqf-[\w-]+ again: GET ", result.log)
    child = int(result.outputs["run-id"])
    reads = [e.time for e in world.ledger if e.path.endswith(f"/actions/runs/{child}")]
    assert reads[:2] == [FOUND, FOUND + 5.0 + 60.0], "one read at the find, then execution's"


@pytest.mark.found_by("mutation", issue=35)
def test_a_copy_first_listed_at_the_listing_again_is_named_then():
    """A copy dispatched 16 s after the child is listed only at the listing again (20 s)."""
    world, result, _ = older(copy_after=16.0)
    assert result.exit_code == 0, result.log
    real, copy = real_and_copy(world)
    [warning] = warnings(result, "Run-name not unique")
    assert f"run(s) {copy.id} were dispatched by someone else" in warning
    said = next(t for t, line in result.log_lines if "Run-name not unique" in line)
    assert said == FOUND + 5.0
    reads = [e.time for e in world.ledger if e.path.endswith(f"/actions/runs/{real.id}")]
    assert reads[:2] == [FOUND, FOUND + 5.0 + 60.0], "the child is not read again at the relisting"


@pytest.mark.found_by("review", issue=26)
def test_on_an_older_server_the_earliest_run_is_followed_to_its_result_and_the_copy_named():
    """The copy is listed first (the real child 17 s late): the listing again at the next poll
    finds the real child before any runner was seen, and it replaces the copy.

    Before: the copy was followed, timed out in the queue (the real child held the runner) and
    a second pool was dispatched while the real child ran unobserved.
    """
    s = older_server()
    world = s.world
    copy_every_dispatch(world, after=3.0, hide_real_for=14.0)
    result = s.run(invariants=False)
    real, copy = real_and_copy(world)
    assert result.exit_code == 0, result.log
    assert len(dispatch_posts(world)) == 1, "never a second dispatch"
    assert result.outputs["run-id"] == str(real.id)
    assert real.history is not None
    assert real.history.conclusion == "success"
    assert f"Found run {copy.id} named" in result.log, "the copy was listed first"
    warning = f"run {real.id} with run-name {real.display_title}, listed late, was created before"
    assert warning in result.log
    assert f"run {copy.id} was dispatched by someone else" in result.log
    assert result.state["child-run-id"] == str(real.id)
    assert real.job is not None
    assert result.state["child-job-url"].endswith(f"/job/{real.job.id}")


@pytest.mark.found_by("mutation", issue=35)
def test_an_earlier_run_listed_late_replaces_the_child_in_the_state_and_restarts_the_queue():
    """The copy is listed first; at the listing again the real child replaces it: one warning
    names the copy; the post step is told the child was found by run-name; the real child's
    queue clock starts when its job is first seen."""
    world, result, _ = older(busy=True, copy_after=3.0, hide_real=14.0)
    real, copy, *_ = sorted(run.id for run in world.runs.values() if run.history)  # candidate 1's
    said = warnings(result, "Run-name not unique")
    assert len([w for w in said if str(copy) in w]) == 1, said
    assert f"Worker job of child {real} is queued: the queue clock starts" in result.log
    # a SIGTERM once the real child replaced the copy: the post step is to list again
    _, result, _ = older(copy_after=3.0, hide_real=14.0, interrupt_at=30.0)
    assert result.exit_code == 1
    assert result.state["child-found-by-name"] == request_ids(result)[0]


@pytest.mark.found_by("mutation", issue=35)
def test_a_third_run_listed_when_an_earlier_run_replaces_the_child_is_named_as_a_copy_too():
    """Copies at 3 s (listed first: the real child shows 14 s late) and at 17 s: at the listing
    again (20 s) the real child replaces the first copy, which the replacement's warning names,
    and the second copy, listed there for the first time, is named in a warning of its own."""
    s = older_server()
    world = s.world
    copy_every_dispatch(world, after=3.0, hide_real_for=14.0)
    copied = world.dispatch

    def dispatch(file: str, ref: str, inputs: Mapping[str, object]) -> FakeRun | DispatchRefused:
        run = copied(file, ref, inputs)
        if not isinstance(run, DispatchRefused):
            world.dispatch_at(world.now() + 17.0, file, ref, inputs)
        return run

    world.dispatch = dispatch  # type: ignore[method-assign]  # the fake calls it per request
    result = s.run(post_step=False, invariants=False)
    assert result.exit_code == 0, result.log
    real, first_copy, second_copy = sorted(r.id for r in world.runs.values() if r.history)
    assert int(result.outputs["run-id"]) == real
    said = [
        (t, line) for t, line in result.log_lines if "::warning title=Run-name not unique::" in line
    ]
    assert [t for t, _ in said] == [FOUND + 5.0, FOUND + 5.0], said
    replaced, named = (line for _, line in said)
    assert f"run {real} with run-name" in replaced
    assert f"run {first_copy} was dispatched by someone else" in replaced
    assert f"3 runs are named {request_ids(result)[0]}: run {real}, created first" in named
    assert f"run(s) {second_copy} were dispatched by someone else" in named


@pytest.mark.found_by("review", issue=26)
def test_on_an_older_server_an_earlier_run_found_after_a_runner_was_seen_ends_the_sequence():
    """The copy already had a runner when the real child was listed: an error naming both, and
    both are cancelled and confirmed."""
    s = older_server()
    world = s.world
    world.pools[next(iter(world.pools))].runners = 2  # the copy gets a runner of its own
    copy_every_dispatch(world, after=3.0, hide_real_for=14.0)
    result = s.run(invariants=False)
    real, copy = real_and_copy(world)
    assert result.exit_code == 1
    assert len(dispatch_posts(world)) == 1
    error = next(line for line in result.log.splitlines() if line.startswith("::error"))
    assert f"run {real.id} with run-name {real.display_title} was created before run {copy.id}" in (
        error
    )
    assert "which already had a runner" in error
    for run in (real, copy):
        assert (run.status, run.conclusion) == ("completed", "cancelled"), run.id
        assert f"cleanup confirmed: child run {run.id}" in result.log


@pytest.mark.found_by("mutation", issue=35)
def test_an_earlier_run_listed_after_a_runner_was_seen_is_counted_as_such():
    s = older_server()
    world = s.world
    world.pools[next(iter(world.pools))].runners = 2  # the copy gets a runner of its own
    copy_every_dispatch(world, after=3.0, hide_real_for=14.0)
    result = s.run(post_step=False, invariants=False)
    assert result.exit_code == 1
    [entry] = attempts(result)
    assert entry["outcome"] == "an earlier run bears its run-name"
    timeline = result.summary.split("```mermaid", 1)[1]
    # the copy had a runner: the timeline shows it (a milestone, or an execution section)
    assert "runner acquired :milestone" in timeline or "execution :" in timeline, timeline


@pytest.mark.found_by("review", issue=26)
def test_on_an_older_server_a_copy_adopted_first_is_checked_as_at_startup_and_fails_at_once():
    """The copy, listed first, runs another commit: the startup window's first read fails the
    sequence; the post step lists again and cancels the real child too."""
    s = older_server(busy=True)  # CPU16 busy: both stay queued
    world = s.world
    world.change_workflow("runner-worker.yml", "main", at=2.0)  # the copy runs a newer commit
    copy_every_dispatch(world, after=3.0, hide_real_for=14.0)
    result = s.run(invariants=False)
    real, copy = real_and_copy(world)
    assert copy.head_sha != real.head_sha
    assert result.exit_code == 1
    assert len(dispatch_posts(world)) == 1
    error = next(line for line in result.log.splitlines() if line.startswith("::error"))
    assert f"child run {copy.id} is not the run that was dispatched: head_sha" in error
    first_read = min(e.time for e in world.ledger if e.path.endswith(f"/runs/{copy.id}"))
    assert copy.history is not None
    assert copy.history.cancel_requested_at == first_read, "fails at the first read"
    for run in (real, copy):
        assert run.history is not None
        assert run.history.conclusion == "cancelled", run.id
        assert named_over(result, run.id), run.id
    assert result.post_exit_code == 0
