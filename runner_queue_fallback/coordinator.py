"""The fallback sequence: one child at a time, pool after pool, until a runner takes it.

    parent check -> for each candidate:
        preflight (source ref, workflow definition) -> dispatch once -> startup window (identity)
        -> queued (poll every 60 s, one poll lands on the deadline)
            -> deadline: fresh read, cancel, prove nothing ran (5 s polls in a 2-minute window)
               -> next candidate
            -> runner or step seen: no more fallback -> wait for the result (execution timeout)

Every exit leaves the active child confirmed over, or names it as unconfirmed.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import NoReturn

from runner_queue_fallback import timing
from runner_queue_fallback.attempts import Attempt, Result
from runner_queue_fallback.cleanup import cancel_and_confirm, observe_run
from runner_queue_fallback.clock import Clock
from runner_queue_fallback.errors import (
    TRANSIENT_ERRORS,
    DispatchAmbiguous,
    GitHubError,
    Interrupted,
    NotFound,
    RQFError,
    SequenceError,
)
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.inputs import CoordinatorInputs, RunContext
from runner_queue_fallback.observe import (
    ACTIVE_RUN_STATUSES,
    Expected,
    Observation,
    job_mismatches,
)
from runner_queue_fallback.parent import check_parent
from runner_queue_fallback.report import Reporter
from runner_queue_fallback.request_id import RequestId

__all__ = ["Attempt", "Coordinator", "Result"]  # the ledger types are re-exported for callers

#: How far back to look for a run whose dispatch reply was lost (clock skew margin).
_LOOKBACK_SECONDS = 300
#: Below this many remaining requests a dispatch comes with a warning (not in the spec: a child
#: costs about 10 counted requests to start, cancel and confirm).
_LOW_QUOTA = 50


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
    ) -> None:
        """Wire the sequence to its client, clock and reporter."""
        self.inputs = inputs
        self.ctx = run
        self.client = client
        self.clock = clock
        self.report = reporter
        self.make_token = make_token
        self.result = Result()
        self.expected_path = f".github/workflows/{inputs.workflow}"
        self._definition_sha: str | None = None
        self._commit = ""
        self._active: int | None = None
        #: an attempt whose dispatch POST was sent but whose run id is not known yet
        self._in_flight: Attempt | None = None

    # -- the sequence ---------------------------------------------------------------------

    def run(self) -> Result:
        """Run the whole sequence; never raises an RQFError (it is recorded in the result)."""
        try:
            self._sequence()
        except Interrupted as exc:
            self.result.error = SequenceError(str(exc))
            deadline = self.clock.monotonic() + timing.SIGNAL_CLEANUP_BUDGET_SECONDS
            self._find_interrupted_dispatch(deadline)
            self._clean_up(window=max(0.0, deadline - self.clock.monotonic()))
        except RQFError as exc:
            self.result.error = exc
            try:
                self._clean_up(window=timing.CANCEL_WINDOW_SECONDS)
            except Interrupted as signal:
                # The runner cancelled the step while an error was being cleaned up: start the
                # cleanup again within the signal's grace, so the result is still published.
                self.report.log(f"{signal} during the cleanup; cleaning up within the grace")
                self._clean_up(window=timing.SIGNAL_CLEANUP_BUDGET_SECONDS)
        return self.result

    def _sequence(self) -> None:
        check_parent(
            self.client, self.clock, self.ctx.run_id, self.ctx.run_attempt, self.report.log
        )
        self.report.log(f"Parent run {self.ctx.run_id} attempt {self.ctx.run_attempt} is active")
        candidates = self.inputs.pools.candidates
        for number, candidate in enumerate(candidates, start=1):
            attempt = Attempt(number, candidate, self._request_id(number))
            self.result.attempts.append(attempt)
            with self.report.group(f"Candidate {number}/{len(candidates)}: {candidate.pool_text}"):
                if self._try(attempt):
                    return
        raise SequenceError(
            f"all {len(candidates)} queue(s) exhausted: no runner was acquired in any candidate pool"
        )

    def _try(self, attempt: Attempt) -> bool:
        """Run one candidate; True when the sequence is over, False to fall back."""
        self._preflight(attempt)
        self._dispatch(attempt)
        in_queue = self._wait_in_queue(attempt, self._startup(attempt))
        if in_queue is None:
            window = self.clock.monotonic() + timing.CANCEL_WINDOW_SECONDS
            at_deadline = self._read_at_deadline(attempt, window)
            if not (at_deadline.has_evidence or at_deadline.finished):
                self._cancel_and_prove(attempt, window)
                return False
            in_queue = at_deadline
        self._wait_for_result(attempt, in_queue)
        return True

    def _request_id(self, number: int) -> str:
        return str(RequestId(self.ctx.run_id, self.ctx.run_attempt, number, self.make_token()))

    # -- before dispatch ------------------------------------------------------------------

    def _preflight(self, attempt: Attempt) -> None:
        """Source still at source-sha; workflow definition unchanged since the first dispatch."""
        if attempt.number > 1:
            self._check_parent_still_active()
        self._check_source()
        self._commit = self._workflow_commit()
        blob = self.client.get_file_sha(self.expected_path, self._commit)
        if self._definition_sha is None:
            self._definition_sha = blob
        elif blob != self._definition_sha:
            raise SequenceError(
                f"workflow definition {self.expected_path} at {self.inputs.workflow_ref!r} changed "
                f"during the sequence: expected blob {self._definition_sha}, observed {blob}. Keep "
                "workflow-ref stable (a protected tag avoids this)"
            )

    def _workflow_commit(self) -> str:
        """The commit of workflow-ref: the head SHA the child run must show."""
        ref = self.inputs.workflow_ref
        try:
            return self.client.get_commit_sha(f"heads/{ref}")
        except NotFound:
            return self.client.get_commit_sha(f"tags/{ref}")

    # -- dispatch -------------------------------------------------------------------------

    def _dispatch(self, attempt: Attempt) -> None:
        # The child must run the very commit whose definition the preflight just compared.
        self.expected = Expected(attempt.request_id, self.expected_path, self._commit)
        inputs = {
            "request-id": attempt.request_id,
            "parent-run-id": str(self.ctx.run_id),
            "parent-run-attempt": str(self.ctx.run_attempt),
            "source-ref": self.inputs.source_ref,
            "source-sha": self.inputs.source_sha,
            "runner": attempt.candidate.runner_json(),
            "workload": self.inputs.workload,
        }
        self._warn_if_quota_low()
        self.report.save_state("request-id", attempt.request_id)
        self.report.save_state("dispatched-at", self.clock.now().isoformat())
        attempt.dispatched_at = self.clock.monotonic()
        self._in_flight = attempt
        try:
            reply = self.client.dispatch_workflow(
                self.inputs.workflow, self.inputs.workflow_ref, inputs
            )
        except DispatchAmbiguous as exc:
            attempt.outcome = "dispatch reply lost"
            self.report.warning(str(exc), title="Ambiguous dispatch")
            self._recover_lost_dispatch(attempt)
        self._set_active(attempt, reply.workflow_run_id, reply.html_url)
        attempt.outcome = "dispatched"
        self.report.notice(
            f"Child {attempt.request_id} dispatched to {attempt.candidate.pool_text}: {reply.html_url}",
            title=f"Candidate {attempt.number}",
        )

    def _warn_if_quota_low(self) -> None:
        """Say so before dispatching when the repository's API quota is nearly spent.

        Watching and cancelling a child costs requests; past the limit the spec's two capped
        retries cannot wait for an hourly reset, so a child could be left without cleanup.
        """
        remaining = self.client.stats.rate_remaining
        if remaining is not None and remaining < _LOW_QUOTA:
            self.report.warning(
                f"only {remaining} API requests are left in this repository's hourly quota; if it "
                "runs out, children may be left uncancelled. Run fewer coordinators at once "
                "(strategy.max-parallel)",
                title="API quota nearly spent",
            )

    def _set_active(self, attempt: Attempt, run_id: int, url: str) -> None:
        attempt.run_id, attempt.run_url = run_id, url
        self._active = run_id
        self._in_flight = None
        self.report.save_state("child-run-id", str(run_id))
        self.report.save_state("child-request-id", attempt.request_id)
        self.report.save_state("child-run-url", url)

    def _find_interrupted_dispatch(self, deadline: float) -> None:
        """A signal came while a dispatch was in flight: find its run by run-name before `deadline`.

        The POST may have created the run; without its id nothing would cancel it.
        """
        attempt = self._in_flight
        if attempt is None:
            return
        while True:
            if self._look_up_run_name(attempt, deadline):
                return
            # The grace is short: wait half of what is left, so one more look and its reply fit.
            wait = min(timing.STARTUP_POLL_SECONDS, (deadline - self.clock.monotonic()) / 2)
            if wait < 1.0:
                break
            self.clock.sleep(wait)
        self.report.warning(
            f"the step was cancelled while child {attempt.request_id} was being dispatched, and "
            f"no run with run-name {attempt.request_id} appeared within the signal grace; if one "
            "appears later, cancel it",
            title="Child run not found",
        )

    def _look_up_run_name(self, attempt: Attempt, deadline: float) -> bool:
        """One search for the attempt's run by its unique run-name; found runs become active."""
        after = self.clock.now() - timedelta(seconds=_LOOKBACK_SECONDS)
        try:
            runs = self.client.find_runs_by_name(
                self.inputs.workflow, attempt.request_id, created_after=after, deadline=deadline
            )
        except GitHubError as exc:
            self.report.log(f"Looking for run-name {attempt.request_id}: {exc}")
            return False
        if runs:
            self._set_active(attempt, runs[0].id, runs[0].html_url)
        return bool(runs)

    def _recover_lost_dispatch(self, attempt: Attempt) -> NoReturn:
        """Find the run by its unique run-name, mark it for cleanup, and stop: never re-dispatch."""
        assert attempt.dispatched_at is not None  # noqa: S101  # set just before dispatch
        deadline = attempt.dispatched_at + timing.STARTUP_WINDOW_SECONDS
        while self.clock.monotonic() + timing.STARTUP_POLL_SECONDS <= deadline:
            self.clock.sleep(timing.STARTUP_POLL_SECONDS)
            if self._look_up_run_name(attempt, deadline):
                raise SequenceError(
                    f"the dispatch reply was lost; run {attempt.run_id} with run-name "
                    f"{attempt.request_id} was found and is cancelled; no other pool is tried"
                )
        raise SequenceError(
            f"the dispatch reply was lost and no run with run-name {attempt.request_id} appeared "
            "within 2 minutes; if one appears later, cancel it; no other pool is tried"
        )

    # -- startup --------------------------------------------------------------------------

    def _startup(self, attempt: Attempt) -> Observation:
        """Wait (15 s, then every 5 s, within 2 minutes) until the child shows its identity and job."""
        assert attempt.run_id is not None  # noqa: S101  # set by _dispatch
        assert attempt.dispatched_at is not None  # noqa: S101  # set by _dispatch
        deadline = attempt.dispatched_at + timing.STARTUP_WINDOW_SECONDS
        self.clock.sleep(timing.STARTUP_FIRST_CHECK_SECONDS)
        last = "not checked yet"
        while True:
            try:
                observation = observe_run(self.client, attempt.run_id, deadline)
            except (NotFound, *TRANSIENT_ERRORS) as exc:  # 404 is tolerated only here
                last = str(exc)
            else:
                self._check_identity(observation)
                if observation.jobs:
                    self._note_job(attempt, observation)
                    return observation
                last = f"run visible, job metadata pending ({observation.describe()})"
            if self.clock.monotonic() + timing.STARTUP_POLL_SECONDS > deadline:
                raise SequenceError(
                    f"child run {attempt.run_id} did not show its identity and worker job within "
                    f"the 2-minute startup window; last: {last}"
                )
            self.clock.sleep(timing.STARTUP_POLL_SECONDS)

    def _check_identity(self, observation: Observation) -> None:
        problems = self.expected.run_mismatches(observation.run)
        if observation.jobs:
            problems += job_mismatches(observation.jobs)
        if problems:
            raise SequenceError(
                f"child run {observation.run.id} is not the run that was dispatched: "
                + "; ".join(problems)
            )

    def _note_job(self, attempt: Attempt, observation: Observation) -> None:
        job = observation.job
        if job is not None and attempt.job_url is None:
            attempt.job_url = job.html_url or f"{attempt.run_url}/job/{job.id}"
        if attempt.queued_at is None and not observation.has_evidence and job is not None:
            attempt.queued_at = self.clock.monotonic()
            attempt.outcome = "queued"
            self.report.log(
                f"Worker job of child {attempt.run_id} is queued: the queue clock starts "
                f"({_minutes(attempt.candidate.queue_seconds)} to acquire a runner)"
            )

    def _observe(self, attempt: Attempt, deadline: float | None = None) -> Observation:
        assert attempt.run_id is not None  # noqa: S101  # only called after dispatch
        observation = observe_run(self.client, attempt.run_id, deadline)
        self._check_identity(observation)
        self._note_job(attempt, observation)
        return observation

    # -- queued ---------------------------------------------------------------------------

    def _wait_in_queue(self, attempt: Attempt, observation: Observation) -> Observation | None:
        """Poll every 60 s, landing one poll on the deadline; None when the deadline is reached."""
        if observation.has_evidence or observation.finished:
            return observation
        assert attempt.queued_at is not None  # noqa: S101  # set when the job was seen in startup
        assert attempt.dispatched_at is not None  # noqa: S101  # set by _dispatch
        deadline = attempt.queued_at + attempt.candidate.queue_seconds
        round_number = 0
        while not (observation.has_evidence or observation.finished):
            now = self.clock.monotonic()
            if now >= deadline:
                return None
            wait = min(timing.QUEUE_POLL_SECONDS, deadline - now)
            round_number += 1
            self.report.log(
                f"Waiting round {round_number}: child {attempt.run_id} {observation.describe()}; "
                f"{_seconds(now - attempt.dispatched_at)} since dispatch; next check in {_seconds(wait)}"
            )
            self.clock.sleep(wait)
            observation = self._observe(attempt)
            self._poll_checks(allocated=observation.has_evidence)
        return observation

    def _read_at_deadline(self, attempt: Attempt, window: float) -> Observation:
        """The fresh read before cancelling; it shares the cancellation window's deadline."""
        self.report.log(
            f"Queue deadline of {_minutes(attempt.candidate.queue_seconds)} reached for child "
            f"{attempt.run_id}: fresh read before cancelling"
        )
        return self._observe(attempt, window)

    def _poll_checks(self, *, allocated: bool) -> None:
        """Each poll: the source ref (unless pinned after start) and the parent run."""
        if not (allocated and self.inputs.source_policy == "pinned-after-start"):
            self._check_source()
        self._check_parent_still_active()

    def _check_source(self) -> None:
        observed = self.client.get_commit_sha(self.inputs.source_ref)
        if observed != self.inputs.source_sha:
            raise SequenceError(
                f"source ref {self.inputs.source_ref} moved: expected {self.inputs.source_sha}, "
                f"observed {observed}. The approved revision is stale; start a new run for the new SHA"
            )

    def _check_parent_still_active(self) -> None:
        parent = self.client.get_run(self.ctx.run_id)
        if parent.run_attempt != self.ctx.run_attempt or parent.status not in ACTIVE_RUN_STATUSES:
            raise SequenceError(
                f"parent run {self.ctx.run_id}: expected attempt {self.ctx.run_attempt} still active, "
                f"observed attempt {parent.run_attempt} status {parent.status!r} conclusion "
                f"{parent.conclusion!r}"
            )

    # -- cancellation after a queue timeout -----------------------------------------------

    def _cancel_and_prove(self, attempt: Attempt, deadline: float) -> None:
        """Cancel and confirm, within one 2-minute window, that run and job ended with no runner."""
        assert attempt.run_id is not None  # noqa: S101  # only called after dispatch
        attempt.queue_left_at = self.clock.monotonic()
        attempt.outcome = "cancelling after queue timeout"
        outcome = self.client.cancel_run(attempt.run_id, deadline=deadline)
        self.report.log(f"Cancel requested for child {attempt.run_id}: {outcome.value}")
        last: Observation | None = None
        last_error = ""
        forced = False
        while True:
            if self.clock.monotonic() + timing.CANCEL_POLL_SECONDS > deadline:
                seen = last.describe() if last else "no reply within the window"
                error = f"; last request error: {last_error}" if last_error else ""
                raise SequenceError(
                    f"cancellation of child {attempt.run_id} was not confirmed within 2 minutes; last "
                    f"observation: {seen}{error}. No other pool is tried"
                )
            self.clock.sleep(timing.CANCEL_POLL_SECONDS)
            try:
                last = self._observe(attempt, deadline)
            except TRANSIENT_ERRORS as exc:
                last_error = str(exc)
                self.report.log(f"Cancellation check failed: {exc}")
                continue
            self.report.log(f"Cancellation check: {last.describe()}")
            if last.has_evidence:
                self.result.race = True
                attempt.outcome = "runner acquired during cancellation (race)"
                raise SequenceError(
                    f"child {attempt.run_id} acquired a runner while it was being cancelled (the "
                    "queue/start race). It is not run again on another pool; check its logs"
                )
            if last.cancelled_cleanly:
                attempt.outcome = "cancelled before a runner (queue timeout)"
                self._active = None
                self.report.log(
                    f"Confirmed: child {attempt.run_id} ended with no runner and no step"
                )
                return
            if last.finished:
                raise SequenceError(f"child {attempt.run_id} ended unexpectedly: {last.describe()}")
            if not forced and last.run.status != "completed" and self._past_half(deadline):
                forced = True
                self.report.log(f"Child {attempt.run_id} still not cancelled: sending force-cancel")
                try:
                    self.client.force_cancel_run(attempt.run_id, deadline=deadline)
                except TRANSIENT_ERRORS as exc:
                    last_error = str(exc)

    def _past_half(self, deadline: float) -> bool:
        return deadline - self.clock.monotonic() <= timing.CANCEL_WINDOW_SECONDS / 2

    # -- allocated ------------------------------------------------------------------------

    def _wait_for_result(self, attempt: Attempt, observation: Observation) -> None:
        """No more fallback: poll every 60 s until the child concludes or the execution timeout."""
        now = self.clock.monotonic()
        if attempt.queued_at is None:  # already allocated at the first look: no queue seen
            attempt.queued_at = now
        if attempt.queue_left_at is None:
            attempt.queue_left_at = now
        attempt.outcome = "runner allocated"
        if observation.has_evidence:
            self.report.log(f"Runner allocated to child {attempt.run_id}: fallback is now disabled")
        deadline = now + self.inputs.pools.execution_timeout_minutes * 60
        round_number = 0
        while not observation.finished:
            now = self.clock.monotonic()
            if now >= deadline and observation.reported_over:
                # The run or its job already says completed; the other's report lags behind.
                # The worker did not outlive the deadline: let the reports settle.
                observation = self._settle(attempt, observation)
                if observation.finished:
                    break
            if now >= deadline:
                attempt.outcome = "execution timeout"
                raise SequenceError(
                    f"child {attempt.run_id} did not finish within execution-timeout-minutes "
                    f"({self.inputs.pools.execution_timeout_minutes}); cancelling it"
                )
            wait = min(timing.EXECUTION_POLL_SECONDS, deadline - now)
            round_number += 1
            since = now - (attempt.dispatched_at or now)
            self.report.log(
                f"Executing round {round_number}: child {attempt.run_id} {observation.describe()}; "
                f"{_seconds(since)} since dispatch; next check in {_seconds(wait)}"
            )
            self.clock.sleep(wait)
            observation = self._observe(attempt)
            if not observation.finished:  # a finished worker is judged on its own result
                self._poll_checks(allocated=True)
        self._active = None
        self.report.log(f"Polling finished: child {attempt.run_id} {observation.describe()}")
        job = observation.job
        attempt.outcome = (
            f"run {observation.run.conclusion}, worker {job.conclusion if job else 'missing'}"
        )
        if not observation.succeeded:
            raise SequenceError(
                f"the worker did not succeed: run concluded {observation.run.conclusion!r}, worker job "
                f"{job.conclusion if job else 'missing'!r}. It is not retried on another pool"
            )
        self.result.success = True

    def _settle(self, attempt: Attempt, observation: Observation) -> Observation:
        """Poll every 5 s, within one cancellation window, until run and job both say completed."""
        deadline = self.clock.monotonic() + timing.CANCEL_WINDOW_SECONDS
        while not observation.finished:
            if self.clock.monotonic() + timing.CANCEL_POLL_SECONDS > deadline:
                break
            self.report.log(
                f"Child {attempt.run_id} {observation.describe()}: waiting for the lagging report"
            )
            self.clock.sleep(timing.CANCEL_POLL_SECONDS)
            try:
                observation = self._observe(attempt, deadline)
            except TRANSIENT_ERRORS as exc:
                self.report.log(f"Completion check failed: {exc}")
        return observation

    # -- cleanup --------------------------------------------------------------------------

    def _clean_up(self, window: float) -> None:
        for attempt in self.result.attempts:  # a wait that ended by an error is still a wait
            if attempt.queued_at is not None and attempt.queue_left_at is None:
                attempt.queue_left_at = self.clock.monotonic()
        if self._active is None:
            return
        self.result.cleanup = cancel_and_confirm(
            self.client, self.clock, self._active, window=window, log=self.report.log
        )
        if self.result.cleanup.confirmed:
            self._active = None
        self.report.log(self.result.cleanup.describe())


def _seconds(value: float) -> str:
    return f"{value:.0f}s"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min"
