"""The attempt ledger: one entry per dispatch, how the whole sequence ended, and its `outcome` word.

The coordinator fills it in (`action/ledger.py` applies what the phases found); the outputs, the
step summary and the benchmarks read it. An attempt's state is an `AttemptState`; the words a
person reads (the summary, the logs, `attempts-json`) come from `AttemptState.words` alone, so no
code compares them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runner_queue_fallback.action.cleanup import CleanupResult
from runner_queue_fallback.core.errors import (
    Cancelled,
    NoPool,
    QueuesExhausted,
    RQFError,
    WorkerFailed,
)
from runner_queue_fallback.core.outcome import (
    CANCELLED,
    ERROR,
    FAILURE,
    NO_POOL,
    NO_RUNNER,
    SUCCESS,
)
from runner_queue_fallback.core.profiles import Candidate

if TYPE_CHECKING:
    from runner_queue_fallback.action.pool_access import Skip

__all__ = ["Attempt", "AttemptState", "Result", "outcome_of"]


class AttemptState(enum.Enum):
    """Where one attempt stands; `words` is how the outputs and the summary name it."""

    NOT_DISPATCHED = enum.auto()
    #: with `runners-token`: its pool is proven unable to serve this workflow, so no dispatch
    SKIPPED = enum.auto()
    #: GitHub refused the dispatch (4xx): no run was created, so it is no dispatch sent
    REFUSED = enum.auto()
    REPLY_LOST = enum.auto()
    #: accepted without its run id (older contract), and no run bearing its run-name found
    RUN_NOT_FOUND = enum.auto()
    DISPATCHED = enum.auto()
    QUEUED = enum.auto()
    ALLOCATED = enum.auto()
    CANCELLING = enum.auto()
    CANCELLED = enum.auto()
    RACE = enum.auto()
    EXECUTION_TIMEOUT = enum.auto()
    #: a run created before the child, which already had a runner, bears its run-name
    EARLIER_RUN = enum.auto()
    #: the child is over: its run's and its worker job's conclusions say how
    FINISHED = enum.auto()

    @property
    def in_flight(self) -> bool:
        """Whether the child may still be running: a cleanup that proves it over says how it ended."""
        return self in _IN_FLIGHT

    def words(self, run: str | None = None, worker: str | None = None) -> str:
        """The outcome a person reads; `run` and `worker`: a finished child's conclusions."""
        if self is AttemptState.FINISHED:
            return f"run {run}, worker {worker}"
        return _WORDS[self]


_WORDS = {
    AttemptState.NOT_DISPATCHED: "not dispatched",
    AttemptState.SKIPPED: "skipped",
    AttemptState.REFUSED: "dispatch refused",
    AttemptState.REPLY_LOST: "dispatch reply lost",
    AttemptState.RUN_NOT_FOUND: "dispatch accepted, run not found",
    AttemptState.DISPATCHED: "dispatched",
    AttemptState.QUEUED: "queued",
    AttemptState.ALLOCATED: "runner allocated",
    AttemptState.CANCELLING: "cancelling after queue timeout",
    AttemptState.CANCELLED: "cancelled before a runner (queue timeout)",
    AttemptState.RACE: "runner acquired during cancellation (race)",
    AttemptState.EXECUTION_TIMEOUT: "execution timeout",
    AttemptState.EARLIER_RUN: "an earlier run bears its run-name",
}
#: While its child may still be running; once a cleanup proves the child over, the attempt
#: reads as the child ended (a cancelled child was once listed `queued`).
_IN_FLIGHT = frozenset({AttemptState.DISPATCHED, AttemptState.QUEUED, AttemptState.ALLOCATED})


@dataclass
class Attempt:
    """One candidate tried: where its dispatch went, what it became, how long it waited.

    A candidate skipped before its dispatch (`skip`) is an attempt with no dispatch.
    """

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
    state: AttemptState = AttemptState.NOT_DISPATCHED
    #: a finished child's conclusions, its run's and its worker job's (`missing`: no job)
    conclusions: tuple[str | None, str | None] = (None, None)
    #: the dispatch reply carried no run id (older contract): the run was found by its run-name
    found_by_run_name: bool = False
    #: the runner the last read showed on the worker job (None: none, or no read yet)
    runner_name: str | None = None
    #: runners GitHub assigned the job and then took it back from, re-queueing it (in order)
    requeued_from: list[str] = field(default_factory=list)
    #: a read showed a step of the worker begun: the worker ran (its artifacts may exist)
    step_started: bool = False
    #: why its pool was skipped before any dispatch (`runners-token`); None: not skipped
    skip: Skip | None = None

    @property
    def queued_seconds(self) -> float | None:
        """Observed wait in the queue: from first seen queued to allocation or cancellation."""
        if self.queued_at is None or self.queue_left_at is None:
            return None
        return self.queue_left_at - self.queued_at

    @property
    def outcome(self) -> str:
        """What became of it, in the words of the summary and `attempts-json`."""
        return self.state.words(*self.conclusions)

    @property
    def sent(self) -> bool:
        """Whether the dispatch was sent and not refused (a lost reply may have made a run)."""
        return self.dispatched_at is not None and self.state is not AttemptState.REFUSED


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
    if isinstance(error, NoPool):
        return NO_POOL
    last = result.last
    if isinstance(error, WorkerFailed) and last is not None and last.step_started:
        return FAILURE
    return ERROR
