"""Before and at dispatch: the checks that gate it, the one POST, and a lost reply's recovery.

"The workflow-definition SHA is checked for each dispatch." "Dispatch POSTs are never retried; ...
an ambiguous response is recovered by the unique run-name for cancellation, never by dispatching a
duplicate."
"""

from __future__ import annotations

from datetime import timedelta
from typing import NoReturn

from runner_queue_fallback import timing
from runner_queue_fallback.attempts import REFUSED, Attempt
from runner_queue_fallback.errors import (
    DispatchAmbiguous,
    GitHubAPIError,
    GitHubError,
    SequenceError,
)
from runner_queue_fallback.observe import Expected
from runner_queue_fallback.sequence import run_name
from runner_queue_fallback.sequence.context import Sequence
from runner_queue_fallback.sequence.preflight import read_definition

__all__ = ["LOOKBACK_SECONDS", "dispatch", "find_interrupted_dispatch", "preflight"]

#: How far back to look for a run whose dispatch reply was lost (clock skew margin).
LOOKBACK_SECONDS = 300


def preflight(seq: Sequence, attempt: Attempt) -> None:
    """Source still at source-sha; workflow definition unchanged since the first dispatch."""
    if attempt.number > 1:
        seq.check_parent_still_active()
    seq.check_source()
    seq.commit, blob = read_definition(seq)  # before the first dispatch: the child's rules too
    if seq.definition_sha is None:
        seq.definition_sha = blob
    elif blob != seq.definition_sha:
        raise SequenceError(
            f"workflow definition {seq.expected_path} at {seq.inputs.workflow_ref!r} changed "
            f"during the sequence: expected blob {seq.definition_sha}, observed {blob}. Keep "
            "workflow-ref stable (a protected tag avoids this)"
        )


def dispatch(seq: Sequence, attempt: Attempt) -> None:
    """Send the one dispatch POST of this candidate; its run becomes the active child."""
    # The child must run the very commit whose definition the preflight just compared.
    seq.expected = Expected(attempt.request_id, seq.expected_path, seq.commit)
    inputs = {
        "request-id": attempt.request_id,
        "parent-run-id": str(seq.ctx.run_id),
        "parent-run-attempt": str(seq.ctx.run_attempt),
        "source-ref": seq.inputs.source_ref,
        "source-sha": seq.inputs.source_sha,
        "runner": attempt.candidate.runner_json(),
        "workload": seq.inputs.workload,
    }
    seq.report.save_state("request-id", attempt.request_id)
    seq.report.save_state("dispatched-at", seq.clock.now().isoformat())
    seq.report.save_state("api-version", seq.client.version)  # the post step speaks the same
    attempt.dispatched_at = seq.clock.monotonic()
    seq.in_flight = attempt
    try:
        reply = seq.client.dispatch_workflow(seq.inputs.workflow, seq.inputs.workflow_ref, inputs)
    except DispatchAmbiguous as exc:
        attempt.outcome = "dispatch reply lost"
        seq.report.warning(str(exc), title="Ambiguous dispatch")
        _recover_lost_dispatch(seq, attempt)
    except GitHubAPIError:
        # A definite refusal (4xx, never 408: that one is ambiguous): no run was created, so
        # neither this step nor the post step has anything to look for or clean up.
        seq.in_flight = None
        attempt.outcome = REFUSED
        seq.report.save_state("refused-request-id", attempt.request_id)
        raise
    if reply is None:  # the older contract: accepted, run unknown (run_name.py)
        seq.report.save_state("api-version", seq.client.version)  # a 204 may have moved it
        run_name.find_dispatched_run(seq, attempt)
        assert attempt.run_url is not None  # noqa: S101  # found, or the search raised
        url = attempt.run_url
    else:
        seq.set_active(attempt, reply.workflow_run_id, reply.html_url)
        url = reply.html_url
    attempt.outcome = "dispatched"
    seq.report.notice(
        f"Child {attempt.request_id} dispatched to {attempt.candidate.pool_text}: {url}",
        title=f"Candidate {attempt.number}",
    )


def find_interrupted_dispatch(seq: Sequence, deadline: float) -> None:
    """A signal came while a dispatch was in flight: find its run by run-name before `deadline`.

    The POST may have created the run; without its id nothing would cancel it.
    """
    attempt = seq.in_flight
    if attempt is None:
        return
    while True:
        if _look_up_run_name(seq, attempt, deadline):
            return
        # The grace is short: wait half of what is left, so one more look and its reply fit.
        wait = min(timing.STARTUP_POLL_SECONDS, (deadline - seq.clock.monotonic()) / 2)
        if wait < 1.0:
            break
        seq.clock.sleep(wait)
    seq.report.warning(
        f"the step was cancelled while child {attempt.request_id} was being dispatched, and "
        f"no run with run-name {attempt.request_id} appeared within the signal grace; if one "
        "appears later, cancel it",
        title="Child run not found",
    )


def _look_up_run_name(seq: Sequence, attempt: Attempt, deadline: float) -> bool:
    """One search for the attempt's run by its unique run-name; found runs become active."""
    after = seq.clock.now() - timedelta(seconds=LOOKBACK_SECONDS)
    try:
        runs = seq.client.find_runs_by_name(
            seq.inputs.workflow, attempt.request_id, created_after=after, deadline=deadline
        )
    except GitHubError as exc:
        seq.report.log(f"Looking for run-name {attempt.request_id}: {exc}")
        return False
    if runs:
        seq.set_active(attempt, runs[0].id, runs[0].html_url)
    return bool(runs)


def _recover_lost_dispatch(seq: Sequence, attempt: Attempt) -> NoReturn:
    """Find the run by its unique run-name, mark it for cleanup, and stop: never re-dispatch."""
    assert attempt.dispatched_at is not None  # noqa: S101  # set just before dispatch
    deadline = attempt.dispatched_at + timing.STARTUP_WINDOW_SECONDS
    while seq.clock.monotonic() + timing.STARTUP_POLL_SECONDS <= deadline:
        seq.clock.sleep(timing.STARTUP_POLL_SECONDS)
        if _look_up_run_name(seq, attempt, deadline):
            raise SequenceError(
                f"the dispatch reply was lost; run {attempt.run_id} with run-name "
                f"{attempt.request_id} was found and is cancelled; no other pool is tried"
            )
    raise SequenceError(
        f"the dispatch reply was lost and no run with run-name {attempt.request_id} appeared "
        "within 2 minutes; if one appears later, cancel it; no other pool is tried"
    )
