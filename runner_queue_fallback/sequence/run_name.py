"""The older contract (API version 2022-11-28): a dispatch accepted without its run, found by name.

An older GitHub Enterprise Server answers a dispatch `204 No Content`: the run exists, but its id
is not in the reply. The only link between the request and its run is the run-name, the unique
request id. The run is looked for inside the startup window, at its cadence (first after 15 s,
then every 5 s) and never past its deadline; the dispatch is never sent again. The run found is
then watched like any other child: the startup window checks its whole identity.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from runner_queue_fallback import timing
from runner_queue_fallback.attempts import Attempt
from runner_queue_fallback.errors import TRANSIENT_ERRORS, GitHubError, SequenceError
from runner_queue_fallback.github.models import WorkflowRun
from runner_queue_fallback.sequence.context import Sequence

__all__ = ["CLOCK_SKEW_SECONDS", "dispatch_time", "find_dispatched_run"]

#: Runs are searched from the dispatch time minus this margin: the runner's clock and GitHub's
#: `created_at` may disagree (the same margin as the lost-reply search and the post step).
CLOCK_SKEW_SECONDS = 300.0


def dispatch_time(seq: Sequence, attempt: Attempt) -> datetime:
    """The wall-clock time the attempt's dispatch was sent (from the Clock, never the system)."""
    assert attempt.dispatched_at is not None  # noqa: S101  # set just before the dispatch
    return seq.clock.now() - timedelta(seconds=seq.clock.monotonic() - attempt.dispatched_at)


def find_dispatched_run(seq: Sequence, attempt: Attempt) -> None:
    """Find the run of an accepted dispatch by its run-name within the startup window.

    Found: it becomes the active child. Not found by the window's end: the sequence stops with
    the lost-dispatch error; the attempt stays in flight, so the post step looks for it again.
    """
    assert attempt.dispatched_at is not None  # noqa: S101  # set just before the dispatch
    deadline = attempt.dispatched_at + timing.STARTUP_WINDOW_SECONDS
    # One fixed lower bound: every search asks for the same URLs, so an unchanged page is a 304.
    since = dispatch_time(seq, attempt) - timedelta(seconds=CLOCK_SKEW_SECONDS)
    seq.report.log(
        f"Dispatch of {attempt.request_id} accepted without its run id (API version "
        f"{seq.client.version}): looking for the run named {attempt.request_id}"
    )
    seq.clock.sleep(timing.STARTUP_FIRST_CHECK_SECONDS)
    searches = 0
    while True:
        searches += 1
        run = _search(seq, attempt, since, deadline)
        if run is not None:
            attempt.found_by_run_name = True
            seq.set_active(attempt, run.id, run.html_url)
            seq.report.log(
                f"Found run {run.id} named {attempt.request_id} after {searches} search(es)"
            )
            return
        if seq.clock.monotonic() + timing.STARTUP_POLL_SECONDS > deadline:
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


def _search(
    seq: Sequence, attempt: Attempt, since: datetime, deadline: float
) -> WorkflowRun | None:
    """One search by run-name; the first run created wins, and any other is named in a warning.

    A transient failure is logged and the next search may still find the run; anything else
    (a refused permission, a missing workflow) stops the sequence, naming the run-name.
    """
    name = attempt.request_id
    try:
        runs = seq.client.find_runs_by_name(
            seq.inputs.workflow, name, created_after=since, deadline=deadline
        )
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
    if not runs:
        return None
    runs.sort(key=lambda run: (run.created_at, run.id))
    if len(runs) > 1:
        others = ", ".join(str(run.id) for run in runs[1:])
        seq.report.warning(
            f"{len(runs)} runs are named {attempt.request_id}: run {runs[0].id}, created first, "
            f"is the dispatched child; run(s) {others} were dispatched by someone else with the "
            "same run-name: check them",
            title="Run-name not unique",
        )
    return runs[0]
