"""The original's polling policy, as its README describes it, on our client and our fake GitHub.

What the original does (spec, "Behavior and limits"): poll once per minute while queued or
executing, four reads a poll (the child run, its jobs, the source ref, the parent run), no
conditional requests, and the queue deadline is only noticed at the next minute poll.

Everything else is deliberately the same as ours, so that only the polling policy differs: the
same `GitHubClient` (with `conditional=False`, same retry rules), the same parent check, the same
preflight (parent, source ref, workflow file, workflow ref), dispatch once, the same startup window
(15 s, then 5 s), and the same cancellation: a fresh read, cancel, then run and job checked
together every 5 s within one 2-minute window (force-cancel past half; a runner seen means a race
error). Identity checks are left out: they read nothing extra, so they cost no requests.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from runner_queue_fallback import timing
from runner_queue_fallback.cleanup import CleanupResult, cancel_and_confirm, observe_run
from runner_queue_fallback.clock import Clock
from runner_queue_fallback.errors import (
    DeadlineExceeded,
    GitHubError,
    NotFound,
    RQFError,
    SequenceError,
)
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.inputs import CoordinatorInputs, RunContext
from runner_queue_fallback.observe import Observation
from runner_queue_fallback.parent import check_parent
from runner_queue_fallback.profiles import Candidate

__all__ = ["BaselineResult", "OriginalCoordinator"]

#: "Poll once per minute while queued or executing": the original's only polling interval.
POLL_SECONDS = 60.0


@dataclass
class BaselineResult:
    """How the baseline's sequence ended (the fields the bench reads from ours too)."""

    success: bool = False
    error: RQFError | None = None
    cleanup: CleanupResult | None = None
    dispatches: int = 0


@dataclass
class _Child:
    run_id: int
    candidate: Candidate
    queued_at: float | None = None
    notes: list[str] = field(default_factory=list)


class OriginalCoordinator:
    """A small loop with the original's polling policy; `run()` never raises an RQFError."""

    def __init__(
        self,
        inputs: CoordinatorInputs,
        run: RunContext,
        client: GitHubClient,
        clock: Clock,
        *,
        make_token: Callable[[], str] = lambda: secrets.token_hex(4),
    ) -> None:
        """Wire the loop to a client (give it `conditional=False`) and a clock."""
        self.inputs = inputs
        self.ctx = run
        self.client = client
        self.clock = clock
        self.make_token = make_token
        self.result = BaselineResult()
        self._active: int | None = None
        self._path = f".github/workflows/{inputs.workflow}"

    def run(self) -> BaselineResult:
        """Run the sequence; errors end up in the result, and the active child is cleaned up."""
        try:
            self._sequence()
        except RQFError as exc:
            self.result.error = exc
            if self._active is not None:
                self.result.cleanup = cancel_and_confirm(self.client, self.clock, self._active)
        return self.result

    def _sequence(self) -> None:
        check_parent(
            self.client, self.clock, self.ctx.run_id, self.ctx.run_attempt, lambda _line: None
        )
        candidates = self.inputs.pools.candidates
        for number, candidate in enumerate(candidates, start=1):
            if self._try(number, candidate):
                return
        raise SequenceError(f"all {len(candidates)} queue(s) exhausted")

    def _try(self, number: int, candidate: Candidate) -> bool:
        """One candidate: True when the sequence is over, False to fall back."""
        if number > 1:
            self._check_parent()
        self._check_source()
        self.client.get_file_sha(self._path, self.inputs.workflow_ref)
        self._workflow_commit()
        request_id = f"rqf-{self.ctx.run_id}-{self.ctx.run_attempt}-{number}-{self.make_token()}"
        dispatched_at = self.clock.monotonic()
        reply = self.client.dispatch_workflow(
            self.inputs.workflow,
            self.inputs.workflow_ref,
            {
                "request-id": request_id,
                "parent-run-id": str(self.ctx.run_id),
                "parent-run-attempt": str(self.ctx.run_attempt),
                "source-ref": self.inputs.source_ref,
                "source-sha": self.inputs.source_sha,
                "runner": candidate.runner_json(),
                "workload": self.inputs.workload,
            },
        )
        self.result.dispatches += 1
        self._active = reply.workflow_run_id
        child = _Child(reply.workflow_run_id, candidate)
        observation = self._startup(child, dispatched_at)
        if not (observation.has_evidence or observation.finished):
            child.queued_at = self.clock.monotonic()
            waited = self._wait_in_queue(child, observation)
            if waited is None:
                self._cancel_and_confirm(child)
                return False
            observation = waited
        self._wait_for_result(child, observation)
        return True

    # -- the original's polling policy ------------------------------------------------------

    def _poll(self, child: _Child) -> Observation:
        """One minute poll: the child run, its jobs, the source ref and the parent run."""
        observation = observe_run(self.client, child.run_id, None)
        self._check_source()
        self._check_parent()
        return observation

    def _wait_in_queue(self, child: _Child, observation: Observation) -> Observation | None:
        """Sleep a full minute, poll, and only then look at the deadline; None: it passed."""
        assert child.queued_at is not None  # set by the caller
        deadline = child.queued_at + child.candidate.queue_seconds
        while not (observation.has_evidence or observation.finished):
            self.clock.sleep(POLL_SECONDS)
            observation = self._poll(child)
            if observation.has_evidence or observation.finished:
                return observation
            if self.clock.monotonic() >= deadline:
                fresh = observe_run(self.client, child.run_id, None)  # fresh read, as ours
                return fresh if fresh.has_evidence or fresh.finished else None
        return observation

    def _wait_for_result(self, child: _Child, observation: Observation) -> None:
        deadline = self.clock.monotonic() + self.inputs.pools.execution_timeout_minutes * 60
        while not observation.finished:
            if self.clock.monotonic() >= deadline:
                raise SequenceError(f"child {child.run_id} hit the execution timeout")
            self.clock.sleep(POLL_SECONDS)
            observation = self._poll(child)
        self._active = None
        if not observation.succeeded:
            raise SequenceError(f"the worker of child {child.run_id} did not succeed")
        self.result.success = True

    # -- the same as ours -----------------------------------------------------------------

    def _startup(self, child: _Child, dispatched_at: float) -> Observation:
        """15 s, then every 5 s within 2 minutes, until the child shows its job."""
        deadline = dispatched_at + timing.STARTUP_WINDOW_SECONDS
        self.clock.sleep(timing.STARTUP_FIRST_CHECK_SECONDS)
        while True:
            try:
                observation = observe_run(self.client, child.run_id, deadline)
            except GitHubError as exc:
                child.notes.append(str(exc))
            else:
                if observation.jobs:
                    return observation
            if self.clock.monotonic() + timing.STARTUP_POLL_SECONDS > deadline:
                raise SequenceError(f"child {child.run_id} did not show its job within 2 minutes")
            self.clock.sleep(timing.STARTUP_POLL_SECONDS)

    def _cancel_and_confirm(self, child: _Child) -> None:
        """Cancel, then check run and job every 5 s within 2 minutes (as ours does)."""
        deadline = self.clock.monotonic() + timing.CANCEL_WINDOW_SECONDS
        self.client.cancel_run(child.run_id, deadline=deadline)
        forced = False
        while True:
            if self.clock.monotonic() + timing.CANCEL_POLL_SECONDS > deadline:
                raise SequenceError(f"cancellation of child {child.run_id} was not confirmed")
            self.clock.sleep(timing.CANCEL_POLL_SECONDS)
            try:
                last = observe_run(self.client, child.run_id, deadline)
            except (DeadlineExceeded, GitHubError):
                continue
            if last.has_evidence:
                raise SequenceError(f"child {child.run_id} acquired a runner while being cancelled")
            if last.cancelled_cleanly:
                self._active = None
                return
            if last.finished:
                raise SequenceError(f"child {child.run_id} ended unexpectedly")
            half = deadline - self.clock.monotonic() <= timing.CANCEL_WINDOW_SECONDS / 2
            if not forced and last.run.status != "completed" and half:
                forced = True
                self.client.force_cancel_run(child.run_id, deadline=deadline)

    def _check_source(self) -> None:
        observed = self.client.get_ref_sha(self.inputs.source_ref)
        if observed != self.inputs.source_sha:
            raise SequenceError(f"source ref {self.inputs.source_ref} moved")

    def _check_parent(self) -> None:
        parent = self.client.get_run(self.ctx.run_id)
        if parent.run_attempt != self.ctx.run_attempt or parent.status == "completed":
            raise SequenceError(f"parent run {self.ctx.run_id} is no longer active")

    def _workflow_commit(self) -> str:
        ref = self.inputs.workflow_ref
        try:
            return self.client.get_ref_sha(f"heads/{ref}")
        except NotFound:
            return self.client.get_ref_sha(f"tags/{ref}")
