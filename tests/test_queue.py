"""The queue (`action/sequence/queue.py`): the child waits for a runner until its deadline.

While queued, the queue clock starts at the job's `created_at` (after a quota pause too, saying
how long ago that was); the source is checked even under `pinned-after-start`; a 404 or a change
of identity after the startup window stops the sequence at once; at the deadline a fresh read
that finds a runner keeps the child; a sequence that ends while the child waits counts the
attempt as queued. Every test drives `cli.main` against the fake GitHub (`tests.scenario`).
"""

from __future__ import annotations

import pytest

from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import SOURCE_REF
from tests.invariants import children, dispatch_posts
from tests.outside import child_run_id, json_body, with_json
from tests.scenario import FOREVER, Scenario, attempts, cancels, minute_queues
from tests.test_quota import spend_all_at

# -- the queue clock ----------------------------------------------------------------------------


@pytest.mark.found_by("mutation", issue=35)
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


# -- checks while queued: source, identity, the run itself --------------------------------------


@pytest.mark.found_by("review", issue=15)
def test_pinned_after_start_still_checks_the_source_while_queued():
    """`pinned-after-start` exempts only an allocated worker: a queued child's source is checked."""
    w = minute_queues(watched=True).pools(FOREVER, ())
    w.world.move_ref(SOURCE_REF.removeprefix("refs/"), at=40.0)
    result = w.run({"source-policy": "pinned-after-start"})
    assert result.exit_code == 1
    assert "moved" in result.log
    assert children(w.world)[0].conclusion == "cancelled"


@pytest.mark.found_by("review", issue=15)
def test_404_after_startup_fails_at_once():
    """A 404 for the child after the startup window is not retried: the sequence stops."""
    w = minute_queues(watched=True).pools(FOREVER, ())
    w.world.inject(
        Fault(
            kind="status",
            status=404,
            method="GET",
            path=r"/actions/runs/9\d{9}$",
            start=50.0,
            count=1,
        )
    )
    result = w.run()
    assert result.exit_code == 1
    assert "404" in result.log
    assert len(dispatch_posts(w.world)) == 1


@pytest.mark.found_by("review", issue=15)
def test_a_later_identity_change_fails_at_once():
    """After startup, a run-name that changes to another value stops the sequence at once."""
    w = minute_queues(watched=True).pools(FOREVER, ())

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        run_id = child_run_id(path, world)
        body = json_body(reply)
        if run_id and isinstance(body, dict) and "display_title" in body and world.now() > 50:
            return with_json(reply, {**body, "display_title": "someone-else"})
        return None

    w.tamper.rules.append(rule)
    result = w.run()
    assert result.exit_code == 1
    assert "not the run that was dispatched" in result.log
    assert "'someone-else'" in result.log
    assert len(dispatch_posts(w.world)) == 1


@pytest.mark.found_by("mutation", issue=35)
def test_a_sequence_ended_while_its_child_waits_in_the_queue_counts_the_attempt_as_queued():
    """Every read of the child is refused from 100 s on (a permission taken away): the attempt
    ends as it was, queued."""
    refused = Fault("forbidden", method="GET", path=r"/actions/runs/9\d{9}$", start=100.0)
    s = Scenario(faults=[refused]).pools(FOREVER, [], [])
    result = s.run(post_step=False)
    assert result.exit_code == 1
    assert [a["outcome"] for a in attempts(result)] == ["queued"]


# -- the deadline -------------------------------------------------------------------------------


def deadline_of_first_child() -> float:
    """When the first child's queue deadline is reached (the fresh read), with 0.25 s latency."""
    w = minute_queues(watched=True, timings=Timings(latency=0.25)).pools(FOREVER, ())
    result = w.run()
    return next(t for t, line in result.log_lines if "Queue deadline of" in line)


@pytest.mark.found_by("review", issue=15)
def test_fresh_read_at_the_deadline_finding_a_runner_does_not_cancel():
    """A runner arrives between the last queue poll and the fresh read: no cancel, no fallback."""
    deadline = deadline_of_first_child()
    w = minute_queues(watched=True, timings=Timings(latency=0.25)).pools(
        ((0.0, deadline - 0.1),), FOREVER
    )
    result = w.run()
    assert result.exit_code == 0, result.log
    assert cancels(w.world) == []
    assert len(dispatch_posts(w.world)) == 1
    assert "fresh read before cancelling" in result.log
