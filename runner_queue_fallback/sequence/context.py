"""What every phase of one sequence shares, and the reads each of them makes of the child."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from runner_queue_fallback.attempts import Attempt, Result
from runner_queue_fallback.cleanup import RunNameSearch, observe_run
from runner_queue_fallback.clock import Clock
from runner_queue_fallback.errors import SequenceError
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.retry import Patience
from runner_queue_fallback.inputs import CoordinatorInputs, RunContext
from runner_queue_fallback.observe import (
    ACTIVE_RUN_STATUSES,
    Expected,
    Observation,
    job_mismatches,
)
from runner_queue_fallback.report import Reporter

__all__ = ["Sequence", "minutes", "seconds"]


@dataclass
class Sequence:
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
    #: the child run that may still be running (see `active`)
    _active: int | None = None
    #: an attempt whose dispatch POST was sent but whose run id is not known yet
    in_flight: Attempt | None = None
    #: when the child's job was last read without a runner (bounds the allocation time)
    last_queued_read: float | None = None
    #: the search by run-name that found the active child (an older server, a lost reply)
    by_name: RunNameSearch | None = None
    #: when the child found by run-name is to be listed for once more (older servers), if due
    relist_at: float | None = None
    #: runs bearing our request id besides the active child, which cleanup cancels and confirms
    others: list[int] = field(default_factory=list)

    @property
    def active(self) -> int | None:
        """The child run that may still be running: cleanup cancels and confirms it."""
        return self._active

    @active.setter
    def active(self, run_id: int | None) -> None:
        """While a child exists, the client waits out a spent quota rather than abandon it.

        A child that stops being active was confirmed over (cancelled cleanly, or finished and
        judged): the state says so, and the post step then has nothing to read or cancel.
        """
        if run_id is None and self._active is not None:
            self.report.save_state("child-over", str(self._active))
        self._active = run_id
        self.client.patience = Patience.SPEC if run_id is None else Patience.CHILD_EXISTS

    @property
    def expected_path(self) -> str:
        """The path the child run must show."""
        return f".github/workflows/{self.inputs.workflow}"

    def candidate_text(self, attempt: Attempt) -> str:
        """`candidate 2/3 (group / labels)`, as the round lines name where a child waits."""
        total = len(self.inputs.pools.candidates)
        return f"candidate {attempt.number}/{total} ({attempt.candidate.pool_text})"

    def set_active(self, attempt: Attempt, run_id: int, url: str, *, by_name: bool = False) -> None:
        """The attempt's run is known: remember it (and save it for the post step).

        A run found `by_name` may not be the only one bearing the request id: the post step
        then lists them again (`child-found-by-name`).
        """
        attempt.run_id, attempt.run_url, attempt.job_url = run_id, url, None
        self.active = run_id
        self.in_flight = None
        self.report.save_state("child-run-id", str(run_id))
        self.report.save_state("child-request-id", attempt.request_id)
        self.report.save_state("child-run-url", url)
        self.report.save_state("child-job-url", "")
        self.report.save_state("child-found-by-name", attempt.request_id if by_name else "")

    def add_other(self, run_id: int) -> None:
        """Another run bearing our request id: cleanup cancels it too (so does the post step)."""
        if run_id != self._active and run_id not in self.others:
            self.others.append(run_id)
            self.report.save_state("child-copies", ",".join(map(str, self.others)))

    def observe(self, attempt: Attempt, deadline: float | None = None) -> Observation:
        """Read the child and its job; its identity must match, and a first queued job is noted."""
        assert attempt.run_id is not None  # noqa: S101  # only called after dispatch
        observation = observe_run(self.client, attempt.run_id, deadline)
        self.check_identity(observation)
        self.note_job(attempt, observation)
        return observation

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

    def note_job(self, attempt: Attempt, observation: Observation) -> None:
        """Record the job's link, and start the queue clock when the job is first seen queued."""
        job = observation.job
        if job is not None and not observation.has_evidence:
            self.last_queued_read = self.clock.monotonic()
        if job is not None and attempt.job_url is None:
            attempt.job_url = job.html_url or f"{attempt.run_url}/job/{job.id}"
            self.report.save_state("child-job-url", attempt.job_url)  # the post step's link
        if attempt.queued_at is None and not observation.has_evidence and job is not None:
            attempt.queued_at = self.clock.monotonic()
            attempt.outcome = "queued"
            self.report.log(
                f"Worker job of child {attempt.run_id} is queued: the queue clock starts "
                f"({minutes(attempt.candidate.queue_seconds)} to acquire a runner)"
            )

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
            raise SequenceError(
                f"parent run {self.ctx.run_id}: expected attempt {self.ctx.run_attempt} still active, "
                f"observed attempt {parent.run_attempt} status {parent.status!r} conclusion "
                f"{parent.conclusion!r}"
            )

    def poll_checks(self, *, allocated: bool) -> None:
        """Each poll: the source ref (unless pinned after start) and the parent run."""
        if not (allocated and self.inputs.source_policy == "pinned-after-start"):
            self.check_source()
        self.check_parent_still_active()


def seconds(value: float) -> str:
    """A duration for a log line."""
    return f"{value:.0f}s"


def minutes(value: float) -> str:
    """A duration in minutes for a log line."""
    return f"{value / 60:g} min"
