"""The dispatch: rules the fixed mutation runner found held by no test (issue 35).

Each test states one rule of `sequence/dispatch.py` and fails when it breaks: a quota pause of
an earlier candidate does not move a later child's queue clock; a signal's search for a lost
dispatch ends when a listing is refused beyond the grace (said once, not sent again), and goes on
past a listing refused outright; a copy held as the child until the real one is listed is handed
over as a copy. Every test drives `cli.main` against the fake GitHub.
"""

from __future__ import annotations

from runner_queue_fallback import timing
from runner_queue_fallback.sim.faults import Fault
from runner_queue_fallback.sim.model import Workload
from runner_queue_fallback.simulation import SimulationRun
from tests.invariants import dispatch_posts
from tests.test_coordinator import FOREVER, Scenario
from tests.test_copies import coordinate, copy_every_dispatch, real_and_copy
from tests.test_quota import spend_all_at
from tests.test_rules import LOST, searches

#: The run-name search's listing (the workflow's runs).
LISTING = r"/workflows/[^/]+/runs$"
#: The signal comes before the main step's first look for the lost dispatch (at 5 s); the
#: search it starts looks first when the signal is handled.
SIGNAL_AT = 3.0


def _lines(result: SimulationRun, text: str) -> list[tuple[float, str]]:
    return [(t, line) for t, line in result.log_lines if text in line]


def test_a_quota_pause_of_an_earlier_candidate_does_not_move_the_next_childs_queue_clock():
    """Candidate 1 waits out a spent quota in its queue; candidate 2, dispatched after the reset,
    has its queue clock started at its first sighting, and is cancelled 10 min after it."""
    s = Scenario().pools(FOREVER, FOREVER, [])
    spend_all_at(s, 300.0)
    result = s.run(post_step=False)
    assert result.exit_code == 0, result.log
    assert "waited for a spent quota" in result.log
    second = dispatch_posts(s.world)[1]
    sighted = next(t for t, _ in _lines(result, "the queue clock starts") if t > second)
    assert sighted == second + timing.STARTUP_FIRST_CHECK_SECONDS
    cancels = s.cancels()
    assert cancels[1] == sighted + 600.0


def test_a_signals_search_ends_at_a_listing_refused_beyond_its_grace_said_once_and_not_resent():
    """SIGTERM during a lost dispatch; the listing is rate-limited for a minute, more than the
    grace: the search says why and stops (one listing), and warns that no run was found."""
    limited = Fault("secondary_rate_limit", method="GET", path=LISTING, retry_after=60)
    s = Scenario(faults=[LOST, limited]).pools(FOREVER, [], [])
    result = s.run(interrupt_at=SIGNAL_AT, post_step=False)
    assert result.exit_code == 1
    [look] = searches(s)
    [(said_at, said)] = _lines(result, "Looking for run-name rqf-")
    assert said_at == look
    assert "deadline window closed" in said
    assert "::warning title=Child run not found::" in result.log


def test_a_signals_search_goes_on_past_a_listing_refused_outright_and_cancels_the_run():
    """The first listing is refused (403): said, and the next look, half the grace later, finds
    the run and cancels it."""
    refused = Fault("forbidden", method="GET", path=LISTING, count=1)
    s = Scenario(faults=[LOST, refused]).pools(FOREVER, [], [])
    result = s.run(interrupt_at=SIGNAL_AT, post_step=False)
    assert result.exit_code == 1
    first, later = searches(s)
    assert later == first + timing.SIGNAL_CLEANUP_BUDGET_SECONDS / 2
    assert len(_lines(result, "Looking for run-name rqf-")) == 1
    assert s.cancels() == [later]
    assert "The step was cancelled during the dispatch: run " in result.log
    assert "Child run not found" not in result.log


def test_a_copy_held_as_the_child_until_the_real_one_is_listed_is_handed_over_as_a_copy():
    """A lost reply; the copy is listed 20 s before the real child: once the real one is listed,
    the copy held so far is saved for the post step among the copies."""
    s = Scenario(faults=[LOST], workload=Workload(duration=600.0)).pools([], [], [])
    copy_every_dispatch(s.world, after=3.0, hide_real_for=20.0)
    result = coordinate(s)
    real, copy = real_and_copy(s.world)
    assert result.state["child-run-id"] == str(real.id)
    assert result.state["child-copies"] == str(copy.id)
