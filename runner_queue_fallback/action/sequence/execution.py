"""A runner was seen: no more fallback; wait for the result and judge it.

"Once runner allocation or step execution is observed, fallback is disabled." "Poll once per
minute while ... executing." "No skipped, missing, cancelled or unsuccessful required job can
produce a successful coordinator."

GitHub re-queues a job whose assigned runner does not pick it up within 60 s (its docs, "Routing
precedence for self-hosted runners"); the runner may have been seen on the job. The rule stands:
a runner once seen means no fallback. The re-queue is said in the log and the summary, and the
job is followed like any allocated child, its execution timeout still counted from the first
allocation seen.
"""

from __future__ import annotations

from runner_queue_fallback.action.attempts import Attempt, AttemptState
from runner_queue_fallback.action.observe import Observation
from runner_queue_fallback.action.sequence.facts import (
    Allocated,
    Became,
    ChildOver,
    Next,
    Phase,
    PhaseResult,
    RunnerOnJob,
    Verdict,
)
from runner_queue_fallback.action.sequence.quota_pause import through_quota
from runner_queue_fallback.action.sequence.state import (
    SequenceState,
    checked,
    note_job,
    observe,
    read_child,
    seconds,
)
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.errors import (
    TRANSIENT_ERRORS,
    ExecutionTimeout,
    SequenceError,
    WorkerFailed,
)

__all__ = ["execution_timeout", "judge", "note_runner", "start_execution", "wait_for_result"]


def start_execution(seq: SequenceState, attempt: Attempt, observation: Observation) -> Phase[float]:
    """Book the end of the queue wait; the execution deadline, on the monotonic clock.

    The allocation time is GitHub's own (the job's `started_at`), so polls that are minutes apart
    do not start the execution timeout late; it is bounded by the last read that still showed no
    runner (a queued job's `started_at` is its queueing time) and by now.
    """
    now = seq.clock.monotonic()
    started = _allocated_at(seq, attempt, observation, now)
    seen = observation.has_evidence  # a child may end runnerless
    yield Allocated(started, started, started if seen else None, _runner_of(observation), seen)
    if seen:
        named = f" ({attempt.runner_name})" if attempt.runner_name else ""
        seq.report.log(
            f"Runner allocated to child {attempt.run_id}{named} {seconds(now - started)} ago: "
            "fallback is now disabled"
        )
    return started + seq.inputs.pools.execution_timeout_minutes * 60


def note_runner(
    seq: SequenceState, attempt: Attempt, observation: Observation, left: float
) -> Phase[None]:
    """Keep the runner on the job; one gone from a job still queued was GitHub's re-queue.

    `left`: the seconds to the execution timeout, which the re-queue does not restart.
    """
    job = observation.job
    if job is None or observation.finished:
        return
    runner = _runner_of(observation)
    gone = attempt.runner_name
    requeued = runner is None and gone is not None and job.status == "queued"
    yield RunnerOnJob(runner, gone if requeued else None)
    if requeued:
        seq.report.log(
            f"Worker job of child {attempt.run_id} was assigned to runner {gone} and re-queued by "
            "GitHub (the runner did not pick it up; no step had started). A runner was seen, so "
            f"candidate {attempt.number} can no longer fall back: the job is followed to its "
            f"result or the execution timeout, {seconds(max(0.0, left))} from now (counted from "
            "the first allocation seen)"
        )


def _runner_of(observation: Observation) -> str | None:
    """The runner the worker job shows (its name, else its id), or None."""
    job = observation.job
    if job is None or not job.has_runner:
        return None
    return job.runner_name or str(job.runner_id)


def _allocated_at(
    seq: SequenceState, attempt: Attempt, observation: Observation, now: float
) -> float:
    """When the runner was allocated, on the monotonic clock, from the job's `started_at`."""
    if not observation.has_evidence:
        return now  # this very read showed no runner
    job = observation.job
    if job is None or job.started_at is None:
        return now
    # GitHub writes whole seconds: the allocation came up to a second after `started_at`, and
    # the later end is taken so that the timeout never fires early.
    ago = (seq.clock.now() - job.started_at).total_seconds() - 1.0
    reads = (seq.last_queued_read, attempt.dispatched_at)  # the runner came after both
    floor = max((t for t in reads if t is not None), default=now - ago)
    return min(now, max(floor, now - ago))


def wait_for_result(
    seq: SequenceState, attempt: Attempt, observation: Observation
) -> Phase[PhaseResult]:
    """No more fallback: poll every 60 s until the child concludes or the execution timeout."""
    assert attempt.dispatched_at is not None  # noqa: S101  # set by dispatch
    deadline = yield from start_execution(seq, attempt, observation)
    round_number = 0
    settled = False
    while not observation.finished:
        now = seq.clock.monotonic()
        if now >= deadline and observation.reported_over:
            # The run or its job already says completed; the other's report lags behind.
            # The worker did not outlive the deadline: let the reports settle.
            observation, settled = (yield from _settle(seq, attempt, observation)), True
            if observation.finished:
                break
        if now >= deadline:
            return execution_timeout(seq, attempt)
        wait = min(timing.EXECUTION_POLL_SECONDS, deadline - now)
        round_number += 1
        since = now - attempt.dispatched_at
        seq.report.log(
            f"Executing round {round_number}, {seq.candidate_text(attempt)}: child "
            f"{attempt.run_id} {observation.state()}; {seconds(since)} since dispatch, "
            f"{seconds(deadline - now)} left to the execution timeout; next check in "
            f"{seconds(wait)}"
        )
        seq.clock.sleep(wait)
        observation = yield from observe(seq, attempt)
        yield from note_runner(seq, attempt, observation, deadline - seq.clock.monotonic())
        if not observation.finished:  # a finished worker is judged on its own result
            observation = yield from checked(seq, attempt, observation, allocated=True)
    if observation.conclusion_pending and not settled:  # a null conclusion is no verdict yet
        observation = yield from _settle(seq, attempt, observation)
    return (yield from judge(seq, attempt, observation))


def execution_timeout(seq: SequenceState, attempt: Attempt) -> PhaseResult:
    """The result of a worker past execution-timeout-minutes (cleanup then cancels it)."""
    error = ExecutionTimeout(
        f"child {attempt.run_id} did not finish within execution-timeout-minutes "
        f"({seq.inputs.pools.execution_timeout_minutes}); cancelling it"
    )
    return PhaseResult(Next.OVER, error=error, facts=(Became(AttemptState.EXECUTION_TIMEOUT),))


def judge(seq: SequenceState, attempt: Attempt, observation: Observation) -> Phase[PhaseResult]:
    """The verdict on a finished child: success only when run and worker job both succeeded."""
    yield ChildOver()
    seq.report.log(f"Polling finished: child {attempt.run_id} {observation.describe()}")
    job = observation.job
    yield Verdict.of(observation)
    if observation.conclusion_pending:
        pending = SequenceError(
            f"child {attempt.run_id} completed, but its conclusion was not reported within 2 "
            f"minutes ({observation.describe()}); check its result by hand. It is not retried on "
            "another pool"
        )
        return PhaseResult(Next.OVER, error=pending)
    if not observation.succeeded:
        failed = WorkerFailed(
            f"the worker did not succeed: run concluded {observation.run.conclusion!r}, worker job "
            f"{job.conclusion if job else 'missing'!r}. It is not retried on another pool"
        )
        return PhaseResult(Next.OVER, error=failed)
    return PhaseResult(Next.OVER)


def _settle(seq: SequenceState, attempt: Attempt, observation: Observation) -> Phase[Observation]:
    """Poll every 5 s, within one 2-minute window, until run and job report their conclusion.

    Both must say completed, with a conclusion that is not null. A wait for a spent quota's
    reset pauses the window.
    """
    window = seq.paused_window(seq.clock.monotonic() + timing.CANCEL_WINDOW_SECONDS)
    while not observation.finished or observation.conclusion_pending:
        if seq.clock.monotonic() + timing.CANCEL_POLL_SECONDS > window():
            break
        seq.report.log(
            f"Child {attempt.run_id} {observation.describe()}: waiting for the lagging report"
        )
        seq.clock.sleep(timing.CANCEL_POLL_SECONDS)
        try:  # the child may still be running: a read the quota stopped is sent at its reset
            observation = through_quota(
                seq,
                lambda: read_child(seq, attempt, window()),
                lambda: f"the wait for child {attempt.run_id}'s result",
            )
        except TRANSIENT_ERRORS as exc:
            seq.report.log(f"Completion check failed: {exc}")
        else:
            yield from note_job(seq, attempt, observation)
    return observation
