"""The startup window: the new child shows its identity and its worker job.

"A newly dispatched child gets a two-minute startup window for run identity and job metadata to
become visible. The first check waits fifteen seconds, counted within that window; pending
metadata is then checked every five seconds. Temporary child/job HTTP 404 responses are retried
only during startup."
"""

from __future__ import annotations

from runner_queue_fallback import timing
from runner_queue_fallback.attempts import Attempt
from runner_queue_fallback.cleanup import observe_run
from runner_queue_fallback.errors import TRANSIENT_ERRORS, NotFound, SequenceError
from runner_queue_fallback.observe import Observation
from runner_queue_fallback.sequence.context import Sequence

__all__ = ["wait_for_startup"]


def wait_for_startup(seq: Sequence, attempt: Attempt) -> Observation:
    """Wait (15 s, then every 5 s, within 2 minutes) until the child shows its identity and job."""
    assert attempt.run_id is not None  # noqa: S101  # set by dispatch
    assert attempt.dispatched_at is not None  # noqa: S101  # set by dispatch
    deadline = attempt.dispatched_at + timing.STARTUP_WINDOW_SECONDS
    seq.clock.sleep(timing.STARTUP_FIRST_CHECK_SECONDS)
    last = "not checked yet"
    while True:
        try:
            observation = observe_run(seq.client, attempt.run_id, deadline)
        except (NotFound, *TRANSIENT_ERRORS) as exc:  # 404 is tolerated only here
            last = str(exc)
        else:
            seq.check_identity(observation)
            if observation.jobs:
                seq.note_job(attempt, observation)
                return observation
            last = f"run visible, job metadata pending ({observation.describe()})"
        if seq.clock.monotonic() + timing.STARTUP_POLL_SECONDS > deadline:
            raise SequenceError(
                f"child run {attempt.run_id} did not show its identity and worker job within "
                f"the 2-minute startup window; last: {last}"
            )
        seq.clock.sleep(timing.STARTUP_POLL_SECONDS)
