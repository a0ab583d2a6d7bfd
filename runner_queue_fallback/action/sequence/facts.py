"""What a phase returns: the facts it found on the way, and its result (the next phase, the error).

A phase is a generator: it yields each fact the moment it is found, and the coordinator applies it
to the sequence's state and the attempt ledger at once (`action/ledger.py`, the only code that
writes them), so what the phase reads next (the active child, the client's patience) already
holds it. The phase then returns a `PhaseResult`: which phase comes next, what the next phase
starts from, and the error that ends the sequence, if any. An error of a read (GitHub's reply,
an identity that does not match) still propagates as an exception.
"""

from __future__ import annotations

import enum
from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from runner_queue_fallback.action.attempts import AttemptState

if TYPE_CHECKING:
    from runner_queue_fallback.action.cleanup import RunNameSearch
    from runner_queue_fallback.action.observe import Expected, Observation
    from runner_queue_fallback.action.pool_access import Skip
    from runner_queue_fallback.core.errors import RQFError

__all__ = [
    "AdmissionWaited",
    "Allocated",
    "Became",
    "ChildFound",
    "ChildOver",
    "ChildReplaced",
    "CopyFound",
    "DefinitionRead",
    "DispatchRefused",
    "DispatchSent",
    "EarlierRun",
    "Fact",
    "FoundByName",
    "JobEnd",
    "JobRead",
    "Next",
    "Phase",
    "PhaseResult",
    "QueueLeft",
    "Race",
    "RelistDone",
    "RunUnseen",
    "RunnerOnJob",
    "Skipped",
    "Verdict",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class JobEnd:
    """The coordinator's job ends at `ends_at` (`clock.monotonic()`); `text` says what ends it."""

    ends_at: float
    text: str


@dataclass(frozen=True)
class AdmissionWaited:
    """An admission wait of `seconds` is about to be taken (it counts against the budget)."""

    seconds: float


@dataclass(frozen=True)
class DefinitionRead:
    """The preflight read workflow-ref's commit and the child's blob SHA there."""

    commit: str
    blob: str


@dataclass(frozen=True)
class Skipped:
    """The candidate's pool is proven unable to serve this workflow: it is not dispatched."""

    skip: Skip


@dataclass(frozen=True)
class DispatchSent:
    """The dispatch POST is about to go: the child must show `expected`; the quota waited then."""

    expected: Expected
    at: float
    quota_waited: float


@dataclass(frozen=True)
class DispatchRefused:
    """GitHub refused the dispatch (4xx): no run was created, nothing is in flight."""


@dataclass(frozen=True)
class RunUnseen:
    """A run may exist whose id is not known (a lost reply, a reply without it): wait out the quota."""


@dataclass(frozen=True)
class Became:
    """The attempt is now in `state`."""

    state: AttemptState


@dataclass(frozen=True)
class ChildFound:
    """The attempt's run is known: it becomes the active child (saved for the post step)."""

    run_id: int
    url: str
    by_name: bool = False


@dataclass(frozen=True)
class ChildReplaced:
    """A run listed late replaced the child: its queue clock and its state start again."""


@dataclass(frozen=True)
class CopyFound:
    """Another run bears the request id: the cleanup cancels it too (so does the post step)."""

    run_id: int


@dataclass(frozen=True)
class FoundByName:
    """The child was found by its run-name: listed once more at `relist_at` by `search`."""

    search: RunNameSearch
    relist_at: float


@dataclass(frozen=True)
class RelistDone:
    """The one listing again after a child found by run-name was sent."""


@dataclass(frozen=True)
class JobRead:
    """A read of the child's worker job.

    `step_started`: a step of the worker was seen begun; `queued_read`: when it was read without
    a runner (None: not so); `job_url`: its link, first seen; `queued_at`: the queue clock
    starts then (None: already started, or not queued).
    """

    step_started: bool
    queued_read: float | None = None
    job_url: str | None = None
    queued_at: float | None = None


@dataclass(frozen=True)
class QueueLeft:
    """The queue deadline passed at `at`: the child is being cancelled."""

    at: float


@dataclass(frozen=True)
class Race:
    """A runner was seen at `at` while the child was being cancelled."""

    at: float


@dataclass(frozen=True)
class ChildOver:
    """The active child was confirmed over: nothing is left for the cleanup or the post step."""


@dataclass(frozen=True)
class Allocated:
    """A runner was seen (or the child is over): the queue's end and the allocation, booked once.

    Each time is set only where the attempt has none yet.
    """

    queued_at: float
    queue_left_at: float
    allocated_at: float | None
    runner_name: str | None
    runner_seen: bool


@dataclass(frozen=True)
class RunnerOnJob:
    """The runner the worker job shows now; `requeued_from`: one GitHub took the job back from."""

    runner_name: str | None
    requeued_from: str | None = None


@dataclass(frozen=True)
class EarlierRun:
    """A run created before the child, which had a runner, bears its run-name: `child` was a copy."""

    child: int
    at: float


@dataclass(frozen=True)
class Verdict:
    """The child finished: its run's and its worker job's conclusions (`missing`: no job)."""

    run: str | None
    worker: str | None

    @classmethod
    def of(cls, observation: Observation) -> Verdict:
        """The verdict a finished observation shows."""
        job = observation.job
        return cls(observation.run.conclusion, job.conclusion if job else "missing")


Fact = (
    JobEnd
    | AdmissionWaited
    | DefinitionRead
    | Skipped
    | DispatchSent
    | DispatchRefused
    | RunUnseen
    | Became
    | ChildFound
    | ChildReplaced
    | CopyFound
    | FoundByName
    | RelistDone
    | JobRead
    | QueueLeft
    | Race
    | ChildOver
    | Allocated
    | RunnerOnJob
    | EarlierRun
    | Verdict
)

#: A phase, or a part of one: yields facts as it finds them, returns its value.
Phase = Generator[Fact, None, _T]


class Next(enum.Enum):
    """The phase a result sends the sequence to (`action/coordinator.py` runs them in order)."""

    #: the parent check, the job's end, admission, the preflight and the fit in the job
    ADMISSION = enum.auto()
    #: with `runners-token`: is the candidate's pool proven unable to serve this workflow?
    ACCESS = enum.auto()
    DISPATCH = enum.auto()
    STARTUP = enum.auto()
    QUEUE = enum.auto()
    DEADLINE = enum.auto()
    CANCEL = enum.auto()
    EXECUTION = enum.auto()
    #: this candidate is over without a runner: the sequence goes on to the next candidate
    NEXT_CANDIDATE = enum.auto()
    #: the sequence is over: with no error, the child's result was judged a success
    OVER = enum.auto()


@dataclass(frozen=True)
class PhaseResult:
    """What a phase ends with: the next phase, what that phase starts from, and the error.

    `observation`: the last read of the child; `cancel_by`: the end of the cancellation window
    the fresh read at the deadline opened; `facts`: applied before the error is raised.
    """

    next: Next
    observation: Observation | None = None
    cancel_by: float | None = None
    error: RQFError | None = None
    facts: tuple[Fact, ...] = ()
