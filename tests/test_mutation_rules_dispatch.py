"""The dispatch: rules the fixed mutation runner found held by no test (issue 35).

Each test states one rule of `action/sequence/dispatch.py` and fails when it breaks: a quota pause of
an earlier candidate does not move a later child's queue clock; a signal's search for a lost
dispatch ends when a listing is refused beyond the grace (said once, not sent again), and goes on
past a listing refused outright; a copy held as the child until the real one is listed is handed
over as a copy; the child's run link is saved for the post step, and a fallback's child does
not inherit the job link of the one before it. Every test drives `cli.main` against the fake
GitHub.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from urllib.parse import parse_qs

from runner_queue_fallback.core import timing
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Workload
from runner_queue_fallback.tools.simulate.steps import SimulationRun
from tests.invariants import children, dispatch_posts
from tests.test_coordinator import FOREVER, Scenario, attempts
from tests.test_copies import coordinate, copy_every_dispatch, real_and_copy
from tests.test_quota import spend_all_at
from tests.test_rules import LOST, searches

#: The run-name search's listing (the workflow's runs).
LISTING = r"/workflows/[^/]+/runs$"
#: The signal comes before the main step's first look for the lost dispatch (at 5 s); the
#: search it starts looks first when the signal is handled.
SIGNAL_AT = 3.0
#: Candidate 1 queued for good: cancelled at its deadline (615 s), confirmed 5 s later, and
#: candidate 2 dispatched then.
SECOND_DISPATCH = 620.0


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
    # runs created since the dispatch less 5 minutes (the time the POST was sent, not now)
    [posted] = dispatch_posts(s.world)
    listing = next(e for e in s.world.ledger if re.search(LISTING, e.path))
    [created] = parse_qs(listing.query)["created"]
    sent = s.world.clock.now() - timedelta(seconds=s.world.now() - posted)
    since = sent.replace(microsecond=0) - timedelta(minutes=5)
    assert datetime.fromisoformat(created.removeprefix(">=")) == since
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


def test_the_childs_run_link_is_saved_for_the_post_step():
    s = Scenario().pools([], [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 0, result.log
    [entry] = attempts(result)
    run_url = str(entry["run-url"])
    assert run_url.endswith(f"/actions/runs/{children(s.world)[0].run_id}")
    assert result.state["child-run-url"] == run_url


def test_a_fallbacks_child_does_not_inherit_the_job_link_of_the_child_before_it():
    """Candidate 1's job was seen (its link saved); candidate 2 is dispatched, and a SIGTERM
    comes before its job is seen: the post step is left no link, not candidate 1's."""
    s = Scenario().pools(FOREVER, FOREVER, [])
    first = s.run(post_step=False, interrupt_at=400.0)
    assert first.state["child-job-url"], "candidate 1's job link was saved"
    s = Scenario().pools(FOREVER, FOREVER, [])
    result = s.run(post_step=False, interrupt_at=SECOND_DISPATCH + 2.0)
    assert len(dispatch_posts(s.world)) == 2
    assert result.state["child-run-id"] == str(children(s.world)[1].run_id)
    assert result.state["child-job-url"] == ""
