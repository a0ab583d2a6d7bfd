"""Queued: wait for a runner until the queue deadline, then take one fresh read.

"The queue clock starts when the single worker job is first observed queued." "Poll once per
minute while queued." "A queue timeout triggers a fresh state read" before the cancellation.
One poll is aimed at the deadline itself, so the deadline is not noticed up to a minute late.
"""

from __future__ import annotations

from runner_queue_fallback import timing
from runner_queue_fallback.attempts import Attempt
from runner_queue_fallback.observe import Observation
from runner_queue_fallback.sequence.context import Sequence, minutes, seconds

__all__ = ["read_at_deadline", "wait_in_queue"]


def wait_in_queue(seq: Sequence, attempt: Attempt, observation: Observation) -> Observation | None:
    """Poll every 60 s, landing one poll on the deadline; None when the deadline is reached."""
    if observation.has_evidence or observation.finished:
        return observation
    assert attempt.queued_at is not None  # noqa: S101  # set when the job was seen in startup
    assert attempt.dispatched_at is not None  # noqa: S101  # set by dispatch
    deadline = attempt.queued_at + attempt.candidate.queue_seconds
    round_number = 0
    while not (observation.has_evidence or observation.finished):
        now = seq.clock.monotonic()
        if now >= deadline:
            return None
        wait = min(timing.QUEUE_POLL_SECONDS, deadline - now)
        round_number += 1
        seq.report.log(
            f"Waiting round {round_number}: child {attempt.run_id} {observation.describe()}; "
            f"{seconds(now - attempt.dispatched_at)} since dispatch; next check in {seconds(wait)}"
        )
        seq.clock.sleep(wait)
        observation = seq.observe(attempt)
        seq.poll_checks(allocated=observation.has_evidence)
    return observation


def read_at_deadline(seq: Sequence, attempt: Attempt, window: float) -> Observation:
    """The fresh read before cancelling; it shares the cancellation window's deadline."""
    seq.report.log(
        f"Queue deadline of {minutes(attempt.candidate.queue_seconds)} reached for child "
        f"{attempt.run_id}: fresh read before cancelling"
    )
    return seq.observe(attempt, window)
