"""Queued: wait for a runner until the queue deadline, then take one fresh read.

"The queue clock starts when the single worker job is first observed queued." "A queue timeout
triggers a fresh state read" before the cancellation. One poll is aimed at the deadline itself,
so the deadline is not noticed up to a minute late.

Departure (README): not the spec's "poll once per minute while queued". Far from the deadline
the child is read every 4 minutes, nearer it more often, and the source ref and parent run only
every 15 minutes while nothing moves: about 50 requests sent per queued hour instead of 240.
"""

from __future__ import annotations

from runner_queue_fallback.action.attempts import Attempt
from runner_queue_fallback.action.observe import Observation
from runner_queue_fallback.action.sequence.context import Sequence, minutes, seconds
from runner_queue_fallback.core import timing

__all__ = ["next_interval", "read_at_deadline", "wait_for_reset", "wait_in_queue"]


def next_interval(left: float) -> float:
    """The wait before the next poll, `left` seconds before the deadline; never past it."""
    if left > timing.QUEUE_NEAR_FACTOR * timing.QUEUE_POLL_FAR_SECONDS:
        wait = timing.QUEUE_POLL_FAR_SECONDS
    else:
        wait = max(timing.QUEUE_POLL_NEAR_SECONDS, left / timing.QUEUE_NEAR_FACTOR)
    return min(wait, left)


def wait_in_queue(seq: Sequence, attempt: Attempt, observation: Observation) -> Observation | None:
    """Poll until a runner is seen, landing one poll on the deadline; None at the deadline."""
    if observation.has_evidence or observation.finished:
        return observation
    assert attempt.queued_at is not None  # noqa: S101  # set when the job was seen in startup
    assert attempt.dispatched_at is not None  # noqa: S101  # set by dispatch
    deadline = attempt.queued_at + attempt.candidate.queue_seconds
    checked = attempt.dispatched_at  # the preflight read the source ref just before dispatch
    round_number = 0
    while not (observation.has_evidence or observation.finished):
        now = seq.clock.monotonic()
        if now >= deadline:
            return None
        wait = next_interval(deadline - now)
        round_number += 1
        seq.report.log(
            f"Waiting round {round_number}, {seq.candidate_text(attempt)}: child "
            f"{attempt.run_id} {observation.state()}; waited {seconds(now - attempt.dispatched_at)} "
            f"since dispatch, {seconds(deadline - now)} left to the queue deadline; next check in "
            f"{seconds(wait)}"
        )
        seq.clock.sleep(wait)
        observation = seq.observe(attempt)
        moved = observation.has_evidence or observation.finished
        if moved or seq.clock.monotonic() - checked >= timing.QUEUE_CHECKS_SECONDS:
            observation = seq.checked(attempt, observation, allocated=observation.has_evidence)
            checked = seq.clock.monotonic()
    return observation


def wait_for_reset(seq: Sequence, attempt: Attempt) -> None:
    """At the deadline with the quota spent: wait for its reset; the fresh read comes after it.

    A runner seen at that read means the child was allocated (no cancel, no race); only one seen
    after the cancel request is the race. Departure (README): the cancel comes after the reset.
    """
    wait = seq.client.quota_reset_in()
    if wait is None:
        return
    seq.report.log(
        f"Queue deadline reached for child {attempt.run_id}, but the API quota is spent until its "
        f"reset at {seq.client.reset_time()}: the fresh read and the cancel wait {seconds(wait)}"
    )
    seq.sleep_through_quota(wait)


def read_at_deadline(seq: Sequence, attempt: Attempt) -> tuple[Observation, float]:
    """The fresh read before cancelling, and the cancellation window's deadline it shares.

    A read the spent quota stops is sent again at the reset, with a new window: the cancel
    must not rest on a read from before an hour's wait.
    """
    seq.report.log(
        f"Queue deadline of {minutes(attempt.candidate.queue_seconds)} reached for child "
        f"{attempt.run_id}: fresh read before cancelling"
    )

    def read() -> tuple[Observation, float]:
        window = seq.clock.monotonic() + timing.CANCEL_WINDOW_SECONDS
        return seq.observe(attempt, window), window

    return seq.through_quota(read, lambda: f"the fresh read of child {attempt.run_id}")
