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
from runner_queue_fallback.action.sequence.facts import Next, Phase, PhaseResult
from runner_queue_fallback.action.sequence.quota_pause import pause, through_quota
from runner_queue_fallback.action.sequence.state import (
    SequenceState,
    checked,
    minutes,
    note_job,
    read_child,
    seconds,
)
from runner_queue_fallback.core import timing

__all__ = ["next_interval", "read_at_deadline", "wait_for_reset", "wait_in_queue"]


def next_interval(left: float) -> float:
    """The wait before the next poll, `left` seconds before the deadline; never past it."""
    if left > timing.QUEUE_NEAR_FACTOR * timing.QUEUE_POLL_FAR_SECONDS:
        wait = timing.QUEUE_POLL_FAR_SECONDS
    else:
        wait = max(timing.QUEUE_POLL_NEAR_SECONDS, left / timing.QUEUE_NEAR_FACTOR)
    return min(wait, left)


def wait_in_queue(
    seq: SequenceState, attempt: Attempt, observation: Observation
) -> Phase[PhaseResult]:
    """Poll until a runner is seen, landing one poll on the deadline; then the deadline's read."""
    if observation.has_evidence or observation.finished:
        return PhaseResult(Next.EXECUTION, observation)
    assert attempt.queued_at is not None  # noqa: S101  # set when the job was seen in startup
    assert attempt.dispatched_at is not None  # noqa: S101  # set by dispatch
    deadline = attempt.queued_at + attempt.candidate.queue_seconds
    checks = attempt.dispatched_at  # the preflight read the source ref just before dispatch
    round_number = 0
    while not (observation.has_evidence or observation.finished):
        now = seq.clock.monotonic()
        if now >= deadline:
            return PhaseResult(Next.DEADLINE)
        wait = next_interval(deadline - now)
        round_number += 1
        seq.report.log(
            f"Waiting round {round_number}, {seq.candidate_text(attempt)}: child "
            f"{attempt.run_id} {observation.state()}; waited {seconds(now - attempt.dispatched_at)} "
            f"since dispatch, {seconds(deadline - now)} left to the queue deadline; next check in "
            f"{seconds(wait)}"
        )
        seq.clock.sleep(wait)
        observation = read_child(seq, attempt)
        yield from note_job(seq, attempt, observation)
        moved = observation.has_evidence or observation.finished
        if moved or seq.clock.monotonic() - checks >= timing.QUEUE_CHECKS_SECONDS:
            observation = yield from checked(
                seq, attempt, observation, allocated=observation.has_evidence
            )
            checks = seq.clock.monotonic()
    return PhaseResult(Next.EXECUTION, observation)


def wait_for_reset(seq: SequenceState, attempt: Attempt) -> None:
    """At the deadline with the quota spent: wait for its reset; the fresh read comes after it.

    A runner seen at that read means the child was allocated (no cancel, no race); only one seen
    after the cancel request is the race. Departure (README): the cancel comes after the reset.
    """
    pause(
        seq,
        lambda wait: (
            f"Queue deadline reached for child {attempt.run_id}, but the API quota is spent until "
            f"its reset at {seq.client.reset_time()}: the fresh read and the cancel wait "
            f"{seconds(wait)}"
        ),
    )


def read_at_deadline(seq: SequenceState, attempt: Attempt) -> Phase[PhaseResult]:
    """The fresh read before cancelling (after the reset of a spent quota), and its window.

    A runner seen or a finished child: no cancel, its result is waited for. Else the cancel,
    within the cancellation window the read opened. A read the spent quota stops is sent again
    at the reset, with a new window: the cancel must not rest on a read from before an hour's
    wait.
    """
    wait_for_reset(seq, attempt)
    seq.report.log(
        f"Queue deadline of {minutes(attempt.candidate.queue_seconds)} reached for child "
        f"{attempt.run_id}: fresh read before cancelling"
    )

    def read() -> tuple[Observation, float]:
        window = seq.clock.monotonic() + timing.CANCEL_WINDOW_SECONDS
        return read_child(seq, attempt, window), window

    observation, window = through_quota(
        seq, read, lambda: f"the fresh read of child {attempt.run_id}"
    )
    yield from note_job(seq, attempt, observation)
    if observation.has_evidence or observation.finished:
        return PhaseResult(Next.EXECUTION, observation)
    return PhaseResult(Next.CANCEL, observation, cancel_by=window)
