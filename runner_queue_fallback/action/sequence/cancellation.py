"""After a queue timeout: cancel the child and prove that nothing ran before the next dispatch.

"Run and job metadata are checked together every five seconds within one two-minute cancellation
confirmation window; both must be completed/cancelled with no allocation or execution evidence.
... Expiry reports the last observation and stops without another dispatch. ... If the job
acquires a runner during cancellation, stop with an explicit race error."
"""

from __future__ import annotations

from runner_queue_fallback.action.attempts import Attempt, AttemptState
from runner_queue_fallback.action.cleanup import CancelRequests
from runner_queue_fallback.action.observe import Observation
from runner_queue_fallback.action.sequence.facts import (
    Became,
    ChildOver,
    Next,
    Phase,
    PhaseResult,
    QueueLeft,
    Race,
)
from runner_queue_fallback.action.sequence.state import SequenceState, observe
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.errors import TRANSIENT_ERRORS, SequenceError

__all__ = ["cancel_and_prove"]


def cancel_and_prove(seq: SequenceState, attempt: Attempt, deadline: float) -> Phase[PhaseResult]:
    """Cancel and confirm, within one 2-minute window, that run and job ended with no runner.

    A cancel GitHub answers 409 while the run is not completed is sent once more at the next
    poll, then force-cancelled (`CancelRequests`); so is one that GitHub accepted but that has not
    taken by half the window (GitHub has been seen to leave a queued run queued after a 202).
    """
    assert attempt.run_id is not None  # noqa: S101  # only called after dispatch
    yield QueueLeft(seq.clock.monotonic())
    cancels = CancelRequests(seq.client, attempt.run_id, deadline, seq.report.log)
    cancels.send()
    last: Observation | None = None
    last_error = ""
    while True:
        if seq.clock.monotonic() + timing.CANCEL_POLL_SECONDS > deadline:
            return PhaseResult(Next.OVER, error=_unconfirmed(attempt, last, last_error, cancels))
        seq.clock.sleep(timing.CANCEL_POLL_SECONDS)
        try:
            last = yield from observe(seq, attempt, deadline)
        except TRANSIENT_ERRORS as exc:
            last_error = str(exc)
            seq.report.log(f"Cancellation check failed: {exc}")
            continue
        seq.report.log(f"Cancellation check: {last.describe()}")
        if last.has_evidence:
            race = SequenceError(
                f"child {attempt.run_id} acquired a runner while it was being cancelled (the "
                "queue/start race). It is not run again on another pool; check its logs"
            )
            return PhaseResult(Next.OVER, error=race, facts=(Race(seq.clock.monotonic()),))
        if last.cancelled_cleanly:
            yield Became(AttemptState.CANCELLED)
            yield ChildOver()
            seq.report.log(f"Confirmed: child {attempt.run_id} ended with no runner and no step")
            return PhaseResult(Next.NEXT_CANDIDATE)
        if last.conclusion_pending:
            seq.report.log(f"Child {attempt.run_id} completed; waiting for its conclusion")
            continue
        if last.finished:
            ended = SequenceError(f"child {attempt.run_id} ended unexpectedly: {last.describe()}")
            return PhaseResult(Next.OVER, error=ended)
        last_error = _press(seq, attempt, cancels, last, deadline) or last_error


def _press(
    seq: SequenceState,
    attempt: Attempt,
    cancels: CancelRequests,
    last: Observation,
    deadline: float,
) -> str:
    """The next cancel request, if any: force-cancel at half-window, or a refused one again.

    Returns the error of a request that failed for a transient reason ("" otherwise).
    """
    if last.run.status == "completed":
        return ""
    try:
        if not cancels.forced and _past_half(seq, deadline):
            seq.report.log(f"Child {attempt.run_id} still not cancelled: sending force-cancel")
            cancels.send(force=True)
        else:
            cancels.follow_up()  # a refused cancel: once more, then a force-cancel
    except TRANSIENT_ERRORS as exc:
        return str(exc)
    return ""


def _unconfirmed(
    attempt: Attempt, last: Observation | None, last_error: str, cancels: CancelRequests
) -> SequenceError:
    """The window closed without proof: the last observation, the last error, GitHub's refusal."""
    seen = last.describe() if last else "no reply within the window"
    error = f"; last request error: {last_error}" if last_error else ""
    if cancels.refused is not None:
        error += f"; GitHub refused the cancel: {cancels.refused.reply}"
    return SequenceError(
        f"cancellation of child {attempt.run_id} was not confirmed within 2 minutes; last "
        f"observation: {seen}{error}. No other pool is tried"
    )


def _past_half(seq: SequenceState, deadline: float) -> bool:
    """Not in the spec: a run still not completed halfway through the window gets a force-cancel."""
    return deadline - seq.clock.monotonic() <= timing.CANCEL_WINDOW_SECONDS / 2
