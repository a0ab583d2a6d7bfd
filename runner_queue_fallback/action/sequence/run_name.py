"""The older contract (API version 2022-11-28): a dispatch accepted without its run, found by name.

An older GitHub Enterprise Server answers a dispatch `204 No Content`: the run exists, but its id
is not in the reply. The only link between the request and its run is the run-name, the unique
request id. The run is looked for inside the startup window, at its cadence (first after 15 s,
then every 5 s) and never past its deadline; the dispatch is never sent again. Anyone who may
dispatch the child can copy its inputs, so every run bearing the request id is considered: the
one created first is the child, and it is listed once more at the next poll (a listing that lags
may show a copy first). The run found is then watched like any other child: the startup window
checks its whole identity.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from runner_queue_fallback.action.attempts import Attempt
from runner_queue_fallback.action.cleanup import RunNameSearch
from runner_queue_fallback.action.sequence.context import Sequence, seconds
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.errors import (
    TRANSIENT_ERRORS,
    GitHubError,
    QuotaSpent,
    SequenceError,
)
from runner_queue_fallback.core.request_id import created_since
from runner_queue_fallback.github.models import WorkflowRun
from runner_queue_fallback.github.retry import Patience

__all__ = [
    "CLOCK_SKEW_SECONDS",
    "dispatch_time",
    "find_dispatched_run",
    "named_search",
    "relist",
    "search_paused",
]

#: Runs are searched from the dispatch time minus this margin: the runner's clock and GitHub's
#: `created_at` may disagree (the same margin as the lost-reply search and the post step).
CLOCK_SKEW_SECONDS = 300.0


def dispatch_time(seq: Sequence, attempt: Attempt) -> datetime:
    """The wall-clock time the attempt's dispatch was sent (from the Clock, never the system)."""
    assert attempt.dispatched_at is not None  # noqa: S101  # set just before the dispatch
    return seq.clock.now() - timedelta(seconds=seq.clock.monotonic() - attempt.dispatched_at)


def named_search(seq: Sequence, attempt: Attempt) -> RunNameSearch:
    """Every run bearing the attempt's request id, created since its dispatch less the margin.

    Or since the time the request id states (GitHub's clock) when that is earlier: a runner's
    clock ahead of GitHub's by more than the margin would search from after the run's creation.
    One fixed lower bound: every search asks for the same URLs, so an unchanged page is a 304.
    """
    since = dispatch_time(seq, attempt) - timedelta(seconds=CLOCK_SKEW_SECONDS)
    since = created_since(attempt.request_id, since)
    return RunNameSearch(seq.client, seq.inputs.workflow, attempt.request_id, since)


def find_dispatched_run(seq: Sequence, attempt: Attempt) -> None:
    """Find the run of an accepted dispatch by its run-name within the startup window.

    Found: the run created first becomes the active child, to be listed once more at the next
    poll (`relist`). Not found by the window's end: the sequence stops with the lost-dispatch
    error; the attempt stays in flight, so the post step looks for it again.
    """
    assert attempt.dispatched_at is not None  # noqa: S101  # set just before the dispatch
    seq.client.patience = Patience.CHILD_EXISTS  # the run exists: never abandoned to the quota
    window = seq.startup_window(attempt)
    search = named_search(seq, attempt)
    seq.report.log(
        f"Dispatch of {attempt.request_id} accepted without its run id (API version "
        f"{seq.client.version}): looking for the run named {attempt.request_id}"
    )
    seq.clock.sleep(timing.STARTUP_FIRST_CHECK_SECONDS)
    searches = 0
    while True:
        searches += 1
        try:  # a search the spent quota stopped is sent again at its reset
            run = seq.through_quota(
                lambda: _search(seq, attempt, search, window()),
                lambda: search_paused(seq, attempt, window()),
            )
        except QuotaSpent as exc:
            seq.report.log(f"Looking for run-name {attempt.request_id}: {exc}")
            run = None
        if run is not None:
            attempt.found_by_run_name = True
            seq.set_active(attempt, run.id, run.html_url, by_name=True)
            seq.by_name = search
            seq.relist_at = seq.clock.monotonic() + timing.STARTUP_POLL_SECONDS
            seq.report.log(
                f"Found run {run.id} named {attempt.request_id} after {searches} search(es)"
            )
            return
        if seq.clock.monotonic() + timing.STARTUP_POLL_SECONDS > window():
            break
        seq.clock.sleep(timing.STARTUP_POLL_SECONDS)
    attempt.outcome = "dispatch accepted, run not found"
    raise SequenceError(
        f"the dispatch of {attempt.request_id} was accepted without its run id (API version "
        f"{seq.client.version}), and no run with run-name {attempt.request_id} appeared within "
        f"2 minutes ({searches} searches); it is not dispatched again and no other pool is "
        f"tried. If a run named {attempt.request_id} appears later, cancel it (the post step "
        "looks for it again)"
    )


def search_paused(seq: Sequence, attempt: Attempt, deadline: float) -> str:
    """What a spent quota pauses while the run is looked for by its run-name, for a log line."""
    left = seconds(max(0.0, deadline - seq.clock.monotonic()))
    return f"the search for run-name {attempt.request_id} ({left} of its window left)"


def relist(seq: Sequence, attempt: Attempt, *, runner_seen: bool) -> bool:
    """The one listing again, at the next poll after the child was found by its run-name.

    A run created before the child is the real one (the listing showed it late): before any
    runner was seen it replaces the child, which is named as a copy (True: the startup window
    checks the new child's identity); after a runner was seen the sequence ends, naming both,
    and cleanup cancels both. Any other new run bearing the request id is named in a warning.
    """
    search, seq.relist_at = seq.by_name, None
    assert search is not None  # noqa: S101  # set with relist_at
    assert attempt.run_id is not None  # noqa: S101  # found by run-name
    name, held = attempt.request_id, attempt.run_id
    try:
        search.look(None)
    except GitHubError as exc:
        seq.report.log(f"Listing run-name {name} again: {exc}")
        return False
    first = search.ordered[0]
    if first.id == held:
        _name_others(seq, attempt, search, first)
        return False
    search.named.add(held)
    if runner_seen:
        seq.add_other(first.id)
        attempt.outcome = "an earlier run bears its run-name"
        attempt.allocated_at = attempt.allocated_at or seq.clock.monotonic()  # it had a runner
        raise SequenceError(
            f"run {first.id} with run-name {name} was created before run {held}, the child "
            f"being watched, which already had a runner: run {first.id} is the dispatched child "
            f"and run {held} a copy someone else dispatched. Both are cancelled; check both; no "
            "other pool is tried"
        )
    seq.report.warning(
        f"run {first.id} with run-name {name}, listed late, was created before run {held}: it "
        f"is the dispatched child and is watched from now on; run {held} was dispatched by "
        "someone else with the same run-name: check it",
        title="Run-name not unique",
    )
    seq.set_active(attempt, first.id, first.html_url, by_name=True)
    attempt.queued_at, seq.last_queued_read, attempt.outcome = None, None, "dispatched"
    _name_others(seq, attempt, search, first)
    return True


def _search(
    seq: Sequence, attempt: Attempt, search: RunNameSearch, deadline: float
) -> WorkflowRun | None:
    """One search by run-name; the first run created wins, and any other is named in a warning.

    A transient failure is logged and the next search may still find the run; anything else
    (a refused permission, a missing workflow) stops the sequence, naming the run-name.
    """
    name = attempt.request_id
    try:
        search.look(deadline)
    except QuotaSpent:
        raise  # the caller pauses for the reset
    except TRANSIENT_ERRORS as exc:
        seq.report.log(f"Looking for run-name {name}: {exc}")
        return None
    except GitHubError as exc:
        attempt.outcome = "dispatch accepted, run not found"
        raise SequenceError(
            f"the dispatch of {name} was accepted without its run id, and looking for its run "
            f"failed: {exc}; no run with run-name {name} appeared to the coordinator, and it is "
            f"not dispatched again. If a run named {name} exists, cancel it (the post step looks "
            "for it again)"
        ) from None
    if not search.found:
        return None
    first = search.ordered[0]
    _name_others(seq, attempt, search, first)
    return first


def _name_others(
    seq: Sequence, attempt: Attempt, search: RunNameSearch, child: WorkflowRun
) -> None:
    """Every run bearing the request id besides the child is named in a warning, once."""
    others = [run.id for run in search.ordered if run.id != child.id and run.id not in search.named]
    if not others:
        return
    search.named.update(others)
    seq.report.warning(
        f"{len(search.found)} runs are named {attempt.request_id}: run {child.id}, created "
        f"first, is the dispatched child; run(s) {', '.join(map(str, others))} were dispatched by "
        "someone else with the same run-name: check them",
        title="Run-name not unique",
    )
