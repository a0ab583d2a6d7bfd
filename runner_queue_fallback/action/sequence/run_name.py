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

from runner_queue_fallback.action.attempts import Attempt, AttemptState
from runner_queue_fallback.action.cleanup import RunNameSearch
from runner_queue_fallback.action.sequence.facts import (
    Became,
    ChildFound,
    ChildReplaced,
    EarlierRun,
    FoundByName,
    Next,
    Phase,
    PhaseResult,
    RelistDone,
    RunUnseen,
)
from runner_queue_fallback.action.sequence.quota_pause import through_quota
from runner_queue_fallback.action.sequence.state import SequenceState, seconds
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.errors import (
    TRANSIENT_ERRORS,
    GitHubError,
    QuotaSpent,
    SequenceError,
)
from runner_queue_fallback.core.request_id import created_since
from runner_queue_fallback.github.models import WorkflowRun

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


def dispatch_time(seq: SequenceState, attempt: Attempt) -> datetime:
    """The wall-clock time the attempt's dispatch was sent (from the Clock, never the system)."""
    assert attempt.dispatched_at is not None  # noqa: S101  # set just before the dispatch
    return seq.clock.now() - timedelta(seconds=seq.clock.monotonic() - attempt.dispatched_at)


def named_search(seq: SequenceState, attempt: Attempt) -> RunNameSearch:
    """Every run bearing the attempt's request id, created since its dispatch less the margin.

    Or since the time the request id states (GitHub's clock) when that is earlier: a runner's
    clock ahead of GitHub's by more than the margin would search from after the run's creation.
    One fixed lower bound: every search asks for the same URLs, so an unchanged page is a 304.
    """
    since = dispatch_time(seq, attempt) - timedelta(seconds=CLOCK_SKEW_SECONDS)
    since = created_since(attempt.request_id, since)
    return RunNameSearch(seq.client, seq.inputs.workflow, attempt.request_id, since)


def find_dispatched_run(seq: SequenceState, attempt: Attempt) -> Phase[PhaseResult | None]:
    """Find the run of an accepted dispatch by its run-name within the startup window.

    Found (None): the run created first becomes the active child, to be listed once more at the
    next poll (`relist`). Not found by the window's end: the result ends the sequence with the
    lost-dispatch error; the attempt stays in flight, so the post step looks for it again.
    """
    assert attempt.dispatched_at is not None  # noqa: S101  # set just before the dispatch
    yield RunUnseen()  # the run exists: never abandoned to the quota
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
            run = through_quota(
                seq,
                lambda: _search(seq, attempt, search, window()),
                lambda: search_paused(seq, attempt, window()),
            )
        except QuotaSpent as exc:
            seq.report.log(f"Looking for run-name {attempt.request_id}: {exc}")
            run = None
        except _SearchFailed as failed:
            return PhaseResult(
                Next.OVER, error=failed.error, facts=(Became(AttemptState.RUN_NOT_FOUND),)
            )
        if run is not None:
            yield ChildFound(run.id, run.html_url, by_name=True)
            yield FoundByName(search, seq.clock.monotonic() + timing.STARTUP_POLL_SECONDS)
            seq.report.log(
                f"Found run {run.id} named {attempt.request_id} after {searches} search(es)"
            )
            return None
        if seq.clock.monotonic() + timing.STARTUP_POLL_SECONDS > window():
            break
        seq.clock.sleep(timing.STARTUP_POLL_SECONDS)
    error = SequenceError(
        f"the dispatch of {attempt.request_id} was accepted without its run id (API version "
        f"{seq.client.version}), and no run with run-name {attempt.request_id} appeared within "
        f"2 minutes ({searches} searches); it is not dispatched again and no other pool is "
        f"tried. If a run named {attempt.request_id} appears later, cancel it (the post step "
        "looks for it again)"
    )
    return PhaseResult(Next.OVER, error=error, facts=(Became(AttemptState.RUN_NOT_FOUND),))


def search_paused(seq: SequenceState, attempt: Attempt, deadline: float) -> str:
    """What a spent quota pauses while the run is looked for by its run-name, for a log line."""
    left = seconds(max(0.0, deadline - seq.clock.monotonic()))
    return f"the search for run-name {attempt.request_id} ({left} of its window left)"


def relist(seq: SequenceState, attempt: Attempt, *, runner_seen: bool) -> Phase[bool]:
    """The one listing again, at the next poll after the child was found by its run-name.

    A run created before the child is the real one (the listing showed it late): before any
    runner was seen it replaces the child, which is named as a copy (True: the startup window
    checks the new child's identity); after a runner was seen the sequence ends, naming both,
    and cleanup cancels both. Any other new run bearing the request id is named in a warning.
    """
    search = seq.by_name
    yield RelistDone()
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
        yield EarlierRun(first.id, seq.clock.monotonic())
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
    yield ChildFound(first.id, first.html_url, by_name=True)
    yield ChildReplaced()
    _name_others(seq, attempt, search, first)
    return True


class _SearchFailed(Exception):  # carries the error out of the read the quota may pause
    """Looking for the run failed for a reason other than a transient one: the sequence stops."""

    def __init__(self, error: SequenceError) -> None:
        """Carry `error`, which ends the sequence."""
        super().__init__(str(error))
        self.error = error


def _search(
    seq: SequenceState, attempt: Attempt, search: RunNameSearch, deadline: float
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
        raise _SearchFailed(
            SequenceError(
                f"the dispatch of {name} was accepted without its run id, and looking for its run "
                f"failed: {exc}; no run with run-name {name} appeared to the coordinator, and it is "
                f"not dispatched again. If a run named {name} exists, cancel it (the post step looks "
                "for it again)"
            )
        ) from None
    if not search.found:
        return None
    first = search.ordered[0]
    _name_others(seq, attempt, search, first)
    return first


def _name_others(
    seq: SequenceState, attempt: Attempt, search: RunNameSearch, child: WorkflowRun
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
