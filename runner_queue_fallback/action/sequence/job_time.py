"""When the coordinator's own job ends, and whether a candidate can still run before it does.

The runner cancels the coordinator's job at its `timeout-minutes` (GitHub's default: 360), counted
from the job's start; a `timeout-minutes` on the coordinator's own step ends it sooner when it is
smaller. The specification sizes that timeout without our waits for the API quota (admission, a
spent quota): once such a wait has been added, a candidate that could not run its whole course
(startup window, queue deadline, cancellation window, execution timeout) and leave the post step
its 5 minutes before the job ends is not dispatched, and an admission wait after which it could not
is not begun. Otherwise the runner would cancel the job with a worker running, and the signal's
cleanup would cancel the worker. Without an added wait nothing is refused here: a job below
`plan`'s minimum is `lint`'s RQF203.

The timeout is read once, at the start: the run's workflow file (GITHUB_WORKFLOW_REF) at the commit
the run uses (GITHUB_WORKFLOW_SHA: the ref may have moved since), the job by its key (GITHUB_JOB),
and the job's start from the run attempt's job that runs on this runner (RUNNER_NAME). Two requests.
A value that cannot be read (an expression, a reusable workflow, a 404) is said once, and the
sequence goes on as it would without this check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runner_queue_fallback.action.sequence.facts import JobEnd
from runner_queue_fallback.action.sequence.state import minutes
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.errors import (
    GitHubAPIError,
    GitHubError,
    RateLimited,
    SequenceError,
)
from runner_queue_fallback.core.inputs import FULL_SHA
from runner_queue_fallback.workflow.coordinator_steps import find_coordinators
from runner_queue_fallback.workflow.model import (
    Findings,
    Node,
    Workflow,
    is_expression,
    parse_workflow,
    whole_minutes,
)
from runner_queue_fallback.workflow.plan import make_plan

if TYPE_CHECKING:
    from runner_queue_fallback.action.attempts import Attempt
    from runner_queue_fallback.action.sequence.state import SequenceState
    from runner_queue_fallback.core.inputs import RunContext

__all__ = ["Fit", "check_dispatch", "fit", "needs_text", "read_job_end", "refusal", "waited"]

#: `owner/repo/.github/workflows/file.yml@ref`, as the runner sets GITHUB_WORKFLOW_REF.
_WORKFLOW_REF = re.compile(
    r"^(?P<repo>[^/@\s]+/[^/@\s]+)/(?P<path>\.github/workflows/[^@\s]+)@(?P<ref>\S+)$"
)


class _Unreadable(Exception):  # a reason; never raised out of this module
    """Why the job's timeout cannot be known."""


@dataclass(frozen=True)
class _Timeout:
    """The job's timeout-minutes, the coordinator step's (if it has its own) and a caveat."""

    job: int
    job_set: bool
    step: int | None
    caveat: str = ""


@dataclass(frozen=True)
class Fit:
    """How the job time left compares with what one candidate needs (seconds)."""

    left: float
    needs: float

    @property
    def room(self) -> float:
        """What the candidate leaves over; below 0 it does not fit."""
        return self.left - self.needs


def read_job_end(seq: SequenceState, started: float) -> JobEnd | None:
    """When the job ends, from its timeout; when it cannot be read, say why, once (None).

    `started`: when this step began (`clock.monotonic()`).

    Raises:
        RateLimited: the quota is spent until its reset; the caller waits for it and asks again.

    """
    try:
        timeout = _read_timeout(seq)
    except _Unreadable as exc:
        seq.report.log(
            f"The coordinator job's timeout-minutes could not be read: {exc}. Its end is unknown, "
            "so no wait for the API quota is measured against it"
        )
        return None
    job_start, start_text = _job_start(seq, started, timeout.job * 60.0)
    job = f"job `{seq.ctx.job}`"
    ends_at = job_start + timeout.job * 60
    text = f"timeout-minutes {timeout.job} of {job}" + ("" if timeout.job_set else " (the default)")
    if timeout.step is not None and started + timeout.step * 60 < ends_at:
        ends_at = started + timeout.step * 60
        text, start_text = f"timeout-minutes {timeout.step} of its step in {job}", "from its start"
    left = (ends_at - seq.clock.monotonic()) / 60
    seq.report.log(
        f"The coordinator job ends in {max(0.0, left):.0f} min ({text}, {start_text}){timeout.caveat}. "
        "After a wait for the API quota, a candidate that cannot run its course before then is "
        "not dispatched"
    )
    return JobEnd(ends_at, text)


def waited(seq: SequenceState) -> bool:
    """Whether a wait the specification's sizing leaves out was added: for admission, or a quota."""
    return seq.result.admission_waited > 0 or seq.client.stats.quota_waited > 0


def fit(seq: SequenceState, attempt: Attempt, wait: float = 0.0) -> Fit | None:
    """How the candidate fits in what is left of the job after `wait` more seconds; None: unknown."""
    if seq.job_ends_at is None:
        return None
    left = seq.job_ends_at - seq.clock.monotonic() - wait
    return Fit(left, sum(_parts(seq, attempt).values()))


def check_dispatch(seq: SequenceState, attempt: Attempt) -> None:
    """Just before a dispatch: after an added wait, the candidate must fit in the job, or no child."""
    found = fit(seq, attempt)
    if found is None or found.room >= 0 or not waited(seq):
        return
    waits = seq.result.admission_waited + seq.client.stats.quota_waited
    lead = f"after {waits / 60:.0f} min of waiting for the API quota, the coordinator job ends in"
    raise refusal(seq, attempt, found, lead)


def refusal(seq: SequenceState, attempt: Attempt, found: Fit, lead: str) -> SequenceError:
    """The error of a candidate that cannot fit: the job's timeout, and what the candidate needs.

    `lead` ends where the time left goes: "... the coordinator job ends in" (22 min).
    """
    plan = make_plan(seq.inputs.pools)
    advised = plan.advised_timeout_minutes
    admission = seq.inputs.pools.admission_timeout_minutes
    lower = f", or lower admission-timeout-minutes ({admission})" if admission else ""
    return SequenceError(
        f"{lead} {max(0.0, found.left) / 60:.0f} min ({seq.job_end_text}), and "
        f"{seq.candidate_text(attempt)} needs "
        f"{minutes(found.needs)} ({needs_text(seq, attempt)}); no child was dispatched, so "
        "that the runner does not cancel the job with a worker running. Give the job "
        f"timeout-minutes of at least {advised} (`plan`'s minimum {plan.timeout_minutes} plus "
        f"its possible extra){lower}"
    )


def needs_text(seq: SequenceState, attempt: Attempt) -> str:
    """`startup window 2 min, queue deadline 10 min, ...`: what one candidate needs of the job."""
    return ", ".join(f"{name} {minutes(value)}" for name, value in _parts(seq, attempt).items())


def _parts(seq: SequenceState, attempt: Attempt) -> dict[str, float]:
    """The job time one candidate may take, by part (seconds)."""
    return {
        "startup window": timing.STARTUP_WINDOW_SECONDS,
        "queue deadline": attempt.candidate.queue_seconds,
        "cancellation window": timing.CANCEL_WINDOW_SECONDS,
        "execution timeout": seq.inputs.pools.execution_timeout_minutes * 60.0,
        "post step": timing.POST_STEP_JOB_SECONDS,
    }


# -- reading -------------------------------------------------------------------------------------


def _read_timeout(seq: SequenceState) -> _Timeout:
    """The timeouts of the coordinator's job and step, from the run's workflow file."""
    path = _workflow_path(seq.ctx)
    sha = seq.ctx.workflow_sha
    try:
        file = seq.client.get_file(path, sha)
    except RateLimited as exc:
        if exc.basis == "reset":
            raise
        raise _Unreadable(f"reading {path}: {exc.reply}") from None
    except GitHubAPIError as exc:
        raise _Unreadable(f"reading {path} at {sha[:12]}: {exc.reply}") from None
    except GitHubError as exc:
        raise _Unreadable(f"reading {path}: {exc}") from None
    text = file.text()
    if text is None:
        raise _Unreadable(f"{path} came without its content (larger than 1 MB?)")
    return _timeout_in(path, text, seq.ctx.job)


def _workflow_path(ctx: RunContext) -> str:
    """The path of the run's workflow file, from what the runner says about the run."""
    if not ctx.workflow_ref:
        raise _Unreadable("GITHUB_WORKFLOW_REF is not set (not on a runner?)")
    named = _WORKFLOW_REF.match(ctx.workflow_ref)
    if named is None:
        raise _Unreadable(f"GITHUB_WORKFLOW_REF {ctx.workflow_ref!r} names no workflow file")
    if named["repo"].lower() != ctx.repository.lower():
        raise _Unreadable(f"the workflow file is in {named['repo']}, not in {ctx.repository}")
    if not FULL_SHA.match(ctx.workflow_sha.lower()):
        raise _Unreadable(f"GITHUB_WORKFLOW_SHA {ctx.workflow_sha!r} is not a commit SHA")
    if not ctx.job:
        raise _Unreadable("GITHUB_JOB is not set")
    return named["path"]


def _timeout_in(path: str, text: str, key: str) -> _Timeout:
    """The job `key`'s timeout-minutes and its coordinator step's, in the file's text."""
    workflow = parse_workflow(Path(path), text, Findings())  # nothing is read: the path names it
    if workflow is None:
        raise _Unreadable(f"{path} is not a readable workflow")
    job = dict(workflow.jobs()).get(key)
    if job is None:
        raise _Unreadable(f"{path} has no job `{key}` (GITHUB_JOB): a job of a reusable workflow?")
    if job.get("uses") is not None:
        raise _Unreadable(f"job `{key}` of {path} calls a reusable workflow")
    value = _minutes(job, f"job `{key}`")
    step, caveat = _step_minutes(workflow, job, key)
    return _Timeout(
        timing.DEFAULT_JOB_TIMEOUT_MINUTES if value is None else value,
        value is not None,
        step,
        caveat,
    )


def _step_minutes(workflow: Workflow, job: Node, key: str) -> tuple[int | None, str]:
    """The coordinator step's own timeout-minutes, when the step using the action is clear.

    Its step is the one whose `uses:` names runner-queue-fallback; with none (a fork under another
    name) or several whose values differ, a step-level value is not counted, and that is said.
    """
    ours = [found.step for found in find_coordinators(workflow) if found.job_id == key]
    steps = job.get("steps")
    timed = [s for s in (steps.seq() if steps is not None else []) if s.get("timeout-minutes")]
    if len(ours) == 1:
        return _minutes(ours[0], "its step"), ""
    values = {(s.text_of("timeout-minutes") or "").strip() for s in ours}
    if len(ours) > 1 and len(values) == 1:
        return _minutes(ours[0], "its step"), ""
    if not timed:
        return None, ""
    how = f"{len(ours)} steps of job `{key}` use" if ours else f"no step of job `{key}` uses"
    return None, (
        f"; {how} runner-queue-fallback by name, so which step-level timeout-minutes is this "
        "step's is not known: only the job's is counted"
    )


def _minutes(node: Node, where: str) -> int | None:
    """A literal timeout-minutes under `node` (None when absent); anything else is unreadable."""
    text = (node.text_of("timeout-minutes") or "").strip()
    if not text:
        return None
    if is_expression(text):
        raise _Unreadable(f"timeout-minutes of {where} is an expression ({text})")
    value = whole_minutes(text)
    if not value:
        raise _Unreadable(f"timeout-minutes of {where} is {text!r}, not a whole number of minutes")
    return value


def _job_start(seq: SequenceState, started: float, limit: float) -> tuple[float, str]:
    """When the job started (`clock.monotonic()` time), and how that was found out.

    GitHub gives the start; how long ago that was is this runner's clock against it, so a clock
    behind GitHub's would move the job's end later by the skew. That part is held to what the job
    can have run: no less than this step has (on the monotonic clock), no more than `limit`, its
    timeout (the runner would have ended it), and a difference is said.
    """
    ctx = seq.ctx
    jobs = []
    if ctx.runner_name:
        try:
            jobs = seq.client.list_attempt_jobs(ctx.run_id, ctx.run_attempt)
        except RateLimited as exc:
            if exc.basis == "reset":
                raise
        except GitHubError as exc:
            seq.report.log(f"Reading the jobs of run {ctx.run_id}: {exc}")
    own = [
        job
        for job in jobs
        if job.runner_name == ctx.runner_name and job.status != "completed" and job.started_at
    ]
    if len(own) == 1 and own[0].started_at is not None:
        at = own[0].started_at
        ago = (seq.clock.now() - at).total_seconds()
        held = min(max(ago, seq.clock.monotonic() - started), limit)
        text = f"started at {at:%H:%M:%SZ}"
        if abs(held - ago) >= 1:  # GitHub's times are whole seconds
            text += (
                f"; this runner's clock is at least {abs(held - ago):.0f} s "
                f"{'behind' if held > ago else 'ahead of'} GitHub's, so the job is counted as "
                f"begun {held:.0f} s ago"
            )
        return seq.clock.monotonic() - held, text
    setup = minutes(timing.JOB_SETUP_SECONDS)
    return started - timing.JOB_SETUP_SECONDS, (
        f"counted from this step's start less {setup}: no job of run {ctx.run_id} attempt "
        f"{ctx.run_attempt} was found running on RUNNER_NAME {ctx.runner_name!r}"
    )
