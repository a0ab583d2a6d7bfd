"""RQF307: a child the coordinator may send to a GitHub-hosted runner can run there.

A hosted runner is outside the runner groups and their "selected workflows" restriction, so the
guard, first, is all that keeps a stale or foreign dispatch from running the workload there; its
job ends after 360 minutes; its minutes are billed and it cannot reach the private network; every
step without an `if:` on the runner runs on the hosted image. When `runners` or
`hosted-last-resort` is an expression, none of this can be checked here: the coordinator applies
the hosted rules at run time, before any dispatch.
"""

from __future__ import annotations

from collections.abc import Mapping

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.hosted import BILLED_NOTE
from runner_queue_fallback.core.inputs import InputErrors, env_name, read_pool_settings
from runner_queue_fallback.core.profiles import Candidate, Profile
from runner_queue_fallback.workflow.child import find_guard
from runner_queue_fallback.workflow.coordinator_steps import CoordinatorStep
from runner_queue_fallback.workflow.model import Findings, Node, Workflow

__all__ = ["HOSTED_INPUTS", "hosted_candidates", "lint_hosted_child", "note_unchecked"]

#: The inputs that decide whether a hosted candidate is in the list.
HOSTED_INPUTS = ("runners", "hosted-last-resort")
_POOL_INPUTS = ("runner-type", "queue-policy", "queue-timeout-minutes", *HOSTED_INPUTS)
#: What an `if:` mentions when it asks where the job runs.
_ON_THE_RUNNER = ("runner.", "inputs.runner")
_SELF_HOSTED_IF = "if: runner.environment == 'self-hosted'"

Numbered = tuple[tuple[int, Candidate], ...]


def hosted_candidates(step: CoordinatorStep, profiles: Mapping[str, Profile]) -> Numbered:
    """The hosted candidates (by number) the step's literal pool inputs resolve to.

    Empty when there is none, when an input is an expression (`note_unchecked` says so) or when
    the inputs are invalid (RQF204 reports them).
    """
    values = {name: step.checkable(name) for name in _POOL_INPUTS if step.text(name)}
    if any(value is None for value in values.values()):
        return ()
    environ = {env_name(name): value for name, value in values.items() if value is not None}
    try:
        settings = read_pool_settings(environ, profiles)
    except InputErrors:
        return ()
    return tuple((n, c) for n, c in enumerate(settings.candidates, start=1) if c.hosted)


def note_unchecked(step: CoordinatorStep, report: Findings) -> None:
    """RQF307 as a notice: `runners` or `hosted-last-resort` is an expression."""
    dynamic = [name for name in HOSTED_INPUTS if step.text(name) and not step.checkable(name)]
    if not dynamic:
        return
    report.add(
        step.workflow.path,
        step.line(dynamic[0]),
        "RQF307",
        f"the hosted-runner rules were not checked: {' and '.join(f'`{n}`' for n in dynamic)} "
        "come from an expression; the coordinator applies them at run time, before any "
        "dispatch (a hosted candidate only last, only for a CPU type of its architecture), "
        "and the child's fitness for a hosted runner is not linted",
        "run `runner-queue-fallback plan` and `lint` with each value it takes",
        level="notice",
    )


def lint_hosted_child(
    step: CoordinatorStep,
    child: Workflow,
    job: Node,
    report: Findings,
    *,
    hosted: Numbered,
    budget: int | None,
) -> None:
    """RQF307 for a child that a hosted candidate of `step` may run."""
    if not hosted:
        return
    number, candidate = hosted[0]
    where = (
        f"the coordinator ({step.workflow.path.name}) may send this child to a GitHub-hosted "
        f"runner (candidate {number}, {candidate.label_text})"
    )
    _guard_first(child, job, where, report)
    _fits_the_hosted_job(child, job, where, budget, report)
    _billed(child, job, where, report)


def _guard_first(child: Workflow, job: Node, where: str, report: Findings) -> None:
    guard = find_guard(job)
    if guard is not None and guard.index == 0:
        return
    steps = job.get("steps")
    report.add(
        child.path,
        guard.step.line if guard is not None else (steps or job).line,
        "RQF307",
        f"{where}, which is outside the runner groups' 'selected workflows' restriction: the "
        "guard, as the first step, is all that keeps a stale, replayed or foreign dispatch "
        "from running the workload there",
        "make `<owner>/runner-queue-fallback/guard@<ref>` (or `.../guard/docker@<ref>`) the "
        "first step",
        level="error",
    )


def _fits_the_hosted_job(
    child: Workflow, job: Node, where: str, budget: int | None, report: Findings
) -> None:
    limit = timing.HOSTED_JOB_LIMIT_MINUTES
    if budget is None or budget <= limit:
        return
    node = job.get("timeout-minutes")
    report.add(
        child.path,
        (node or job).line,
        "RQF307",
        f"{where}, and GitHub ends a job there after {limit} minutes: the coordinator allows "
        f"{budget} minutes of execution, so a workload that needs them would be cut off",
        f"set the coordinator's `execution-timeout-minutes` to {limit} or less, or drop the "
        "hosted candidate",
        level="error",
    )


def _billed(child: Workflow, job: Node, where: str, report: Findings) -> None:
    """The warning every hosted child gets, listing the steps that run on the hosted image."""
    unguarded = _steps_without_a_runner_if(job)
    listed = (
        "; these steps have no `if:` on the runner and will run on the hosted image: "
        + ", ".join(unguarded)
        if unguarded
        else ""
    )
    steps = job.get("steps")
    report.add(
        child.path,
        (steps or job).line,
        "RQF307",
        f"{where}: {BILLED_NOTE}{listed}",
        f"give each step that needs the self-hosted machine (GPUs, the private network, local "
        f"tools) `{_SELF_HOSTED_IF}`, or drop the hosted candidate",
        level="warning",
    )


def _steps_without_a_runner_if(job: Node) -> list[str]:
    """`step N (name)` for each step after the guard whose `if:` does not ask about the runner."""
    guard = find_guard(job)
    steps = job.get("steps")
    found = []
    for index, step in enumerate(steps.seq() if steps is not None else [], start=1):
        if guard is not None and index == guard.index + 1:
            continue
        condition = step.text_of("if") or ""
        if not any(mark in condition for mark in _ON_THE_RUNNER):
            found.append(f"step {index} ({_step_name(step)})")
    return found


def _step_name(step: Node) -> str:
    """A step's `name`, else its action (without the ref), else the first line of its `run`."""
    name = step.text_of("name") or (step.text_of("uses") or "").partition("@")[0]
    if not name:
        lines = (step.text_of("run") or "").strip().splitlines()
        name = lines[0] if lines else "run"
    return name[:60]
