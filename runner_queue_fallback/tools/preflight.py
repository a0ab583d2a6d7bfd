"""The `preflight` command: every read the coordinator makes before a dispatch, and no POST.

    GitHub API -> token -> source ref -> parent run (when GITHUB_RUN_ID is set) -> workflow-ref ->
    child file and its rules -> quota left; then what only a dispatch can show (`actions: write`,
    runner groups)

Each check reports pass, FAIL or "not checked (why)", and passes only on what it saw: the token
passes only when a read got a successful reply; a server that does not answer is one FAIL naming
its URL, and a refused token (401) leaves every later check not checked. The command fails when
any check fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from runner_queue_fallback.action.observe import ACTIVE_RUN_STATUSES
from runner_queue_fallback.action.runner_groups import check_groups
from runner_queue_fallback.action.sequence.admission import RESERVE_REQUESTS
from runner_queue_fallback.action.sequence.child_workflow import (
    check_child,
    read_child,
    workflow_commit,
)
from runner_queue_fallback.core.actions_io import Reporter
from runner_queue_fallback.core.errors import (
    DeadlineExceeded,
    QuotaSpent,
    RQFError,
    ServerError,
    TransportError,
    Unauthorized,
)
from runner_queue_fallback.core.inputs import CoordinatorInputs, RunContext
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.github.runner_groups import RunnerReads

__all__ = ["DEPENDENT", "LOW_QUOTA", "UNVERIFIABLE_PERMISSION", "Check", "run", "unverifiable"]

#: The checks after the token, in the order they are printed: each needs GitHub to answer.
DEPENDENT = ("source ref", "parent run", "workflow-ref", "child workflow", "API quota")

#: Fewer requests left than this and the coordinator would wait for the reset before dispatching.
LOW_QUOTA = RESERVE_REQUESTS
#: What a read cannot show about the token.
UNVERIFIABLE_PERMISSION = (
    "the token has `actions: write` (the dispatch and cancel POSTs need it; no read shows it): "
    "give the coordinator job `permissions: {actions: write, contents: read}`"
)
_UNVERIFIABLE_GROUP = (
    "runner group `{group}` ({labels}) is granted to {repository} and has runners with these "
    "labels: only a dispatched job shows it (a job for a group it may not use waits in the queue; "
    '`runners-token` lets preflight read the group: organisation "Self-hosted runners" (read) '
    'and "Actions policies" (read))'
)
_UNVERIFIABLE_RUNNER = (
    "a runner with each candidate's labels takes its job now: only a dispatched job shows it "
    "(the runner counts above are a snapshot, shared with other repositories)"
)


@dataclass(frozen=True)
class Check:
    """One check: pass (True), FAIL (False) or not checked (None), with what was seen or why not.

    `unproven`: with None, the check read everything and still cannot say (`not proven`).
    """

    name: str
    passed: bool | None
    detail: str
    unproven: bool = False

    @property
    def line(self) -> str:
        """`pass        name: detail`, or `not checked name (why)`."""
        verdict = {True: "pass", False: "FAIL", None: "not checked"}[self.passed]
        if self.unproven:
            verdict = "not proven"
        if self.passed is None:
            return f"  {verdict:<12}{self.name} ({self.detail})"
        return f"  {verdict:<12}{self.name}: {self.detail}"


def group_checks(
    inputs: CoordinatorInputs, repository: str, reads: RunnerReads | None, commit: str | None
) -> list[Check]:
    """The runner-group checks (`action/runner_groups.py`) as preflight's checks."""
    found = check_groups(
        reads,
        inputs.pools.candidates,
        repository=repository,
        workflow=inputs.workflow,
        workflow_ref=inputs.workflow_ref,
        commit=commit,
    )
    passed = {"pass": True, "FAIL": False}
    return [
        Check(c.name, passed.get(c.verdict), c.detail, unproven=c.verdict == "not proven")
        for c in found
    ]


def unverifiable(
    inputs: CoordinatorInputs, repository: str, *, groups_read: bool = False
) -> list[str]:
    """What cannot be checked without dispatching: `actions: write` and each runner group.

    With `groups_read` (preflight read the groups), only whether a runner takes the job now.
    """
    groups: dict[str, list[str]] = {}
    for candidate in inputs.pools.candidates:
        labels = groups.setdefault(candidate.group, [])
        if candidate.label_text not in labels:
            labels.append(candidate.label_text)
    if groups_read:
        return [UNVERIFIABLE_PERMISSION, _UNVERIFIABLE_RUNNER]
    return [UNVERIFIABLE_PERMISSION] + [
        _UNVERIFIABLE_GROUP.format(
            group=group or "(none)", labels=", ".join(labels), repository=repository
        )
        for group, labels in groups.items()
    ]


#: Replies that show no server answering usably: every later read would fare the same.
_UNREACHABLE = (TransportError, ServerError, DeadlineExceeded)


class _Preflight:
    def __init__(
        self,
        inputs: CoordinatorInputs,
        run: RunContext,
        client: GitHubClient,
        reporter: Reporter,
        *,
        in_a_run: bool,
    ) -> None:
        self.inputs, self.run, self.client, self.reporter = inputs, run, client, reporter
        self.in_a_run = in_a_run
        self.checks: list[Check] = []
        self.commit: str | None = None
        #: A read got a successful reply: the only proof that GitHub accepts the token.
        self.answered = False

    def check(self, name: str, read: Callable[[], str]) -> bool:
        """Run one read; an error becomes a failed check with its message."""
        try:
            detail = read()
        except RQFError as exc:
            self.checks.append(Check(name, passed=False, detail=str(exc)))
            return False
        self.checks.append(Check(name, passed=True, detail=detail))
        return True

    def source(self, observed: str | RQFError) -> str:
        ref, sha = self.inputs.source_ref, self.inputs.source_sha
        if isinstance(observed, RQFError):
            raise observed
        if observed != sha:
            raise RQFError(
                f"source-ref {ref} points at {observed}, not source-sha {sha}; the coordinator "
                "would stop before dispatching. Fix: pass the SHA the ref points at now"
            )
        return f"{ref} at {sha}"

    def parent(self) -> str:
        parent = self.client.get_run(self.run.run_id)
        self.answered = True
        if parent.run_attempt != self.run.run_attempt or parent.status not in ACTIVE_RUN_STATUSES:
            raise RQFError(
                f"run {self.run.run_id}: expected attempt {self.run.run_attempt} in progress, "
                f"observed attempt {parent.run_attempt} status {parent.status!r}"
            )
        return f"run {parent.id} attempt {parent.run_attempt}, {parent.status}"

    def workflow_ref(self) -> str:
        self.commit = workflow_commit(self.client, self.inputs.workflow_ref, self.run.repository)
        self.answered = True
        return f"{self.inputs.workflow_ref} at {self.commit}"

    def child(self) -> str:
        assert self.commit is not None  # noqa: S101  # only after workflow_ref passed
        child = read_child(self.client, self.inputs, self.commit)
        self.answered = True
        findings = check_child(child, self.inputs, self.reporter)  # warnings become annotations
        warned = f"; {len(findings)} warning(s) above" if findings else ""
        return f"{child.path} (blob {child.sha}) breaks no blocking rule{warned}"

    def quota(self) -> Check:
        left = self.client.stats.rate_remaining
        if left is None:
            return Check(
                "API quota", passed=None, detail="GitHub reported no x-ratelimit-remaining"
            )
        if left == 0:
            return Check(
                "API quota", passed=False, detail="no request left this hour; wait for the reset"
            )
        low = (
            f" (below {LOW_QUOTA}: the coordinator would wait for the reset before dispatching; "
            "run fewer coordinators at once)"
            if left < LOW_QUOTA
            else ""
        )
        return Check("API quota", passed=True, detail=f"{left} requests left this hour{low}")

    def token(self) -> Check:
        """Pass only when some read got a successful reply; a failed read proves nothing."""
        if self.answered:
            return Check("token", passed=True, detail="GitHub answered an authenticated read")
        return Check("token", passed=None, detail="no read succeeded; see the failures")

    def stopped(self, api: Check, token: Check, why: str) -> list[Check]:
        """The first read settled it: every check after the token depends on it, none was made."""
        return [api, token] + [Check(name, passed=None, detail=why) for name in DEPENDENT]

    def run_all(self) -> list[Check]:
        """Every check in order; the first read shows whether GitHub answers and takes the token."""
        url = self.run.api_url
        observed: str | RQFError
        try:
            observed = self.client.get_commit_sha(self.inputs.source_ref)
        except Unauthorized as exc:
            api = Check("GitHub API", passed=True, detail=f"{url} answered")
            refused = Check("token", passed=False, detail=str(exc))
            return self.stopped(api, refused, "GitHub refused the token")
        except _UNREACHABLE as exc:
            if isinstance(exc, QuotaSpent):  # an answer: the quota is spent, not the server gone
                observed = exc
            else:
                api = Check("GitHub API", passed=False, detail=f"no usable reply from {url}: {exc}")
                unknown = Check("token", passed=None, detail="GitHub did not answer")
                return self.stopped(api, unknown, f"GitHub at {url} did not answer")
        except RQFError as exc:
            observed = exc
        else:
            self.answered = True
        self.check("source ref", lambda: self.source(observed))
        if self.in_a_run:
            self.check("parent run", self.parent)
        else:
            self.checks.append(Check("parent run", passed=None, detail="GITHUB_RUN_ID is not set"))
        if self.check("workflow-ref", self.workflow_ref):
            self.check("child workflow", self.child)
        else:
            self.checks.append(
                Check("child workflow", passed=None, detail="the workflow-ref check failed")
            )
        self.checks.append(self.quota())
        api = Check("GitHub API", passed=True, detail=f"{url} answered")
        return [api, self.token(), *self.checks]


def run(
    inputs: CoordinatorInputs,
    run_context: RunContext,
    client: GitHubClient,
    reporter: Reporter,
    *,
    in_a_run: bool,
    runners_client: GitHubClient | None = None,
) -> bool:
    """Make every check; print them and what stays unverified. True when none failed.

    `runners_client`: the client holding `runners-token` (None: not given); only its runner-group
    reads are made with it, never a write.
    """
    preflight = _Preflight(inputs, run_context, client, reporter, in_a_run=in_a_run)
    checks = preflight.run_all()
    if runners_client is not None:  # without it, the groups stay in "Not checked" below
        reads = runners_client.runner_reads
        checks += group_checks(inputs, run_context.repository, reads, preflight.commit)
    reporter.log(
        f"Preflight of {run_context.repository}: child {inputs.workflow} at {inputs.workflow_ref}, "
        f"source {inputs.source_ref} (no dispatch, no POST)"
    )
    for check in checks:
        reporter.log(check.line)
        if check.passed is False:
            reporter.error(check.detail, title=f"Preflight: {check.name}")
    reporter.log("Not checked (only a dispatch can show them):")
    for item in unverifiable(
        inputs, run_context.repository, groups_read=runners_client is not None
    ):
        reporter.log(f"  - {item}")
    failed = sum(1 for c in checks if c.passed is False)
    sent = client.stats.sent + (runners_client.stats.sent if runners_client else 0)
    passed = sum(1 for c in checks if c.passed)
    reporter.log(
        f"preflight: {passed} passed, {failed} failed, {len(checks) - passed - failed} not "
        "checked; "
        f"API requests: {sent} sent, all GET"
    )
    return failed == 0
