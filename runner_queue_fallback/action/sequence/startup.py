"""The startup window: the new child shows its identity and its worker job.

"A newly dispatched child gets a two-minute startup window for run identity and job metadata to
become visible. The first check waits fifteen seconds, counted within that window; pending
metadata is then checked every five seconds. Temporary child/job HTTP 404 responses are retried
only during startup."
"""

from __future__ import annotations

from collections.abc import Callable

from runner_queue_fallback.action.attempts import Attempt
from runner_queue_fallback.action.cleanup import observe_run
from runner_queue_fallback.action.observe import WORKER_JOB, Observation, job_mismatches
from runner_queue_fallback.action.sequence import run_name
from runner_queue_fallback.action.sequence.facts import Next, Phase, PhaseResult
from runner_queue_fallback.action.sequence.quota_pause import through_quota
from runner_queue_fallback.action.sequence.state import SequenceState, note_job, seconds
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.errors import TRANSIENT_ERRORS, NotFound, SequenceError

__all__ = ["wait_for_startup"]


def wait_for_startup(seq: SequenceState, attempt: Attempt) -> Phase[PhaseResult]:
    """Wait (15 s, then every 5 s, within 2 minutes) until the child shows its identity and job.

    As the spec words it: fields not filled in yet (the run-name still empty or the workflow's
    name, no job listed) are waited for until the window's expiry, which reports expected and
    observed fields; a field filled in and wrong fails at once, and so does a field that was
    seen matching and then changes. A read sent inside the window is judged on its reply, even
    one that arrives after the window ("in-flight requests can extend the observation window").

    A child found by its run-name is listed once more at the next poll (`run_name.relist`); an
    earlier run found then replaces it, and its identity is checked here in turn. When the child
    is ready before that poll, the window waits for it (up to 5 s).

    A spent API quota pauses the window: nothing is sent before the reset, and the window then
    goes on for the time it had left, from a fresh read judged by the same rules (a runner seen
    then is an allocation; a finished child is judged as a result; a queued job's clock starts
    at its `created_at`).
    """
    assert attempt.run_id is not None  # noqa: S101  # set by dispatch
    assert attempt.dispatched_at is not None  # noqa: S101  # set by dispatch
    assert seq.expected is not None  # noqa: S101  # set by dispatch
    # The window counts the time the quota let it read: a wait for the reset pauses it.
    window = seq.startup_window(attempt)
    if not attempt.found_by_run_name:  # the search by run-name already waited the first 15 s
        seq.clock.sleep(timing.STARTUP_FIRST_CHECK_SECONDS)
    title_seen = runner_seen = False
    run_read = job_seen = False  # a zombie run: read, and never a job
    while True:
        due = seq.relist_at is not None and seq.clock.monotonic() >= seq.relist_at
        if due and (yield from run_name.relist(seq, attempt, runner_seen=runner_seen)):
            title_seen = False  # a new child: its run-name is seen afresh
        try:
            observation = _read(seq, attempt, window)
        except (NotFound, *TRANSIENT_ERRORS) as exc:  # 404 is tolerated only here
            last = str(exc)
        else:
            run_read, job_seen = True, job_seen or bool(observation.jobs)
            title_seen = _check_filled_in(seq, observation, title_seen=title_seen)
            runner_seen = runner_seen or observation.has_evidence
            pending = seq.expected.pending_fields(observation.run)
            if observation.jobs and not pending:
                yield from note_job(seq, attempt, observation)
                if not (yield from _replaced_at_next_poll(seq, attempt, runner_seen=runner_seen)):
                    return PhaseResult(Next.QUEUE, observation)
                title_seen = False
                continue
            if not observation.jobs:
                pending.append(f"jobs: expected one job named {WORKER_JOB!r}, observed none yet")
            last = f"not filled in yet: {'; '.join(pending)} ({observation.describe()})"
        if seq.clock.monotonic() + timing.STARTUP_POLL_SECONDS > window():
            never = (
                "; GitHub never created its worker job (a run can stay queued with no job; "
                "no other pool is tried)"
                if run_read and not job_seen
                else ""
            )
            error = SequenceError(
                f"child run {attempt.run_id} did not show its identity and worker job within "
                f"the 2-minute startup window; last: {last}{never}"
            )
            return PhaseResult(Next.OVER, error=error)
        seq.clock.sleep(timing.STARTUP_POLL_SECONDS)


def _read(seq: SequenceState, attempt: Attempt, window: Callable[[], float]) -> Observation:
    """One read of the child; a spent quota pauses the window, and the read is sent at the reset."""
    run_id = attempt.run_id
    assert run_id is not None  # noqa: S101  # set by dispatch

    def paused() -> str:
        left = seconds(max(0.0, window() - seq.clock.monotonic()))
        return f"the startup window of child {run_id} ({left} of it left)"

    return through_quota(
        seq, lambda: observe_run(seq.client, run_id, window(), clock=seq.clock), paused
    )


def _replaced_at_next_poll(
    seq: SequenceState, attempt: Attempt, *, runner_seen: bool
) -> Phase[bool]:
    """A child found by run-name and ready: wait for its one listing again; True if replaced."""
    if seq.relist_at is None:
        return False
    seq.clock.sleep(max(0.0, seq.relist_at - seq.clock.monotonic()))
    return (yield from run_name.relist(seq, attempt, runner_seen=runner_seen))


def _check_filled_in(seq: SequenceState, observation: Observation, *, title_seen: bool) -> bool:
    """Fail at once on a wrong field, or a run-name seen matching that is pending again.

    Returns whether the run-name has been seen matching (now or before).
    """
    assert seq.expected is not None  # noqa: S101  # set by dispatch
    run = observation.run
    problems = seq.expected.wrong_fields(run)
    if observation.jobs:
        problems += job_mismatches(observation.jobs)
    pending = seq.expected.title_pending(run)
    if title_seen and pending:
        problems.append(
            f"run-name (display_title) changed after it was seen matching: expected "
            f"{seq.expected.run_name!r}, observed {run.display_title!r}"
        )
    if problems:
        raise SequenceError(
            f"child run {run.id} is not the run that was dispatched: " + "; ".join(problems)
        )
    return title_seen or not pending
