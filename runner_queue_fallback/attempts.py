"""The attempt ledger: one entry per dispatch, and how the whole sequence ended.

The coordinator fills it in; the outputs, the step summary and the benchmarks read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner_queue_fallback.cleanup import CleanupResult
from runner_queue_fallback.errors import RQFError
from runner_queue_fallback.profiles import Candidate

__all__ = ["Attempt", "Result"]


@dataclass
class Attempt:
    """One dispatch: where it went, what it became and how long it waited for a runner."""

    number: int
    candidate: Candidate
    request_id: str
    run_id: int | None = None
    run_url: str | None = None
    job_url: str | None = None
    dispatched_at: float | None = None
    queued_at: float | None = None
    queue_left_at: float | None = None
    outcome: str = "not dispatched"
    #: the dispatch reply carried no run id (older contract): the run was found by its run-name
    found_by_run_name: bool = False

    @property
    def queued_seconds(self) -> float | None:
        """Observed wait in the queue: from first seen queued to allocation or cancellation."""
        if self.queued_at is None or self.queue_left_at is None:
            return None
        return self.queue_left_at - self.queued_at


@dataclass
class Result:
    """How the sequence ended."""

    attempts: list[Attempt] = field(default_factory=list)
    success: bool = False
    error: RQFError | None = None
    cleanup: CleanupResult | None = None
    race: bool = False
    #: waits for API quota before a dispatch (admission), and their total in seconds
    admission_waits: int = 0
    admission_waited: float = 0.0
    #: the REST API version the sequence ended on ("" when no request was made)
    api_version: str = ""

    @property
    def last(self) -> Attempt | None:
        """The last dispatched attempt: the one the outputs describe."""
        return self.dispatched[-1] if self.dispatched else None

    @property
    def dispatched(self) -> list[Attempt]:
        """The attempts whose dispatch was sent."""
        return [a for a in self.attempts if a.dispatched_at is not None]
