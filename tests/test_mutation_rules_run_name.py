"""The older server's search by run-name: rules the fixed mutation runner found held by no test
(issue 35).

Each test states one rule of `action/sequence/run_name.py` and fails when it breaks: the search says
what it does, asks for runs from the dispatch less 5 minutes, counts the lost run in the
attempts, says a failed search and stops on a refused one, and a quota pause says how much
of its window was left; the listing again says when it
fails, names a copy it finds, and when an earlier run replaces the child (or ends the sequence)
the attempts, the state and the queue clock follow the new child, and a third run it lists
then is named too. Every test drives `cli.main` against the fake GitHub on an older server
(dispatch answers 204), as `tests/test_copies.py`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from urllib.parse import parse_qs

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import DispatchRefused
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import FakeRun, Timings
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import SimulationRun, run_coordinator
from tests.invariants import dispatch_posts
from tests.test_coordinator import Scenario
from tests.test_copies import copy_every_dispatch, real_and_copy
from tests.test_older_server import inputs as older_inputs
from tests.test_older_server import older_world
from tests.test_quota import spend_all_at

LISTING = r"/actions/workflows/[^/]+/runs$"
#: The first search comes 15 s after the dispatch; the listing again 5 s after the find.
FOUND = 15.0


def older(
    *faults: Fault,
    busy: bool = False,
    copy_after: float | None = None,
    hide_real: float = 0.0,
    interrupt_at: float | None = None,
) -> tuple[FakeGitHub, SimulationRun]:
    """The main step on an older server, CPU16 free unless `busy`; a copy `copy_after` s later."""
    clock = FakeClock()
    world, sha = older_world(clock, cpu16_busy=busy)
    world.on_worker_start = None
    for fault in faults:
        world.faults.add(fault)
    if copy_after is not None:
        copy_every_dispatch(world, after=copy_after, hide_real_for=hide_real)
    inputs = older_inputs(sha)
    result = run_coordinator(
        world, clock, inputs, main=cli.main, post_step=False, interrupt_at=interrupt_at
    )
    return world, result


def attempts(result: SimulationRun) -> list[dict[str, object]]:
    return json.loads(result.outputs["attempts-json"])  # type: ignore[no-any-return]  # objects


def request_ids(result: SimulationRun) -> list[str]:
    """The request ids the main step dispatched, in order (its run-names)."""
    return re.findall(r"Dispatch of (rqf-[\w-]+) accepted without its run id", result.log)


def warnings(result: SimulationRun, title: str) -> list[str]:
    return [line for line in result.log.splitlines() if f"::warning title={title}::" in line]


def test_the_search_says_what_it_looks_for_and_from_when():
    """Candidate 2 (CPU16 busy for its minute): its search asks for runs created since its
    dispatch less 5 minutes, on the coordinator's clock."""
    world, result = older(busy=True)
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


def test_a_run_never_listed_is_counted_as_a_dispatch_accepted_and_its_run_not_found():
    clock = FakeClock()
    world, sha = older_world(clock, listing_delay=150.0, cpu16_busy=False)
    world.on_worker_start = None
    result = run_coordinator(world, clock, older_inputs(sha), main=cli.main, post_step=False)
    assert result.exit_code == 1
    assert [a["outcome"] for a in attempts(result)] == ["dispatch accepted, run not found"]


def test_a_search_that_fails_once_is_said_and_the_next_one_finds_the_run():
    failing = Fault("status", status=502, method="GET", path=LISTING, count=3)  # and 2 retries
    _, result = older(failing)
    assert result.exit_code == 0, result.log
    assert re.search(r"Looking for run-name rqf-[\w-]+: GET ", result.log)
    assert "after 2 search(es)" in result.log


def test_a_search_refused_outright_stops_the_sequence_naming_the_run_name():
    _, result = older(Fault("forbidden", method="GET", path=LISTING))
    assert result.exit_code == 1
    [request_id] = request_ids(result)
    error = next(line for line in result.log.splitlines() if line.startswith("::error"))
    assert f"the dispatch of {request_id} was accepted without its run id, and looking" in error
    assert "failed: GET " in error
    assert [a["outcome"] for a in attempts(result)] == ["dispatch accepted, run not found"]


def test_a_listing_again_that_fails_is_said_and_the_child_is_followed_as_found():
    """The listing at 20 s is refused: said; the child found at 15 s is read once, not again."""
    refused = Fault("forbidden", method="GET", path=LISTING, start=FOUND + 1.0, count=1)
    world, result = older(refused)
    assert result.exit_code == 0, result.log
    assert re.search(r"Listing run-name rqf-[\w-]+ again: GET ", result.log)
    child = int(result.outputs["run-id"])
    reads = [e.time for e in world.ledger if e.path.endswith(f"/actions/runs/{child}")]
    assert reads[:2] == [FOUND, FOUND + 5.0 + 60.0], "one read at the find, then execution's"


def test_a_copy_first_listed_at_the_listing_again_is_named_then():
    """A copy dispatched 16 s after the child is listed only at the listing again (20 s)."""
    world, result = older(copy_after=16.0)
    assert result.exit_code == 0, result.log
    real, copy = real_and_copy(world)
    [warning] = warnings(result, "Run-name not unique")
    assert f"run(s) {copy.id} were dispatched by someone else" in warning
    said = next(t for t, line in result.log_lines if "Run-name not unique" in line)
    assert said == FOUND + 5.0
    reads = [e.time for e in world.ledger if e.path.endswith(f"/actions/runs/{real.id}")]
    assert reads[:2] == [FOUND, FOUND + 5.0 + 60.0], "the child is not read again at the relisting"


def test_an_earlier_run_listed_late_replaces_the_child_in_the_state_and_restarts_the_queue():
    """The copy is listed first; at the listing again the real child replaces it: one warning
    names the copy; the post step is told the child was found by run-name; the real child's
    queue clock starts when its job is first seen."""
    world, result = older(busy=True, copy_after=3.0, hide_real=14.0)
    real, copy, *_ = sorted(run.id for run in world.runs.values() if run.history)  # candidate 1's
    said = warnings(result, "Run-name not unique")
    assert len([w for w in said if str(copy) in w]) == 1, said
    assert f"Worker job of child {real} is queued: the queue clock starts" in result.log
    # a SIGTERM once the real child replaced the copy: the post step is to list again
    _, result = older(copy_after=3.0, hide_real=14.0, interrupt_at=30.0)
    assert result.exit_code == 1
    assert result.state["child-found-by-name"] == request_ids(result)[0]


def test_a_third_run_listed_when_an_earlier_run_replaces_the_child_is_named_as_a_copy_too():
    """Copies at 3 s (listed first: the real child shows 14 s late) and at 17 s: at the listing
    again (20 s) the real child replaces the first copy, which the replacement's warning names,
    and the second copy, listed there for the first time, is named in a warning of its own."""
    clock = FakeClock()
    world, sha = older_world(clock, cpu16_busy=False)
    world.on_worker_start = None
    copy_every_dispatch(world, after=3.0, hide_real_for=14.0)
    copied = world.dispatch

    def dispatch(file: str, ref: str, inputs: Mapping[str, object]) -> FakeRun | DispatchRefused:
        run = copied(file, ref, inputs)
        if not isinstance(run, DispatchRefused):
            world.dispatch_at(world.now() + 17.0, file, ref, inputs)
        return run

    world.dispatch = dispatch  # type: ignore[method-assign]  # the fake calls it per request
    result = run_coordinator(world, clock, older_inputs(sha), main=cli.main, post_step=False)
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


def test_an_earlier_run_listed_after_a_runner_was_seen_is_counted_as_such():
    clock = FakeClock()
    world, sha = older_world(clock, cpu16_busy=False)
    world.on_worker_start = None
    world.pools[next(iter(world.pools))].runners = 2  # the copy gets a runner of its own
    copy_every_dispatch(world, after=3.0, hide_real_for=14.0)
    result = run_coordinator(world, clock, older_inputs(sha), main=cli.main, post_step=False)
    assert result.exit_code == 1
    [entry] = attempts(result)
    assert entry["outcome"] == "an earlier run bears its run-name"
    timeline = result.summary.split("```mermaid", 1)[1]
    # the copy had a runner: the timeline shows it (a milestone, or an execution section)
    assert "runner acquired :milestone" in timeline or "execution :" in timeline, timeline


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
