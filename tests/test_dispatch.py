"""The dispatch (`action/sequence/dispatch.py`): the preflight before each dispatch, the dispatch
itself, a reply that was lost, and a signal that comes while the dispatch is in flight.

The preflight compares the child file's blob SHA, not workflow-ref's commit; a lost reply is
looked for by the run-name and never sent again; every run bearing the request id (copies by
someone else included) is cancelled, confirmed and named, the first created being the child; a
signal during the dispatch looks for its run within the grace, and a signal once the run is known
does not look at all; the child's links are saved for the post step. Every test drives
`cli.main` against the fake GitHub (`tests.scenario`).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from urllib.parse import parse_qs

import pytest

from runner_queue_fallback.core import timing
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings, Workload
from runner_queue_fallback.tools.simulate.steps import SimulationRun
from tests.invariants import children, dispatch_posts
from tests.scenario import (
    FOREVER,
    Scenario,
    attempts,
    copy_every_dispatch,
    minute_queues,
    named_over,
    real_and_copy,
)
from tests.test_fuzz_coordinator import Case, base_inputs, execute
from tests.test_quota import spend_all_at
from tests.test_rules import LOST, posts, searches

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


# -- the preflight before each dispatch ---------------------------------------------------------


@pytest.mark.found_by("audit", issue=26)
def test_an_unrelated_commit_on_workflow_ref_does_not_fail_the_sequence():
    """README (Preflight): the check compares the child file's blob SHA, not workflow-ref's commit.
    Another file changes on main between the dispatches: the fallback goes ahead, and its child
    runs at the new commit."""
    s = Scenario().pools(FOREVER, [], [])
    s.world.add_workflow("unrelated.yml", "main", name="Unrelated")
    first_commit = s.world.refs["heads/main"]
    s.world.change_workflow("unrelated.yml", "main", at=300.0)
    result = s.run()
    assert result.exit_code == 0, result.log
    first, second = children(s.world)
    assert s.world.refs["heads/main"] != first_commit
    heads = [s.world.runs[kid.run_id].head_sha for kid in (first, second)]
    assert heads == [first_commit, s.world.refs["heads/main"]]


# -- the child's links and queue clock, saved and started per dispatch --------------------------


@pytest.mark.found_by("mutation", issue=35)
def test_the_childs_run_link_is_saved_for_the_post_step():
    s = Scenario().pools([], [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 0, result.log
    [entry] = attempts(result)
    run_url = str(entry["run-url"])
    assert run_url.endswith(f"/actions/runs/{children(s.world)[0].run_id}")
    assert result.state["child-run-url"] == run_url


@pytest.mark.found_by("mutation", issue=35)
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


@pytest.mark.found_by("mutation", issue=35)
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


# -- a lost dispatch reply: looked up by run-name, never sent again -----------------------------


@pytest.mark.found_by("review", issue=15)
def test_lost_dispatch_reply_whose_run_never_appears():
    """A 502 to the dispatch with no run created: searched by run-name for 2 minutes, never re-sent."""
    w = minute_queues(watched=True).pools((), ())
    w.world.inject(Fault(kind="status", status=502, method="POST", path=r"/dispatches$", count=1))
    result = w.run()
    assert result.exit_code == 1
    assert "no run with run-name rqf-" in result.log
    assert "appeared within 2 minutes" in result.log
    assert len(dispatch_posts(w.world)) == 1
    assert children(w.world) == []


@pytest.mark.found_by("review", issue=26)
def test_after_a_lost_reply_every_run_bearing_the_request_id_is_cancelled_confirmed_and_named():
    """A copy dispatched 3 s after the real child: both cancelled and confirmed, both named.

    Before: the newest run listed was adopted, and only it was cancelled.
    """
    s = Scenario(faults=[LOST]).pools([], [], [])
    copy_every_dispatch(s.world, after=3.0)
    result = s.run(invariants=False)
    real, copy = real_and_copy(s.world)
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    for run in (real, copy):
        assert run.history is not None
        assert run.history.conclusion == "cancelled", run.id
        assert f"cleanup confirmed: child run {run.id}" in result.log
    error = next(line for line in result.log.splitlines() if line.startswith("::error"))
    assert f"runs {real.id}, {copy.id} bear run-name {real.display_title}" in error
    assert f"run {real.id} was created first" in error
    assert "::warning title=Run-name not unique::" in result.log
    assert result.state["child-run-id"] == str(real.id)
    assert result.state["child-copies"] == str(copy.id)
    same_name = (
        f"**Cleanup of a run with the same run-name:** cleanup confirmed: child run {copy.id}"
    )
    assert same_name in result.summary


@pytest.mark.found_by("review", issue=26)
def test_after_a_lost_reply_a_real_child_listed_late_is_still_cancelled():
    """The copy is listed first, the real child 20 s later: the listing goes on within the
    startup window, so both are cancelled (the real one as soon as it is listed)."""
    s = Scenario(faults=[LOST], workload=Workload(duration=600.0)).pools([], [], [])
    copy_every_dispatch(s.world, after=3.0, hide_real_for=20.0)
    result = s.run(invariants=False)
    real, copy = real_and_copy(s.world)
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    for run in (real, copy):
        assert run.history is not None
        assert run.history.conclusion == "cancelled", run.id
        assert f"cleanup confirmed: child run {run.id}" in result.log
    cancels = [e.time for e in s.world.ledger if e.path.endswith(f"/runs/{real.id}/cancel")]
    assert cancels[0] <= real.visible_at + timing.STARTUP_POLL_SECONDS, "cancelled once listed"
    assert result.state["child-run-id"] == str(real.id), "the run created first is the child"


@pytest.mark.found_by("mutation", issue=35)
def test_a_copy_held_as_the_child_until_the_real_one_is_listed_is_handed_over_as_a_copy():
    """A lost reply; the copy is listed 20 s before the real child: once the real one is listed,
    the copy held so far is saved for the post step among the copies."""
    s = Scenario(faults=[LOST], workload=Workload(duration=600.0)).pools([], [], [])
    copy_every_dispatch(s.world, after=3.0, hide_real_for=20.0)
    result = s.run(invariants=False)
    real, copy = real_and_copy(s.world)
    assert result.state["child-run-id"] == str(real.id)
    assert result.state["child-copies"] == str(copy.id)


# -- a signal during the dispatch, and once the child is known ----------------------------------


@pytest.mark.found_by("fuzz")
def test_signal_while_the_dispatch_is_in_flight_finds_and_cancels_the_child():
    """SIGTERM arrived while the dispatch POST was in flight (1 s of latency on every reply).

    Before: the POST had created the run, but the coordinator never learned its id: no cleanup,
    no state for the post step ("No child run was dispatched"), and the child was left queued
    without a word. Fix: the signal handler looks for the run by its unique run-name within the
    signal grace, cancels it, and hands its id to the post step; if the run cannot be found it
    says so by run-name.
    """
    case = Case(
        inputs=base_inputs({"queue-timeout-minutes": "1.5", "execution-timeout-minutes": "1"}),
        timings=Timings(latency=1.0),
        interrupt_at=4.3,
        guard=False,
    )
    outcome = execute(case)
    run = outcome.run
    assert outcome.observed.interrupted_at is not None
    [kid] = children(outcome.world)
    assert run.state["child-run-id"] == str(kid.run_id)
    # The post step lists by run-name again first: by then the main step's cancel has landed.
    assert (
        f"cleanup confirmed: child run {kid.run_id}" in run.log + run.post_log
        or f"Child run {kid.run_id} is already completed" in run.post_log
    )
    assert kid.conclusion == "cancelled"


def test_a_signal_during_the_wait_after_a_refused_dispatch_looks_for_no_run():
    """The secondary limit refused the POST (no run was made); the signal comes during
    admission's wait: nothing is in flight, so neither step lists runs by run-name."""
    refused = Fault(kind="secondary_rate_limit", method="POST", path=r"/dispatches$", count=1)
    case = Case(
        inputs=base_inputs({"queue-timeout-minutes": "1.5", "execution-timeout-minutes": "1"}),
        timings=Timings(latency=1.0),
        faults=(refused,),
        interrupt_at=30.0,
        guard=False,
    )
    outcome = execute(case)
    assert outcome.observed.interrupted_at is not None
    assert [e.status for e in outcome.world.ledger if e.path.endswith("/dispatches")] == [403]
    assert [e for e in outcome.world.ledger if re.search(LISTING, e.path)] == []
    assert children(outcome.world) == []
    assert outcome.run.outputs["attempts"] == "0"


def test_a_signal_during_the_dispatch_sent_again_after_a_rate_limit_finds_its_child():
    """The first POST was refused by the secondary limit; the signal comes while the same
    request id is sent again: that one may have made a run, so it counts as a dispatch sent, is
    looked for by its run-name, and its child is cancelled."""
    refused = Fault(kind="secondary_rate_limit", method="POST", path=r"/dispatches$", count=1)

    def case(interrupt_at: float | None) -> Case:
        return Case(
            inputs=base_inputs({"queue-timeout-minutes": "1.5", "execution-timeout-minutes": "1"}),
            timings=Timings(latency=1.0),
            faults=(refused,),
            interrupt_at=interrupt_at,
            guard=False,
        )

    first, again = dispatch_posts(execute(case(None)).world)[:2]  # where the second POST lands
    outcome = execute(case(again + 0.3))  # its reply comes a second after it is served
    run = outcome.run
    assert [e.status for e in outcome.world.ledger if e.path.endswith("/dispatches")] == [403, 200]
    [kid] = children(outcome.world)
    assert run.outputs["attempts"] == "1"
    assert run.state.get("refused-request-id", "") == ""  # the refusal no longer stands
    assert run.state["child-run-id"] == str(kid.run_id)
    assert kid.conclusion == "cancelled"
    assert first < again


@pytest.mark.found_by("review", issue=26)
def test_a_signal_during_the_dispatch_cancels_confirms_and_names_every_run_bearing_its_id():
    """SIGTERM while the POST is in flight; a copy 1 s after the real child: both are cancelled
    in the grace, and confirmed by the main step or the post step."""
    s = Scenario(timings=Timings(latency=1.0)).pools(FOREVER, [], [])
    copy_every_dispatch(s.world, after=1.0)
    result = s.run(invariants=False, interrupt_at=4.3)
    real, copy = real_and_copy(s.world)
    [posted] = dispatch_posts(s.world)
    delivered = posted + 1.0  # the signal is handled once the POST's reply (1 s latency) is in
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 1
    for run in (real, copy):
        assert run.history is not None
        assert run.history.conclusion == "cancelled", run.id
        assert named_over(result, run.id), run.id
        cancels = [e.time for e in s.world.ledger if e.path.endswith(f"/runs/{run.id}/cancel")]
        assert cancels[0] <= delivered + timing.SIGNAL_CLEANUP_BUDGET_SECONDS, "in the grace"
    assert f"runs {real.id}, {copy.id} bear run-name" in result.log
    assert result.state["child-found-by-name"] == real.display_title


@pytest.mark.found_by("mutation", issue=35)
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


@pytest.mark.found_by("mutation", issue=35)
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


@pytest.mark.found_by("mutation", issue=35)
def test_once_the_childs_run_is_known_a_later_signal_does_not_search_for_it_by_run_name():
    """The dispatch reply named the run: a SIGTERM 400 s later (past the run-name search's 300 s
    look-back) cancels that run at once, lists no runs and warns of no missing child."""
    s = Scenario(timings=Timings(cancel_delay=3.0)).pools(FOREVER, [], [])
    result = s.run(interrupt_at=400.0, post_step=False)
    [kid] = children(s.world)
    assert result.exit_code == 1
    assert "SIGTERM" in result.log
    assert searches(s) == []
    [(_, cancel)] = posts(s, "/cancel")
    [signalled, *_] = s.requests_after(400.0)
    assert cancel == signalled, "the cancel is the first request after the signal"
    assert "Child run not found" not in result.log
    assert f"cleanup confirmed: child run {kid.run_id}" in result.log
