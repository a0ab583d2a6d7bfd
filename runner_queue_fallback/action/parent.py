"""The parent check shared by the coordinator (before its first dispatch) and the child's guard."""

from __future__ import annotations

from collections.abc import Callable

from runner_queue_fallback.action.observe import GRACE_RUN_STATUSES
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import Cancelled, DeadlineExceeded, NotFound, SequenceError
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.models import WorkflowRun

__all__ = ["check_parent"]


def check_parent(
    client: GitHubClient,
    clock: Clock,
    run_id: int,
    attempt: int,
    log: Callable[[str], None],
    *,
    deadline: float | None = None,
) -> WorkflowRun:
    """Wait up to 2 minutes (5 s polls) for the parent run to show active with the same attempt.

    Queued, requested, pending and 404 are tolerated during the grace; terminal or unknown
    states, or another attempt, fail at once. Requests and retries share the grace deadline
    (`deadline`, default 2 minutes from now; the guard passes its own startup deadline).
    """
    if deadline is None:
        deadline = clock.monotonic() + timing.PARENT_GRACE_SECONDS
    last = "not read yet"
    last_error: Exception | None = None  # the refusal chains it: a spent quota is told apart
    while True:
        try:
            run = client.get_run(run_id, deadline=deadline)
        except (NotFound, DeadlineExceeded) as exc:
            last, last_error = f"{type(exc).__name__}: {exc}", exc
        else:
            if run.run_attempt != attempt:
                raise SequenceError(
                    f"parent run {run_id}: expected attempt {attempt}, observed attempt "
                    f"{run.run_attempt} (the parent was re-run)"
                )
            if run.status == "in_progress":
                return run
            if run.status not in GRACE_RUN_STATUSES:
                stopped = Cancelled if run.conclusion == "cancelled" else SequenceError
                raise stopped(  # a gate reads `cancelled` for a cancelled parent, not `error`
                    f"parent run {run_id}: expected an active run, observed status "
                    f"{run.status!r} conclusion {run.conclusion!r}"
                )
            last, last_error = f"status {run.status!r}", None
        if clock.monotonic() + timing.PARENT_POLL_SECONDS > deadline:
            raise SequenceError(
                f"parent run {run_id} attempt {attempt} did not show as active within 2 minutes; "
                f"last observed: {last}"
            ) from last_error
        log(f"Parent run {run_id} not active yet ({last}); checking again in 5s")
        clock.sleep(timing.PARENT_POLL_SECONDS)
