"""The child's startup guard: the first step of the worker job, before any workload code runs.

Long (every check of the guard) because identity, request id, parent, coordinator ref, copies,
source and runner share one 2-minute deadline and one report, and a pass refused for a spent quota
is waited out and run again in the same place.

    attempt, request id (no API request) -> own run identity -> parent run active, of the
    coordinator workflow in this repository (at coordinator-ref), started before this child ->
    no earlier run bearing the request id -> source ref at source-sha -> own job on this runner

What it proves: this run is attempt 1 of a `workflow_dispatch` whose run-name is a request id the
coordinator format makes for exactly the parent run and attempt named by the inputs; that parent
is in progress at that attempt (and, with `coordinator-workflow`, a run of that workflow file of
this repository; with `coordinator-ref`, from that ref: a ref read from the run's branch name is
proven, its commit on that branch and no tag of that name); the child was created after that
attempt started; it is the earliest run bearing its request id (a copy of a live child's inputs
is later); the source ref still points at the approved SHA; and GitHub shows the run's one job
`worker` on this runner (a second execution of the job elsewhere is refused). What it cannot
prove: that the coordinator, and not a person who may dispatch the child, sent the dispatch (see
the README's trust model).

Every check must hold. All requests and retries of a pass share one startup deadline, 2 minutes
from its start (spec: "The worker guard uses the same initial check before allowing workload
code ... Expiry blocks dispatch or workload execution"). A 404 for the child's own run or the
parent is tolerated within it, polled every 5 s; a job shown on another runner is read once more
5 s later; anything else that is wrong refuses at once.

One departure (docs/departures.md): a pass refused because the primary API quota is spent, with
its reset at most `guard-quota-wait-minutes` away (all waits together), waits for the reset on the
Clock and runs every check again from the start, with a new deadline, under the same rules; a
reset further away, or none the replies name, fails closed as before, naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final

from runner_queue_fallback.action.parent import check_parent
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.actions_io import Reporter, escape_markdown
from runner_queue_fallback.core.clock import Clock, elapsed
from runner_queue_fallback.core.errors import (
    FIX_CHILD_PERMISSIONS,
    GitHubError,
    GuardRefused,
    NotFound,
    PermissionDenied,
    QuotaSpent,
    RateLimited,
    SequenceError,
    Unauthorized,
)
from runner_queue_fallback.core.inputs import GuardInputs, RunContext
from runner_queue_fallback.core.request_id import parse as parse_request_id
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.models import WorkflowRun
from runner_queue_fallback.github.retry import RESET_MARGIN_SECONDS

__all__ = ["CHECKS", "MAX_LISTING_REQUESTS", "QUOTA_WAIT_INPUT", "Check", "Guard", "GuardResult"]

ATTEMPT = "child attempt"
REQUEST = "request id"
IDENTITY = "child identity"
PARENT = "parent run"
ORIGINAL = "first run of the request"
SOURCE = "source ref"
RUNNER = "child runner"
#: The checks in the order the guard runs them.
CHECKS = (ATTEMPT, REQUEST, IDENTITY, PARENT, ORIGINAL, SOURCE, RUNNER)
#: The copy check sends at most this many list requests (a window of up to 1,000 runs takes 10;
#: one past 1,000 runs is split, about 1,800 runs spread evenly fit); past them it refuses.
MAX_LISTING_REQUESTS: Final = 20
#: The events whose run names its own repository's branch in `head_branch` (a pull request's
#: `head_branch` is the branch it comes from, in whatever repository that is).
_BRANCH_EVENTS = frozenset({"workflow_dispatch", "push", "schedule"})
#: What the compare API answers when the branch holds the commit: the branch is that commit, or
#: has gone on from it.
_ON_BRANCH = frozenset({"identical", "ahead"})
#: The child's one job, by the name the coordinator and `lint` require.
_WORKER_JOB = "worker"

_RERUN_ADVICE = "Do not rerun a child directly; rerun its parent instead."
_IDENTITY_ADVICE = (
    "Only a run dispatched by the coordinator (run-name: ${{ inputs.request-id }}) may run the "
    "workload; check the child workflow's run-name and trigger."
)
_PARENT_ADVICE = (
    "The coordinator run that dispatched this child is not active at that attempt (finished, "
    "re-run, or never visible); the workload must not start. Rerun the parent, not this child."
)
_REQUEST_ADVICE = (
    "Only the coordinator of the named parent run makes request ids "
    "(rqf-<parent-run-id>-<parent-run-attempt>-<n>-<8 hex digits>-<time>); a child dispatched "
    "by hand, or with another run as its parent, does not run the workload."
)
_COORDINATOR_ADVICE = (
    "The parent named by parent-run-id is not a run of the coordinator workflow this child "
    "trusts (the guard's coordinator-workflow input, a file under .github/workflows/ of this "
    "repository); the workload must not start."
)
_REF_ADVICE = (
    "The parent named by parent-run-id is not shown to have run its workflow from the ref this "
    "child trusts (the guard's coordinator-ref input); the workload must not start."
)
_BRANCH_ADVICE = (
    f"{_REF_ADVICE} A run's reply names no ref: a run started from a tag shows the tag's name as "
    "its head branch, so a ref read from that name holds only when the run's commit is on the "
    "branch and no tag of that name exists."
)
_RUNNER_ADVICE = (
    "GitHub shows this job on another runner: this is a second execution of the same job (GitHub "
    "has run one job on two runners, actions/runner#3010), and the workload runs only on the "
    "runner GitHub shows."
)
_WORKER_ADVICE = (
    "The child has exactly one job, `worker` (the coordinator and `lint` require it); GitHub "
    "shows another set of jobs for this run attempt, so the workload is blocked."
)
_COPY_ADVICE = (
    "Another run bearing this request id was created before this one: the coordinator "
    "dispatches each request id once, so this run is a copy of its inputs and must not run the "
    "workload."
)
_INCOMPLETE_ADVICE = (
    "The guard must see every run of this workflow created since the time its request id states "
    "(or, for an id without one, since the parent attempt started) to know that none bearing "
    f"this request id came first; it could not within {MAX_LISTING_REQUESTS} list requests, so "
    "the workload is blocked."
)
_STATED_ADVICE = (
    "The coordinator states a time of GitHub's clock taken before its dispatch, never before "
    "the parent attempt started; this one is outside those bounds, so the request id was not "
    "made for this run by its parent."
)
_CREATED_ADVICE = (
    "A child dispatched by its parent's attempt is created after that attempt started; this one "
    "was not, so it was not dispatched by the parent it names."
)
_UNEXPECTED_ADVICE = "The guard fails closed: the workload is blocked."
_API_ADVICE = (
    "The guard could not complete this check through the GitHub API (within the spec's retries "
    "and its 2-minute startup deadline), so the workload is blocked."
)
#: The input that bounds the guard's wait for a spent quota's reset, as action.yml spells it.
QUOTA_WAIT_INPUT: Final = "guard-quota-wait-minutes"
_QUOTA_WAIT_TITLE = "Guard waiting for API quota"
_SOURCE_ADVICE = (
    "The source changed after it was approved; the workload is not run on unapproved code. "
    "Approve the new SHA and rerun the parent."
)


@dataclass(frozen=True)
class Check:
    """One check: what it expects, what it saw, and whether it held (None: not reached)."""

    name: str
    expected: str
    observed: str = "not checked"
    passed: bool | None = None

    @property
    def result(self) -> str:
        """`pass`, `FAIL` or `not checked`."""
        return {True: "pass", False: "FAIL", None: "not checked"}[self.passed]


@dataclass
class GuardResult:
    """Every check, in order, and the refusal that stopped the guard (None when all held)."""

    checks: list[Check]
    refusal: GuardRefused | None = None
    seconds: float = 0.0
    #: each wait for a spent quota's reset, said for the log and the summary (every check ran
    #: again after it)
    waits: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True only when every check held: the workload may start."""
        return self.refusal is None and all(check.passed for check in self.checks)

    def log_lines(self) -> list[str]:
        """A short plain-text account for the log."""
        verdict = "passed: the workload may start" if self.passed else "REFUSED the workload"
        lines = [f"Guard {verdict} ({elapsed(self.seconds)})"]
        lines += [f"  {wait}" for wait in self.waits]
        lines += [
            f"  {c.result:<11} {c.name}: expected {c.expected}; observed {c.observed}"
            for c in self.checks
        ]
        return lines

    def markdown(self) -> str:
        """The step summary: a table of check / expected / observed / result."""
        verdict = "passed" if self.passed else "refused the workload"
        rows = [
            f"| {escape_markdown(c.name)} | {escape_markdown(c.expected)} | "
            f"{escape_markdown(c.observed)} | {c.result} |"
            for c in self.checks
        ]
        text = "\n".join(
            [
                f"### Runner queue fallback guard: {verdict}",
                "",
                *[f"{escape_markdown(wait)}\n" for wait in self.waits],
                "| check | expected | observed | result |",
                "| --- | --- | --- | --- |",
                *rows,
                "",
            ]
        )
        if self.refusal is not None:
            text += f"\n**Refused:** {escape_markdown(str(self.refusal))}\n"
        return text + "\n"

    def publish(self, reporter: Reporter) -> None:
        """Write the account to the log and the step summary; a refusal also as an annotation."""
        for line in self.log_lines():
            reporter.log(line)
        reporter.summary(self.markdown())
        if self.refusal is not None:
            reporter.error(str(self.refusal), title=self.refusal.title)


class Guard:
    """Checks that this child run may start its workload."""

    def __init__(
        self,
        inputs: GuardInputs,
        run: RunContext,
        client: GitHubClient,
        clock: Clock,
        reporter: Reporter,
    ) -> None:
        """Wire the checks to the child's own run context, a client, the clock and the log."""
        self.inputs = inputs
        self.ctx = run
        self.client = client
        self.clock = clock
        self.reporter = reporter
        self._deadline = 0.0
        self._own: WorkflowRun | None = None
        self._parent: WorkflowRun | None = None

    def run(self) -> GuardResult:
        """Run every check in order; stop at the first that does not hold. Never raises RQFError.

        Each pass has its own startup deadline (2 minutes from its start), shared by every
        request, retry and poll. A pass refused for a spent quota whose reset is near enough
        (`guard-quota-wait-minutes`, all waits together) waits for it, then every check runs again.
        """
        start = self.clock.monotonic()
        waits: list[str] = []
        waited = 0.0
        while True:
            checks, refusal, spent = self._pass()
            if refusal is None or not spent:
                break
            wait = self._quota_wait(waited)
            if wait is None:
                refusal = self._far_reset(refusal, waited)
                checks[refusal.check] = replace(checks[refusal.check], observed=refusal.observed)
                break
            said = (
                f"The API quota is spent ({refusal.check} could not be read): waiting "
                f"{elapsed(wait)} for its reset at {self.client.reset_time()}, within "
                f"{QUOTA_WAIT_INPUT} ({self.inputs.quota_wait_minutes}), then running every "
                "check again"
            )
            self.reporter.notice(said, title=_QUOTA_WAIT_TITLE)
            self.clock.sleep(wait)
            waited += wait
            waits.append(
                f"Waited {elapsed(wait)} for the API quota's reset ({refusal.check} "
                "could not be read), then ran every check again"
            )
        return GuardResult(
            list(checks.values()), refusal, self.clock.monotonic() - start, waits=waits
        )

    def _pass(self) -> tuple[dict[str, Check], GuardRefused | None, bool]:
        """Every check once, from the start, with a new 2-minute deadline.

        Returns the checks, the refusal (None when all held) and whether the refusal is for a
        spent primary quota (a read the quota refused, not a finding).
        """
        self._deadline = self.clock.monotonic() + timing.PARENT_GRACE_SECONDS
        checks = {name: Check(name, expected) for name, expected in self._expected().items()}
        steps: dict[str, Callable[[], str]] = {
            ATTEMPT: self._check_attempt,
            REQUEST: self._check_request_id,
            IDENTITY: self._check_identity,
            PARENT: self._check_parent,
            ORIGINAL: self._check_original,
            SOURCE: self._check_source,
            RUNNER: self._check_runner,
        }
        refusal: GuardRefused | None = None
        spent = False
        for name, step in steps.items():
            try:
                observed = step()
            except GuardRefused as exc:
                refusal, spent = exc, _quota_spent(exc.__cause__)
            except GitHubError as exc:
                refusal = GuardRefused(name, checks[name].expected, *_api_failure(exc))
                spent = _quota_spent(exc)
            except Exception as exc:  # noqa: BLE001  # the guard fails closed, whatever happened
                observed = f"unexpected {type(exc).__name__}: {_text(exc)}"
                refusal = GuardRefused(name, checks[name].expected, observed, _UNEXPECTED_ADVICE)
            if refusal is not None:
                checks[name] = replace(checks[name], observed=refusal.observed, passed=False)
                break
            checks[name] = replace(checks[name], observed=observed, passed=True)
            self.reporter.log(f"Guard: {name} holds ({observed})")
        return checks, refusal, spent

    def _quota_wait(self, waited: float) -> float | None:
        """Seconds to wait for the spent quota's reset; None when it is too far or unknown.

        The reset is the one the replies named (`x-ratelimit-reset`); the wait adds its 1 s
        margin. It must lie within `guard-quota-wait-minutes`, less the waits already taken.
        """
        minutes = self.inputs.quota_wait_minutes
        wait = self.client.quota_reset_in()
        if minutes == 0 or wait is None or wait - RESET_MARGIN_SECONDS > minutes * 60.0 - waited:
            return None
        return wait

    def _far_reset(self, refusal: GuardRefused, waited: float) -> GuardRefused:
        """The refusal for a spent quota the guard does not wait for, naming its reset and why."""
        minutes = self.inputs.quota_wait_minutes
        wait = self.client.quota_reset_in()
        if wait is None:
            seen = "the API quota is spent, and no reply named a reset the guard can believe"
        else:
            seen = (
                f"the API quota is spent until its reset at {self.client.reset_time()}, in "
                f"{elapsed(wait)}"
            )
        if minutes == 0:
            why = f"{QUOTA_WAIT_INPUT} is 0: the guard fails closed at once on a spent quota"
        elif wait is None:
            why = f"the guard waits only for a known reset within {QUOTA_WAIT_INPUT} ({minutes})"
        else:
            why = (
                f"further than {QUOTA_WAIT_INPUT} ({minutes}) allows"
                + (f" after the {elapsed(waited)} already waited" if waited else "")
                + ", so the guard does not wait for it"
            )
        advice = (
            f"{_API_ADVICE} A spent quota's reset at most {QUOTA_WAIT_INPUT} away is waited for; "
            "fewer coordinators at once (or other workflows sending fewer requests) leave the "
            "guards quota."
        )
        observed = f"{refusal.observed}; {seen}; {why}"
        return GuardRefused(refusal.check, refusal.expected, observed, advice)

    def _expected(self) -> dict[str, str]:
        i = self.inputs
        parent = f"run {i.parent_run_id} attempt {i.parent_run_attempt}, active"
        if i.coordinator_workflows:
            files = " or ".join(f".github/workflows/{f}" for f in i.coordinator_workflows)
            parent += f", a run of {files} in {self.ctx.repository}"
        if i.coordinator_ref:
            parent += f", at {i.coordinator_ref}"
        return {
            ATTEMPT: "attempt 1",
            REQUEST: f"rqf-{i.parent_run_id}-{i.parent_run_attempt}-<n>-<8 hex digits>-<time>",
            IDENTITY: f"run-name {i.request_id!r}, event workflow_dispatch",
            PARENT: f"{parent}, started before this child was created",
            ORIGINAL: (
                f"the earliest run with run-name {i.request_id!r} created since the time it "
                "states (for an id without one, since the parent attempt started)"
            ),
            SOURCE: f"{i.source_ref} at {i.source_sha}",
            RUNNER: (
                f"the job {_WORKER_JOB} of run {self.ctx.run_id} attempt {self.ctx.run_attempt} "
                + (
                    f"shown on this runner, {self.ctx.runner_name!r}"
                    if self.ctx.runner_name
                    else "(this runner's name unknown: not compared)"
                )
            ),
        }

    def _refuse(self, name: str, observed: str, advice: str) -> GuardRefused:
        return GuardRefused(name, self._expected()[name], observed, advice)

    def _check_attempt(self) -> str:
        """A re-run child is refused before any API request (GITHUB_RUN_ATTEMPT)."""
        observed = f"attempt {self.ctx.run_attempt}"
        if self.ctx.run_attempt != 1:
            raise self._refuse(ATTEMPT, observed, _RERUN_ADVICE)
        return observed

    def _check_request_id(self) -> str:
        """The request id is one the coordinator makes for the parent run and attempt named."""
        request = parse_request_id(self.inputs.request_id)
        if request is None:
            raise self._refuse(
                REQUEST, f"{self.inputs.request_id!r}, not a request id", _REQUEST_ADVICE
            )
        i = self.inputs
        if (request.run_id, request.run_attempt) != (i.parent_run_id, i.parent_run_attempt):
            observed = (
                f"{request} names parent run {request.run_id} attempt {request.run_attempt}, "
                f"not run {i.parent_run_id} attempt {i.parent_run_attempt}"
            )
            raise self._refuse(REQUEST, observed, _REQUEST_ADVICE)
        return str(request)

    def _check_identity(self) -> str:
        """The run is the dispatched request: its run-name and its event."""
        run = self._own_run()
        self._own = run
        observed = f"run-name {run.display_title!r}, event {run.event}"
        if run.display_title != self.inputs.request_id or run.event != "workflow_dispatch":
            raise self._refuse(IDENTITY, observed, _IDENTITY_ADVICE)
        return observed

    def _own_run(self) -> WorkflowRun:
        """Read this run; a 404 (not visible yet) is retried every 5 s until the deadline."""
        run_id = self.ctx.run_id
        while True:
            try:
                return self.client.get_run(run_id, deadline=self._deadline)
            except NotFound:
                pass
            if self.clock.monotonic() + timing.STARTUP_POLL_SECONDS > self._deadline:
                raise self._refuse(
                    IDENTITY,
                    f"run {run_id} still not visible (HTTP 404) after 2 minutes",
                    "The child's GITHUB_TOKEN needs `actions: read`.",
                )
            self.reporter.log(f"Own run {run_id} not visible yet (HTTP 404); checking again in 5s")
            self.clock.sleep(timing.STARTUP_POLL_SECONDS)

    def _check_parent(self) -> str:
        """The parent exists at the given attempt and is active (2-minute grace, shared deadline)."""
        i = self.inputs
        try:
            run = check_parent(
                self.client,
                self.clock,
                i.parent_run_id,
                i.parent_run_attempt,
                self.reporter.log,
                deadline=self._deadline,
            )
        except SequenceError as exc:
            observed = _text(exc).removeprefix(f"parent run {i.parent_run_id}: ")
            if observed.startswith("expected ") and ", observed " in observed:
                observed = observed.split(", observed ", 1)[1]  # keep only what was seen
            raise self._refuse(PARENT, observed, _PARENT_ADVICE) from exc.__cause__
        observed = self._check_coordinator(
            run, f"run {run.id} attempt {run.run_attempt}, {run.status}"
        )
        own = self._own
        if own is None or run.run_started_at is None or own.created_at < run.run_started_at:
            started = run.run_started_at.isoformat() if run.run_started_at else "unknown"
            created = own.created_at.isoformat() if own else "unknown"
            observed += f", attempt started {started}, this child created {created}"
            raise self._refuse(PARENT, observed, _CREATED_ADVICE)
        self._parent = run
        return f"{observed}, started before this child"

    def _check_coordinator(self, run: WorkflowRun, observed: str) -> str:
        """The parent is a run of a `coordinator-workflow` file here, from `coordinator-ref`."""
        i, repository = self.inputs, self.ctx.repository
        if i.coordinator_workflows:
            file = _workflow_file(run, repository)
            observed += f", a run of {file or repr(run.path)}"
            if file not in i.coordinator_workflows:
                raise self._refuse(PARENT, observed, _COORDINATOR_ADVICE)
        if i.coordinator_ref:
            ref, why = _workflow_ref(run, repository)
            if ref is None:
                raise self._refuse(PARENT, f"{observed}, {why}", _REF_ADVICE)
            observed += f", at {ref} ({why})"
            if ref != i.coordinator_ref:
                raise self._refuse(PARENT, observed, _REF_ADVICE)
            if _path_ref(run) is None:  # read from `head_branch`, a tag's name as well
                observed = self._prove_branch(run, ref.removeprefix("refs/heads/"), observed)
        return observed

    def _prove_branch(self, run: WorkflowRun, branch: str, observed: str) -> str:
        """The parent's commit is on `branch` and no tag of that name exists (two requests).

        A run's reply has no ref field: started from a tag (a push of it, or a dispatch on it),
        its `head_branch` is the tag's short name, which `_workflow_ref` reads as a branch. The
        compare API names the branch in full (a bare name is read as a tag first): the branch is
        the run's commit or has gone on from it. Any commit ever on the branch passes, an old
        coordinator included; and the tag's absence is read now, not when the run started.
        """
        sha = run.head_sha
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            raise self._refuse(
                PARENT, f"{observed}, its head_sha {sha!r} is no commit SHA", _BRANCH_ADVICE
            )
        full = f"refs/heads/{branch}"
        try:
            comparison = self.client.compare_commits(sha, full, deadline=self._deadline)
        except NotFound:
            observed += f", but comparing its commit {sha} with {full} finds nothing (HTTP 404)"
            raise self._refuse(PARENT, observed, _BRANCH_ADVICE) from None
        if comparison.status not in _ON_BRANCH:
            observed += (
                f", but its commit {sha} is not on {full} ({comparison.status}: "
                f"{comparison.behind_by} commit(s) of it are not on the branch)"
            )
            raise self._refuse(PARENT, observed, _BRANCH_ADVICE)
        on = f"{comparison.ahead_by} commit(s) behind the branch's head"
        if comparison.status == "identical":
            on = "the branch's head"
        try:
            tag = self.client.get_ref_sha(f"refs/tags/{branch}", deadline=self._deadline)
        except NotFound:
            return f"{observed}, its commit {sha} on {full} ({on}), no tag {branch!r}"
        observed += f", but a tag {branch!r} exists too (refs/tags/{branch} at {tag})"
        raise self._refuse(PARENT, observed, _BRANCH_ADVICE)

    def _check_original(self) -> str:
        """No earlier run bears this request id: read every run since the time the id states.

        The real child is the first run bearing its request id (the id exists only from its
        dispatch on); a copy of its inputs is created later, and states the same time, which is
        before the real child's creation. Ties on `created_at` (whole seconds) go to the lower
        run id, as GitHub numbers runs in creation order.
        """
        own, parent = self._own, self._parent
        if own is None or parent is None or parent.run_started_at is None:
            raise self._refuse(ORIGINAL, "own run or parent attempt unknown", _UNEXPECTED_ADVICE)
        workflow = own.workflow_id or _workflow_file(own, self.ctx.repository)
        if not workflow:
            raise self._refuse(ORIGINAL, f"own workflow unknown ({own.path!r})", _UNEXPECTED_ADVICE)
        start = self._window_start(parent.run_started_at, own.created_at)
        listing = self.client.list_runs_created_between(
            workflow,
            start,
            own.created_at,
            max_requests=MAX_LISTING_REQUESTS,
            deadline=self._deadline,
        )
        runs = listing.runs
        if not listing.complete:
            observed = f"{len(runs)} run(s) listed, not every one: {listing.why}"
            raise self._refuse(ORIGINAL, observed, _INCOMPLETE_ADVICE)
        request_id = self.inputs.request_id  # this run's run-name (the identity check)
        named = {r.id: r for r in runs if r.display_title == request_id} | {own.id: own}
        first = min(named.values(), key=lambda r: (r.created_at, r.id))
        if first.id != own.id:
            observed = (
                f"a copy of run {first.id} (created {first.created_at.isoformat()}; this run "
                f"{own.id} created {own.created_at.isoformat()})"
            )
            raise self._refuse(ORIGINAL, observed, _COPY_ADVICE)
        return (
            f"earliest of {len(named)} run(s) with this run-name among {len(runs)} listed since "
            f"{start.isoformat()} ({listing.requests} list request(s))"
        )

    def _window_start(self, attempt_started: datetime, created: datetime) -> datetime:
        """Where the copy check's window starts: the time the request id states, within bounds.

        The stated time must lie from the parent attempt's start to this run's creation; an id
        of the older form states none, and the window starts with the attempt.
        """
        request = parse_request_id(self.inputs.request_id)
        stated = None if request is None else request.not_before
        if stated is None:
            return attempt_started
        if not attempt_started <= stated <= created:
            observed = (
                f"the request id states {stated.isoformat()}, outside the parent attempt's start "
                f"{attempt_started.isoformat()} to this run's creation {created.isoformat()}"
            )
            raise self._refuse(ORIGINAL, observed, _STATED_ADVICE)
        return stated

    def _check_source(self) -> str:
        """The source ref still points at the approved SHA."""
        ref = self.inputs.source_ref
        try:
            sha = self.client.get_commit_sha(ref, deadline=self._deadline)
        except NotFound:
            raise self._refuse(SOURCE, f"{ref} not found (HTTP 404)", _SOURCE_ADVICE) from None
        observed = f"{ref} at {sha}"
        if sha != self.inputs.source_sha:
            raise self._refuse(SOURCE, observed, _SOURCE_ADVICE)
        return observed

    def _check_runner(self) -> str:
        """GitHub shows this run's one job `worker` on this runner (RUNNER_NAME).

        GitHub has run one job on two runners at once (actions/runner#3010); the copy on a
        runner GitHub does not show is refused. GitHub also re-queues a job its runner does not
        pick up within 60 s to another runner (GitHub's docs, "Routing precedence for self-hosted
        runners"), so a job shown elsewhere is read once more 5 s later (within the deadline)
        before the guard refuses. Without the runner's name, or while the job shows no
        runner, there is nothing to compare: the check says so and holds.
        """
        name = self.ctx.runner_name
        if not name:
            return "RUNNER_NAME not set: the runner is not compared (no request)"
        shown = self._shown_runner()
        if shown and shown != name:
            self.reporter.log(
                f"Guard: GitHub shows the job {_WORKER_JOB} on runner {shown!r}, this is "
                f"{name!r}; reading it again in 5s (a re-queued job moves to another runner)"
            )
            left = self._deadline - self.clock.monotonic()
            self.clock.sleep(max(0.0, min(timing.STARTUP_POLL_SECONDS, left)))
            shown = self._shown_runner()
        if not shown:
            return f"the job {_WORKER_JOB} shows no runner: not compared with {name!r}"
        if shown != name:
            observed = (
                f"the job {_WORKER_JOB} shown on runner {shown!r} at a second read, and this is "
                f"runner {name!r}: a second execution of one job (actions/runner#3010)"
            )
            raise self._refuse(RUNNER, observed, _RUNNER_ADVICE)
        return f"the job {_WORKER_JOB} shown on this runner, {name!r}"

    def _shown_runner(self) -> str:
        """The runner GitHub shows for this run attempt's one job `worker` ("" for none)."""
        ctx = self.ctx
        jobs = self.client.list_attempt_jobs(ctx.run_id, ctx.run_attempt, deadline=self._deadline)
        workers = [job for job in jobs if job.name == _WORKER_JOB]
        if len(workers) != 1:
            observed = (
                f"{len(workers)} job(s) named {_WORKER_JOB} among the {len(jobs)} of run "
                f"{ctx.run_id} attempt {ctx.run_attempt}"
            )
            raise self._refuse(RUNNER, observed, _WORKER_ADVICE)
        return workers[0].runner_name or ""


def _workflow_file(run: WorkflowRun, repository: str) -> str:
    """The file name of the run's workflow in `repository`; empty for a path of any other form.

    GitHub shows `.github/workflows/x.yml`, and also `owner/repo/.github/workflows/x.yml@ref`:
    an `owner/repo/` prefix must name `repository` (compared case-insensitively, as GitHub
    compares names), anything else is another repository's workflow or no workflow file.
    """
    path = run.workflow_file_path
    prefix = f"{repository}/"
    if repository and path[: len(prefix)].lower() == prefix.lower():
        path = path[len(prefix) :]
    file = path.removeprefix(".github/workflows/")
    if file == path or not file or "/" in file:
        return ""
    return file


def _workflow_ref(run: WorkflowRun, repository: str) -> tuple[str | None, str]:
    """The ref the run's workflow ran from, and how that is known (or why it is not).

    None unless its `path` is a workflow file of `repository`. The `@ref` of that `path` when it
    is a full ref. Otherwise only a run of this repository's
    own code with an event that runs its branch (`workflow_dispatch`, `push`, `schedule`) says
    its ref: `refs/heads/<head_branch>`. A pull request's `head_branch` is the branch it comes
    from, in the fork when it comes from one: a fork's branch named `main` is not ours.
    """
    if not _workflow_file(run, repository):
        return None, f"its workflow path {run.path!r} is no workflow file of {repository}"
    full = _path_ref(run)
    if full is not None:
        return full, "the @ref of its workflow path"
    _, at, ref = run.path.partition("@")
    head = run.head_repository.full_name if run.head_repository is not None else None
    if head is None or head.lower() != repository.lower():
        return None, f"its workflow ref is unknown: its code comes from {head!r}, not {repository}"
    if run.event not in _BRANCH_EVENTS:
        return None, (
            f"its workflow ref is unknown: a {run.event} run does not name the branch it ran "
            "from (only workflow_dispatch, push and schedule runs do)"
        )
    if not run.head_branch or (at and ref != run.head_branch):
        return None, (
            f"its workflow ref is unknown: head branch {run.head_branch!r}, workflow path "
            f"{run.path!r}"
        )
    return f"refs/heads/{run.head_branch}", f"the head branch of its {run.event} run"


def _path_ref(run: WorkflowRun) -> str | None:
    """The full ref after the `@` of the run's workflow path (`...x.yml@refs/heads/main`), if any."""
    _, at, ref = run.path.partition("@")
    return ref if at and ref.startswith("refs/") else None


def _quota_spent(error: BaseException | None) -> bool:
    """Whether a read failed because the primary quota is spent (not for what GitHub showed)."""
    if isinstance(error, QuotaSpent):
        return True
    return isinstance(error, RateLimited) and error.kind == "primary"


def _api_failure(error: GitHubError) -> tuple[str, str]:
    """What the guard observed, and the advice: a 403 names the child's permissions (its token)."""
    if isinstance(error, PermissionDenied) and not isinstance(error, Unauthorized):
        return error.reply.rstrip(". "), f"{_API_ADVICE} {FIX_CHILD_PERMISSIONS}"
    return _text(error), _API_ADVICE


def _text(error: Exception) -> str:
    """An error message as an `observed` value (GuardRefused adds its own full stop)."""
    return str(error).rstrip(". ")
