"""After a queue timeout: cancel the child and prove that nothing ran before the next dispatch.

"Run and job metadata are checked together every five seconds within one two-minute cancellation
confirmation window; both must be completed/cancelled with no allocation or execution evidence.
... Expiry reports the last observation and stops without another dispatch. ... If the job
acquires a runner during cancellation, stop with an explicit race error."
"""

from __future__ import annotations

from runner_queue_fallback import timing
from runner_queue_fallback.attempts import Attempt
from runner_queue_fallback.errors import TRANSIENT_ERRORS, SequenceError
from runner_queue_fallback.observe import Observation
from runner_queue_fallback.sequence.context import Sequence

__all__ = ["cancel_and_prove"]


def cancel_and_prove(seq: Sequence, attempt: Attempt, deadline: float) -> None:
    """Cancel and confirm, within one 2-minute window, that run and job ended with no runner."""
    assert attempt.run_id is not None  # noqa: S101  # only called after dispatch
    attempt.queue_left_at = seq.clock.monotonic()
    attempt.outcome = "cancelling after queue timeout"
    outcome = seq.client.cancel_run(attempt.run_id, deadline=deadline)
    seq.report.log(f"Cancel requested for child {attempt.run_id}: {outcome.value}")
    last: Observation | None = None
    last_error = ""
    forced = False
    while True:
        if seq.clock.monotonic() + timing.CANCEL_POLL_SECONDS > deadline:
            seen = last.describe() if last else "no reply within the window"
            error = f"; last request error: {last_error}" if last_error else ""
            raise SequenceError(
                f"cancellation of child {attempt.run_id} was not confirmed within 2 minutes; last "
                f"observation: {seen}{error}. No other pool is tried"
            )
        seq.clock.sleep(timing.CANCEL_POLL_SECONDS)
        try:
            last = seq.observe(attempt, deadline)
        except TRANSIENT_ERRORS as exc:
            last_error = str(exc)
            seq.report.log(f"Cancellation check failed: {exc}")
            continue
        seq.report.log(f"Cancellation check: {last.describe()}")
        if last.has_evidence:
            seq.result.race = True
            attempt.allocated_at = seq.clock.monotonic()
            attempt.outcome = "runner acquired during cancellation (race)"
            raise SequenceError(
                f"child {attempt.run_id} acquired a runner while it was being cancelled (the "
                "queue/start race). It is not run again on another pool; check its logs"
            )
        if last.cancelled_cleanly:
            attempt.outcome = "cancelled before a runner (queue timeout)"
            seq.active = None
            seq.report.log(f"Confirmed: child {attempt.run_id} ended with no runner and no step")
            return
        if last.conclusion_pending:
            seq.report.log(f"Child {attempt.run_id} completed; waiting for its conclusion")
            continue
        if last.finished:
            raise SequenceError(f"child {attempt.run_id} ended unexpectedly: {last.describe()}")
        if not forced and last.run.status != "completed" and _past_half(seq, deadline):
            forced = True
            seq.report.log(f"Child {attempt.run_id} still not cancelled: sending force-cancel")
            try:
                seq.client.force_cancel_run(attempt.run_id, deadline=deadline)
            except TRANSIENT_ERRORS as exc:
                last_error = str(exc)


def _past_half(seq: Sequence, deadline: float) -> bool:
    """Not in the spec: a run still not completed halfway through the window gets a force-cancel."""
    return deadline - seq.clock.monotonic() <= timing.CANCEL_WINDOW_SECONDS / 2
