"""What every phase of one sequence shares, and the reads each of them makes of the child."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from runner_queue_fallback.action.attempts import Attempt, Result
from runner_queue_fallback.action.cleanup import RunNameSearch, observe_run
from runner_queue_fallback.action.observe import (
    ACTIVE_RUN_STATUSES,
    Expected,
    Observation,
    job_mismatches,
)
from runner_queue_fallback.core import hand_off, timing
from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import Cancelled, QuotaSpent, SequenceError
from runner_queue_fallback.core.inputs import CoordinatorInputs, RunContext
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.retry import Patience

__all__ = ["Sequence", "minutes", "seconds"]

_T = TypeVar("_T")


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
    #: when the parent attempt started (its `run_started_at`, GitHub's clock), from the parent
    #: check: no request id states an earlier time
    attempt_started: datetime | None = None
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
    #: the `clock.monotonic()` time at which the runner cancels the coordinator's job (None:
    #: unknown), read at the start of the sequence (`action/sequence/job_time.py`)
    job_ends_at: float | None = None
    #: what ends the job then, for messages: "timeout-minutes 90 of job `check`"
    job_end_text: str = ""
    #: the client's `quota_waited` when the active attempt was dispatched (a quota pause since
    #: then delayed the first sighting of its job: the queue clock starts at its `created_at`)
    waited_at_dispatch: float = 0.0
    #: the reset already warned of as outlasting the job (one warning a reset)
    _warned_reset: float | None = None

    def __post_init__(self) -> None:
        """Every wait for a spent quota, the client's own included, is checked against the job."""
        self.client.on_quota_wait = self.before_quota_wait

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
            hand_off.save_over(self.report, self._active)
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
        then lists them again.
        """
        attempt.run_id, attempt.run_url, attempt.job_url = run_id, url, None
        self.active = run_id
        self.in_flight = None
        hand_off.save_child(self.report, run_id, attempt.request_id, url, by_name=by_name)

    def add_other(self, run_id: int) -> None:
        """Another run bearing our request id: cleanup cancels it too (so does the post step)."""
        if run_id != self._active and run_id not in self.others:
            self.others.append(run_id)
            hand_off.save_copies(self.report, self.others)

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
        attempt.step_started = attempt.step_started or observation.step_started
        job = observation.job
        if job is not None and not observation.has_evidence:
            self.last_queued_read = self.clock.monotonic()
        if job is not None and attempt.job_url is None:
            attempt.job_url = job.html_url or f"{attempt.run_url}/job/{job.id}"
            hand_off.save_job_url(self.report, attempt.job_url)  # the post step's link
        if attempt.queued_at is None and not observation.has_evidence and job is not None:
            attempt.queued_at = self._queued_since(attempt, observation)
            attempt.outcome = "queued"
            late = self.clock.monotonic() - attempt.queued_at
            since = f", {seconds(late)} ago (its created_at)" if late >= 1.0 else ""
            self.report.log(
                f"Worker job of child {attempt.run_id} is queued: the queue clock starts{since} "
                f"({minutes(attempt.candidate.queue_seconds)} to acquire a runner)"
            )

    def _queued_since(self, attempt: Attempt, observation: Observation) -> float:
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

    def checked(
        self, attempt: Attempt, observation: Observation, *, allocated: bool
    ) -> Observation:
        """`poll_checks`; after a wait for the quota's reset inside them, the child read afresh.

        The read before the checks is then up to an hour old: what the sequence decides next
        (a deadline, a result) rests on a read made after the reset.
        """
        mark = self.client.stats.quota_waited
        self.poll_checks(allocated=allocated)
        if self.client.stats.quota_waited == mark:
            return observation
        self.report.log(f"Reading child {attempt.run_id} again after the quota's reset")
        return self.observe(attempt)

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

    def through_quota(self, read: Callable[[], _T], paused: Callable[[], str]) -> _T:
        """`read()`; each time the spent quota stops it, wait for the reset and read again at once.

        `paused()` names what pauses, for the log line (see `wait_out_quota`).
        """
        while True:
            try:
                return read()
            except QuotaSpent:
                if not self.wait_out_quota(paused()):
                    raise  # no reset ahead to wait for: the caller's window decides

    def wait_out_quota(self, paused: str) -> float:
        """A waiting phase met the spent quota: send nothing until its reset; the seconds waited.

        `paused` names what pauses (`the startup window of child 5 (80s of it left)`). At the
        reset the phase goes on from a fresh read, judged by its usual rules.
        """
        wait = self.client.quota_reset_in()
        if wait is None:  # the reset is already past: the next read may go at once
            return 0.0
        self.report.log(
            f"The API quota is spent until its reset at {self.client.reset_time()}: {paused} "
            f"pauses for {seconds(wait)}; nothing is sent before the reset, then a fresh read of "
            "the child decides"
        )
        self.sleep_through_quota(wait)
        return wait

    def sleep_through_quota(self, wait: float) -> None:
        """Wait `wait` seconds for the quota's reset (counted as such), warned of if need be."""
        self.before_quota_wait(wait)
        self.client.stats.quota_waited += wait
        self.clock.sleep(wait)

    def before_quota_wait(self, wait: float) -> None:
        """A quota wait with a child present that would reach the job's end is warned of first.

        The runner cancels the job at its end, and the cancellation cancels the child: the
        warning names the child and its link while there is still time to look.
        """
        ends, child = self.job_ends_at, self._child_text()
        if ends is None or child is None:
            return
        left = ends - self.clock.monotonic()
        reset = self.client.stats.rate_reset
        if wait < left or (reset is not None and reset == self._warned_reset):
            return
        self._warned_reset = reset
        self.report.warning(
            f"the API quota is spent until its reset at {self.client.reset_time()} "
            f"({seconds(wait)} from now), but this job reaches its end "
            f"({self.job_end_text or 'its timeout-minutes'}) in {seconds(max(0.0, left))}: the "
            f"runner will cancel the job during the wait, and with it {child}. Check that run",
            title="Job ends during a quota wait",
        )

    def _child_text(self) -> str | None:
        """The child a quota wait leaves waiting: its run id and link, or its run-name."""
        attempt = next((a for a in self.result.attempts if a.run_id == self._active), None)
        if self._active is not None:
            link = f" ({attempt.run_url})" if attempt is not None and attempt.run_url else ""
            return f"child run {self._active}{link}"
        if self.in_flight is not None:
            name = self.in_flight.request_id
            return f"the child dispatched as {name} (its reply was lost: look for run-name {name})"
        return None


def seconds(value: float) -> str:
    """A duration for a log line."""
    return f"{value:.0f}s"


def minutes(value: float) -> str:
    """A duration in minutes for a log line."""
    return f"{value / 60:g} min"
