"""The fallback sequence: one child at a time, pool after pool, until a runner takes it.

    parent check -> the job's end (its timeout-minutes, read once) -> for each candidate:
        admission (API quota for one candidate, else wait for the reset) -> preflight (source
        ref, workflow definition) -> with runners-token, the pool proven unable to serve the
        child is skipped (the next candidate, at once) -> after a wait for quota, the candidate
        must fit in what is left of the job -> dispatch once -> startup window (identity)
        -> queued (polls, one lands on the deadline; a spent quota is waited out)
            -> deadline: fresh read, cancel, prove nothing ran (5 s polls in a 2-minute window)
               -> next candidate
            -> runner or step seen: no more fallback -> wait for the result (execution timeout)

Each phase lives in its own module under `action/sequence/`: it yields the facts it finds and
returns a `PhaseResult` (the next phase, what that phase starts from, the error). This module runs
the phases in the order their results name, applies every fact to the state and the attempt
ledger (`action/ledger.py`), and owns the exits: every exit leaves the active child confirmed
over, or names it as unconfirmed.
"""

from __future__ import annotations

import random
import secrets
import traceback
from collections.abc import Callable
from typing import TypeVar

from runner_queue_fallback.action import ledger
from runner_queue_fallback.action.attempts import Attempt, Result
from runner_queue_fallback.action.cleanup import CleanupResult, cancel_and_confirm_all
from runner_queue_fallback.action.observe import Observation
from runner_queue_fallback.action.parent import check_parent
from runner_queue_fallback.action.pool_access import PoolAccess, no_pool_error
from runner_queue_fallback.action.sequence import (
    access,
    cancellation,
    dispatch,
    execution,
    job_time,
    queue,
    startup,
)
from runner_queue_fallback.action.sequence import (
    admission as quota,
)
from runner_queue_fallback.action.sequence.facts import ChildOver, Next, Phase, PhaseResult, Verdict
from runner_queue_fallback.action.sequence.quota_pause import job_end_warning
from runner_queue_fallback.action.sequence.state import SequenceState
from runner_queue_fallback.core import hand_off, timing
from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import (
    Cancelled,
    GitHubError,
    Interrupted,
    QueuesExhausted,
    RQFError,
    SequenceError,
    UnexpectedError,
)
from runner_queue_fallback.core.inputs import CoordinatorInputs, RunContext
from runner_queue_fallback.core.request_id import RequestId, stated_time
from runner_queue_fallback.github.client import GitHubClient

__all__ = ["Attempt", "Coordinator", "Result"]  # the ledger types are re-exported for callers

_T = TypeVar("_T")


#: At most this many waits for a rate limit before one dispatch (each also counts against
#: admission-timeout-minutes, which normally ends the waiting first).
_ADMISSION_ROUNDS = 12


class Coordinator:
    """Runs the fallback sequence for validated inputs against one repository."""

    def __init__(
        self,
        inputs: CoordinatorInputs,
        run: RunContext,
        client: GitHubClient,
        clock: Clock,
        reporter: Reporter,
        *,
        make_token: Callable[[], str] = lambda: secrets.token_hex(4),
        rng: random.Random | None = None,
        runners: GitHubClient | None = None,
    ) -> None:
        """Wire the sequence to its client, clock, reporter and random source (admission spread).

        `runners`: the client of `runners-token` (None without one), for the pools' access reads.
        """
        spread = rng or random.Random()  # spreads waits; not a secret
        self.seq = SequenceState(inputs, run, client, clock, reporter, spread)
        self.seq.result.candidates = list(inputs.pools.candidates)
        # Every wait for a spent quota, the client's own included, is checked against the job.
        client.on_quota_wait = job_end_warning(self.seq)
        self.make_token = make_token
        self._parent_confirmed = False
        self._started = clock.monotonic()  # this step's start: the job's end is counted from it
        self._job_end_read = False
        self._runners = runners
        self._access: PoolAccess | None = None  # made once the child's commit is known

    @property
    def result(self) -> Result:
        """What happened so far: the attempts, the error, the cleanup."""
        return self.seq.result

    def run(self) -> Result:
        """Run the whole sequence; never raises (an error of any type is recorded in the result).

        Every error, ours or not, goes through the same cleanup (cancel and confirm the active
        child) so that the caller can publish the outputs, the summary and one annotation.
        """
        clock = self.seq.clock
        try:
            self._sequence()
            # Followed to its result: the post step has no run bearing its run-name to list.
            hand_off.save_followed_to_result(self.seq.report)
        except Interrupted as exc:
            self.result.error = Cancelled(str(exc))
            deadline = clock.monotonic() + timing.SIGNAL_CLEANUP_BUDGET_SECONDS
            self._run(dispatch.find_interrupted_dispatch(self.seq, deadline), self.seq.in_flight)
            self._clean_up_safely(window=max(0.0, deadline - clock.monotonic()))
        except Exception as exc:  # noqa: BLE001  # invariant 10: no exception skips the cleanup
            self.result.error = exc if isinstance(exc, RQFError) else self._unexpected(exc)
            try:
                # After an error the cleanup may wait for a spent quota to reset (a departure).
                self._clean_up_safely(
                    window=timing.CANCEL_WINDOW_SECONDS, reset_budget=timing.RESET_WAIT_MAX_SECONDS
                )
            except Interrupted as signal:
                # The runner cancelled the step while an error was being cleaned up: start the
                # cleanup again within the signal's grace, so the result is still published.
                self.seq.report.log(f"{signal} during the cleanup; cleaning up within the grace")
                self._clean_up_safely(window=timing.SIGNAL_CLEANUP_BUDGET_SECONDS)
        self.result.api_version = self.seq.client.version
        return self.result

    def _unexpected(self, exc: Exception) -> UnexpectedError:
        """Record a foreign exception as an error; its traceback goes to the log, for the report."""
        with self.seq.report.group(f"Traceback of the unexpected {type(exc).__name__}"):
            for line in "".join(traceback.format_exception(exc)).splitlines():
                self.seq.report.log(line)
        return UnexpectedError("the fallback sequence", exc)

    def _sequence(self) -> None:
        seq = self.seq
        candidates = seq.inputs.pools.candidates
        for number, candidate in enumerate(candidates, start=1):
            attempt = Attempt(number, candidate)
            self.result.attempts.append(attempt)
            with seq.report.group(f"Candidate {number}/{len(candidates)}: {candidate.pool_text}"):
                over = self._try(attempt)
                attempt.ended_at = seq.clock.monotonic()
                if over:
                    return
        skipped = [(a.candidate, a.skip) for a in self.result.attempts if a.skip is not None]
        if len(skipped) == len(candidates):
            raise no_pool_error(skipped)
        tried = len(candidates) - len(skipped)
        also = f"; {len(skipped)} skipped before any dispatch" if skipped else ""
        raise QueuesExhausted(
            f"all {tried} queue(s) exhausted: no runner was acquired in any candidate pool{also}"
        )

    def _try(self, attempt: Attempt) -> bool:
        """Run one candidate's phases; True when the sequence is over, False to fall back.

        Each phase's result names the next; its facts are applied, then its error raised.
        """
        step = PhaseResult(Next.ADMISSION)
        while step.next not in (Next.NEXT_CANDIDATE, Next.OVER):
            step = self._run(self._phase(attempt, step), attempt)
            for fact in step.facts:
                ledger.apply(self.seq, attempt, fact)
            if step.error is not None:
                raise step.error
        if step.next is Next.OVER:  # over without an error: the child succeeded
            self.result.success = True
        return step.next is Next.OVER

    def _phase(self, attempt: Attempt, step: PhaseResult) -> Phase[PhaseResult]:  # noqa: PLR0911  # one return a phase
        """The phase `step` names, started from what it found."""
        seq = self.seq
        match step.next:
            case Next.ADMISSION:
                return self._admitted(attempt)
            case Next.ACCESS:
                return access.check_access(seq, attempt, self._pool_access())
            case Next.DISPATCH:
                job_time.check_dispatch(seq, attempt)  # after a quota wait: fit in the job, or stop
                if not attempt.request_id:  # one a rate limit refused goes again as it was
                    attempt.request_id = self._request_id(attempt.number)  # GitHub's time, now
                return dispatch.dispatch(seq, attempt)
            case Next.STARTUP:
                return startup.wait_for_startup(seq, attempt)
            case Next.QUEUE:
                assert step.observation is not None  # noqa: S101  # the startup's last read
                return self._wait_in_queue(attempt, step.observation)
            case Next.DEADLINE:
                return queue.read_at_deadline(seq, attempt)
            case Next.CANCEL:
                assert step.cancel_by is not None  # noqa: S101  # the deadline's read opened it
                return cancellation.cancel_and_prove(seq, attempt, step.cancel_by)
            case _:
                assert step.next is Next.EXECUTION  # noqa: S101  # the last phase before the end
                assert step.observation is not None  # noqa: S101  # the read that saw a runner
                return self._wait_for_result(attempt, step.observation)

    def _run(self, phase: Phase[_T], attempt: Attempt | None) -> _T:
        """Run `phase`, applying each fact it yields the moment it is found; its return value."""
        while True:
            try:
                fact = next(phase)
            except StopIteration as stop:
                value: _T = stop.value
                return value
            ledger.apply(self.seq, attempt, fact)

    def _admitted(self, attempt: Attempt) -> Phase[PhaseResult]:
        """The reads before a dispatch (the parent check before the first), with admission.

        No child exists yet: a read refused by a rate limit (a spent quota, or the secondary limit
        a fleet starting together meets) is one more admission wait within
        admission-timeout-minutes, not the end of the sequence. Each refusal costs a wait, so the
        rounds are bounded by the admission budget; the bound below only guards against a server
        that keeps refusing with a reset already past.
        """
        seq = self.seq
        for _ in range(_ADMISSION_ROUNDS):
            try:
                if not self._parent_confirmed:  # its grace is never renewed once it held
                    ctx = seq.ctx
                    parent = check_parent(
                        seq.client, seq.clock, ctx.run_id, ctx.run_attempt, seq.report.log
                    )
                    seq.attempt_started = parent.run_started_at  # no phase: the coordinator's own
                    seq.report.log(f"Parent run {ctx.run_id} attempt {ctx.run_attempt} is active")
                    self._parent_confirmed = True
                if not self._job_end_read:  # once; a spent quota waits for its reset and asks again
                    job_end = job_time.read_job_end(seq, self._started)
                    if job_end is not None:
                        ledger.apply(seq, attempt, job_end)
                    self._job_end_read = True
                yield from quota.admit(seq, attempt)
                yield from dispatch.preflight(seq, attempt)
            except (GitHubError, SequenceError) as exc:
                limit = quota.rate_limit_behind(exc)
                if limit is None:
                    raise
                seq.report.log(f"Before dispatching candidate {attempt.number}: {exc}")
                yield from quota.wait_out_limit(seq, attempt, limit)  # or fail, with no child
            else:
                return PhaseResult(Next.ACCESS)
        raise SequenceError(
            f"the API's rate limits still refused after {_ADMISSION_ROUNDS} waits; no child was "
            f"dispatched for candidate {attempt.number}"
        )

    def _pool_access(self) -> PoolAccess:
        """The sequence's one `PoolAccess`, made at the first ask: the preflight read the commit."""
        if self._access is None:
            seq = self.seq
            self._access = PoolAccess(
                None if self._runners is None else self._runners.runner_reads,
                repository=seq.ctx.repository,
                workflow=seq.inputs.workflow,
                workflow_ref=seq.inputs.workflow_ref,
                commit=seq.commit or None,
            )
        return self._access

    def _request_id(self, number: int) -> str:
        """A new request id; it states GitHub's time at its last reply, less the margin.

        Never the runner's clock: one ahead of GitHub's would state a time after the child's
        creation, and the guard's copy check would list from too late.
        """
        seq = self.seq
        stated = stated_time(seq.client.server_date(), seq.attempt_started)
        ctx = seq.ctx
        return str(RequestId(ctx.run_id, ctx.run_attempt, number, self.make_token(), stated))

    # The two waits are methods so that the bench's baseline can swap in the original's polling.

    def _wait_in_queue(self, attempt: Attempt, observation: Observation) -> Phase[PhaseResult]:
        return queue.wait_in_queue(self.seq, attempt, observation)

    def _wait_for_result(self, attempt: Attempt, observation: Observation) -> Phase[PhaseResult]:
        return execution.wait_for_result(self.seq, attempt, observation)

    def _clean_up_safely(self, window: float, reset_budget: float = 0.0) -> None:
        """`_clean_up`; if the cleanup itself fails unexpectedly, name the child it left."""
        try:
            self._clean_up(window, reset_budget)
        except Exception as exc:  # noqa: BLE001  # the result must still be published
            active = self.seq.active
            self.seq.report.log(f"The cleanup failed: {type(exc).__name__}: {exc}")
            if active is not None:
                detail = f"the cleanup failed: {UnexpectedError('the cleanup', exc)}"
                self.result.cleanup, *self.result.other_cleanups = (
                    CleanupResult(run_id, confirmed=False, last=None, detail=detail)
                    for run_id in (active, *self.seq.others)
                )

    def _clean_up(self, window: float, reset_budget: float = 0.0) -> None:
        seq = self.seq
        for attempt in self.result.attempts:  # a wait that ended by an error is still a wait
            if attempt.queued_at is not None and attempt.queue_left_at is None:
                attempt.queue_left_at = seq.clock.monotonic()
            if attempt.dispatched_at is not None and attempt.ended_at is None:
                attempt.ended_at = seq.clock.monotonic()
        if seq.active is None:
            return
        # Runs bearing our request id besides the child (copies, found by run-name) go with it.
        first, *others = cancel_and_confirm_all(
            seq.client,
            seq.clock,
            [seq.active, *seq.others],
            window=window,
            reset_budget=reset_budget,
            log=seq.report.log,
        )
        self.result.cleanup, self.result.other_cleanups = first, others
        self._note_ended(first)
        if all(result.confirmed for result in (first, *others)):
            ledger.apply(seq, None, ChildOver())  # the post step has nothing left to read

    def _note_ended(self, cleanup: CleanupResult) -> None:
        """A child the cleanup proved over is listed as it ended, not as it was last seen."""
        last = cleanup.last
        if not cleanup.confirmed or last is None:
            return
        for attempt in self.result.attempts:
            if attempt.run_id == cleanup.run_id and attempt.state.in_flight:
                ledger.apply(self.seq, attempt, Verdict.of(last))
