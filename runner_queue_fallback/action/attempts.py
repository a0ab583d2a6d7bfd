"""The attempt ledger: one entry per dispatch, how the whole sequence ended, and its `outcome` word.

The coordinator fills it in; the outputs, the step summary and the benchmarks read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner_queue_fallback.action.cleanup import CleanupResult
from runner_queue_fallback.core.errors import (
    Cancelled,
    QueuesExhausted,
    RQFError,
    WorkerFailed,
)
from runner_queue_fallback.core.outcome import CANCELLED, ERROR, FAILURE, NO_RUNNER, SUCCESS
from runner_queue_fallback.core.profiles import Candidate

__all__ = ["REFUSED", "Attempt", "Result", "outcome_of"]

#: The outcome of a dispatch GitHub refused (4xx): no run was created, so it is no dispatch sent.
REFUSED = "dispatch refused"


@dataclass
class Attempt:
    """One dispatch: where it went, what it became and how long it waited for a runner."""

    number: int
    candidate: Candidate
    #: the child's run-name, made just before its dispatch (it states GitHub's time then)
    request_id: str = ""
    run_id: int | None = None
    run_url: str | None = None
    job_url: str | None = None
    dispatched_at: float | None = None
    queued_at: float | None = None
    queue_left_at: float | None = None
    #: when a runner was allocated (GitHub's `started_at`, or first seen during a cancel: a race)
    allocated_at: float | None = None
    #: when this attempt's last phase ended (proof of cancellation, the result, or an error)
    ended_at: float | None = None
    outcome: str = "not dispatched"
    #: the dispatch reply carried no run id (older contract): the run was found by its run-name
    found_by_run_name: bool = False
    #: the runner the last read showed on the worker job (None: none, or no read yet)
    runner_name: str | None = None
    #: runners GitHub assigned the job and then took it back from, re-queueing it (in order)
    requeued_from: list[str] = field(default_factory=list)
    #: a read showed a step of the worker begun: the worker ran (its artifacts may exist)
    step_started: bool = False

    @property
    def queued_seconds(self) -> float | None:
        """Observed wait in the queue: from first seen queued to allocation or cancellation."""
        if self.queued_at is None or self.queue_left_at is None:
            return None
        return self.queue_left_at - self.queued_at

    @property
    def sent(self) -> bool:
        """Whether the dispatch was sent and not refused (a lost reply may have made a run)."""
        return self.dispatched_at is not None and self.outcome != REFUSED


@dataclass
class Result:
    """How the sequence ended."""

    attempts: list[Attempt] = field(default_factory=list)
    #: every candidate of the plan, in order (the summary marks those never tried)
    candidates: list[Candidate] = field(default_factory=list)
    success: bool = False
    error: RQFError | None = None
    cleanup: CleanupResult | None = None
    #: the cleanups of other runs bearing the child's request id (copies found by run-name)
    other_cleanups: list[CleanupResult] = field(default_factory=list)
    race: bool = False
    #: seconds waited for API quota before dispatches (admission): one budget for every candidate
    admission_waited: float = 0.0
    #: the REST API version the sequence ended on ("" when no request was made)
    api_version: str = ""

    @property
    def last(self) -> Attempt | None:
        """The last dispatched attempt: the one the outputs describe."""
        return self.dispatched[-1] if self.dispatched else None

    @property
    def dispatched(self) -> list[Attempt]:
        """The attempts whose dispatch was sent: a refused one is not, a lost reply's is."""
        return [a for a in self.attempts if a.sent]


def outcome_of(result: Result) -> str:
    """The word for a sequence that ran: its success, else the type of the error that ended it.

    `failure` needs a worker that ran: a step of its job seen started. A child that outlived its
    execution timeout without one (a job GitHub re-queued and never ran) is an `error`.
    """
    if result.success:
        return SUCCESS
    error = result.error
    if isinstance(error, Cancelled):
        return CANCELLED
    if isinstance(error, QueuesExhausted):
        return NO_RUNNER
    last = result.last
    if isinstance(error, WorkerFailed) and last is not None and last.step_started:
        return FAILURE
    return ERROR
