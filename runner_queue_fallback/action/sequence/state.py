"""The state every phase of one sequence reads, and the reads each of them makes of the child.

The phases only read it: what they find comes back as facts (`facts.py`), which the coordinator
applies (`action/ledger.py`, the only code that writes it).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from runner_queue_fallback.action.attempts import Attempt, Result
from runner_queue_fallback.action.cleanup import RunNameSearch, observe_run
from runner_queue_fallback.action.observe import (
    ACTIVE_RUN_STATUSES,
    Expected,
    Observation,
    job_mismatches,
)
from runner_queue_fallback.action.sequence.facts import JobRead, Phase
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import Cancelled, SequenceError
from runner_queue_fallback.core.inputs import CoordinatorInputs, RunContext
from runner_queue_fallback.github.client import GitHubClient

__all__ = ["SequenceState", "checked", "minutes", "note_job", "observe", "read_child", "seconds"]


@dataclass
class SequenceState:
    """One coordinator's sequence: its wiring and the state that outlives a phase."""

    inputs: CoordinatorInputs
    ctx: RunContext
    client: GitHubClient
    clock: Clock
    report: Reporter
    #: the spread of admission waits; the composition root injects it (seeded in tests)
    rng: random.Random = field(default_factory=random.Random)
    result: Result = field(default_factory=Result)
    #: the identity the child being watched must show (set at its dispatch)
    expected: Expected | None = None
    #: blob SHA of the child workflow at the first dispatch; every later dispatch must match it
    definition_sha: str | None = None
    #: commit of workflow-ref read by the last preflight: the head SHA the child must show
    commit: str = ""
    #: when the parent attempt started (its `run_started_at`, GitHub's clock), from the parent
    #: check: no request id states an earlier time
    attempt_started: datetime | None = None
    #: the child run that may still be running: cleanup cancels and confirms it
    active: int | None = None
    #: an attempt whose dispatch POST was sent but whose run id is not known yet
    in_flight: Attempt | None = None
    #: a run may exist whose id is not known (a lost reply, an accepted dispatch without its id)
    run_unseen: bool = False
    #: when the child's job was last read without a runner (bounds the allocation time)
    last_queued_read: float | None = None
    #: the search by run-name that found the active child (an older server, a lost reply)
    by_name: RunNameSearch | None = None
    #: when the child found by run-name is to be listed for once more (older servers), if due
    relist_at: float | None = None
    #: runs bearing our request id besides the active child, which cleanup cancels and confirms
    others: list[int] = field(default_factory=list)
    #: the `clock.monotonic()` time at which the runner cancels the coordinator's job (None:
    #: unknown), read at the start of the sequence (`action/sequence/job_time.py`)
    job_ends_at: float | None = None
    #: what ends the job then, for messages: "timeout-minutes 90 of job `check`"
    job_end_text: str = ""
    #: the client's `quota_waited` when the active attempt was dispatched (a quota pause since
    #: then delayed the first sighting of its job: the queue clock starts at its `created_at`)
    waited_at_dispatch: float = 0.0

    @property
    def child_exists(self) -> bool:
        """Whether a child exists or may exist: the one thing the client's patience follows."""
        return self.active is not None or self.run_unseen

    @property
    def expected_path(self) -> str:
        """The path the child run must show."""
        return f".github/workflows/{self.inputs.workflow}"

    def candidate_text(self, attempt: Attempt) -> str:
        """`candidate 2/3 (group / labels)`, as the round lines name where a child waits."""
        total = len(self.inputs.pools.candidates)
        return f"candidate {attempt.number}/{total} ({attempt.candidate.pool_text})"

    def check_identity(self, observation: Observation) -> None:
        """The child is the run that was dispatched, or the sequence stops."""
        assert self.expected is not None  # noqa: S101  # set at dispatch
        problems = self.expected.run_mismatches(observation.run)
        if observation.jobs:
            problems += job_mismatches(observation.jobs)
        if problems:
            raise SequenceError(
                f"child run {observation.run.id} is not the run that was dispatched: "
                + "; ".join(problems)
            )

    def queued_since(self, attempt: Attempt, observation: Observation) -> float:
        """When the queue clock starts: now, or the job's `created_at` if a quota pause delayed us.

        The first read would have seen the job queued when it was created. GitHub writes whole
        seconds: the later end is taken, so that the deadline never comes early.
        """
        now = self.clock.monotonic()
        job = observation.job
        delayed = self.client.stats.quota_waited > self.waited_at_dispatch
        if not delayed or job is None or job.created_at is None:
            return now
        ago = (self.clock.now() - job.created_at).total_seconds() - 1.0
        floor = attempt.dispatched_at if attempt.dispatched_at is not None else now
        return min(now, max(floor, now - ago))

    def check_source(self) -> None:
        """The source ref still points at the approved SHA."""
        observed = self.client.get_commit_sha(self.inputs.source_ref)
        if observed != self.inputs.source_sha:
            raise SequenceError(
                f"source ref {self.inputs.source_ref} moved: expected {self.inputs.source_sha}, "
                f"observed {observed}. The approved revision is stale; start a new run for the new SHA"
            )

    def check_parent_still_active(self) -> None:
        """The coordinator's own run is still in progress, at the same attempt."""
        parent = self.client.get_run(self.ctx.run_id)
        if parent.run_attempt != self.ctx.run_attempt or parent.status not in ACTIVE_RUN_STATUSES:
            raise Cancelled(
                f"parent run {self.ctx.run_id}: expected attempt {self.ctx.run_attempt} still active, "
                f"observed attempt {parent.run_attempt} status {parent.status!r} conclusion "
                f"{parent.conclusion!r}"
            )

    def poll_checks(self, *, allocated: bool) -> None:
        """Each poll: the source ref (unless pinned after start) and the parent run."""
        if not (allocated and self.inputs.source_policy == "pinned-after-start"):
            self.check_source()
        self.check_parent_still_active()

    # -- a spent quota while a child exists or may exist -----------------------------------------

    def paused_window(self, end: float, mark: float | None = None) -> Callable[[], float]:
        """A window ending at `end`, whose end moves on by every wait for the quota's reset.

        `mark`: the client's `quota_waited` when the window opened (default: now). The startup
        window and the search by run-name count only the time the quota let them read.
        """
        start = self.client.stats.quota_waited if mark is None else mark
        return lambda: end + self.client.stats.quota_waited - start

    def startup_window(self, attempt: Attempt) -> Callable[[], float]:
        """The end of the attempt's 2-minute startup window, paused by every quota wait since.

        One window from the dispatch, shared by the search by run-name and the startup checks.
        """
        assert attempt.dispatched_at is not None  # noqa: S101  # set by dispatch
        end = attempt.dispatched_at + timing.STARTUP_WINDOW_SECONDS
        return self.paused_window(end, self.waited_at_dispatch)

    def child_text(self) -> str | None:
        """The child a quota wait leaves waiting: its run id and link, or its run-name."""
        attempt = next((a for a in self.result.attempts if a.run_id == self.active), None)
        if self.active is not None:
            link = f" ({attempt.run_url})" if attempt is not None and attempt.run_url else ""
            return f"child run {self.active}{link}"
        if self.in_flight is not None:
            name = self.in_flight.request_id
            return f"the child dispatched as {name} (its reply was lost: look for run-name {name})"
        return None


def read_child(seq: SequenceState, attempt: Attempt, deadline: float | None = None) -> Observation:
    """Read the child and its job; its identity must match."""
    assert attempt.run_id is not None  # noqa: S101  # only called after dispatch
    observation = observe_run(seq.client, attempt.run_id, deadline)
    seq.check_identity(observation)
    return observation


def observe(
    seq: SequenceState, attempt: Attempt, deadline: float | None = None
) -> Phase[Observation]:
    """Read the child and its job; its identity must match, and a first queued job is noted."""
    observation = read_child(seq, attempt, deadline)
    yield from note_job(seq, attempt, observation)
    return observation


def note_job(seq: SequenceState, attempt: Attempt, observation: Observation) -> Phase[None]:
    """Record the job's link, and start the queue clock when the job is first seen queued."""
    job = observation.job
    queued = job is not None and not observation.has_evidence
    url = None
    if job is not None and attempt.job_url is None:
        url = job.html_url or f"{attempt.run_url}/job/{job.id}"
    starts = attempt.queued_at is None and queued
    queued_at = seq.queued_since(attempt, observation) if starts else None
    yield JobRead(
        observation.step_started, seq.clock.monotonic() if queued else None, url, queued_at
    )
    if queued_at is not None:
        late = seq.clock.monotonic() - queued_at
        since = f", {seconds(late)} ago (its created_at)" if late >= 1.0 else ""
        seq.report.log(
            f"Worker job of child {attempt.run_id} is queued: the queue clock starts{since} "
            f"({minutes(attempt.candidate.queue_seconds)} to acquire a runner)"
        )


def checked(
    seq: SequenceState, attempt: Attempt, observation: Observation, *, allocated: bool
) -> Phase[Observation]:
    """`poll_checks`; after a wait for the quota's reset inside them, the child read afresh.

    The read before the checks is then up to an hour old: what the sequence decides next
    (a deadline, a result) rests on a read made after the reset.
    """
    mark = seq.client.stats.quota_waited
    seq.poll_checks(allocated=allocated)
    if seq.client.stats.quota_waited == mark:
        return observation
    seq.report.log(f"Reading child {attempt.run_id} again after the quota's reset")
    return (yield from observe(seq, attempt))


def seconds(value: float) -> str:
    """A duration for a log line."""
    return f"{value:.0f}s"


def minutes(value: float) -> str:
    """A duration in minutes for a log line."""
    return f"{value / 60:g} min"
