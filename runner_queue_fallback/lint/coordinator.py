"""Rules for the coordinator step: its inputs, its job's permissions and timeout, and trust."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from runner_queue_fallback import timing
from runner_queue_fallback.inputs import (
    COORDINATOR_INPUTS,
    CoordinatorInputs,
    InputErrors,
    env_name,
    read_coordinator_inputs,
)
from runner_queue_fallback.lint.child import pin_warning
from runner_queue_fallback.lint.model import (
    ActionRef,
    Node,
    Report,
    Workflow,
    has_secret,
    is_expression,
    parse_uses,
    permissions_of,
)
from runner_queue_fallback.plan import make_plan
from runner_queue_fallback.profiles import Profile

__all__ = ["CoordinatorStep", "find_coordinators", "lint_coordinator"]

_REQUIRED = ("runner-type", "workflow", "workflow-ref", "source-ref", "source-sha")
_POOL_INPUTS = (
    "runner-type",
    "queue-policy",
    "queue-timeout-minutes",
    "execution-timeout-minutes",
    "runners",
)
# Stand-ins for values that are missing (reported by RQF201) or expressions (unknown until the
# run), so that the action's own validation still checks every literal input.
_STAND_INS = {
    "workflow": "runner-worker.yml",
    "workflow-ref": "main",
    "source-ref": "refs/heads/main",
    "source-sha": "0" * 40,
    "source-policy": "current",
    "workload": "{}",
    "token": "stand-in",
}
# Values a pull request's author controls.
# Ref: https://securitylab.github.com/resources/github-actions-untrusted-input/
_PR_CONTROLLED = re.compile(
    r"github\.head_ref|github\.event\.(pull_request\.(head|title|body|merge_commit_sha)"
    r"|issue|comment|review|review_comment|discussion|head_commit|commits|pages|workflow_run)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class CoordinatorStep:
    """A step that uses the coordinator action, with its job and its `with:` inputs."""

    workflow: Workflow
    job_id: str
    job: Node
    step: Node
    ref: ActionRef
    uses_line: int
    inputs: Mapping[str, Node]

    def text(self, name: str) -> str:
        """The input's text, stripped ("" when absent)."""
        node = self.inputs.get(name)
        return (node.text or "").strip() if node is not None else ""

    def literal(self, name: str) -> str | None:
        """The input's value when set without an expression; None when absent, blank or dynamic."""
        value = self.text(name)
        return value if value and not is_expression(value) else None

    def line(self, name: str) -> int:
        """The line of the input, or of the `uses:` when it is absent."""
        node = self.inputs.get(name)
        return node.line if node is not None else self.uses_line

    @property
    def execution_minutes(self) -> int | None:
        """The execution budget the coordinator allows, or None when it is an expression."""
        value = self.text("execution-timeout-minutes")
        if not value:
            return timing.DEFAULT_EXECUTION_MINUTES
        return int(value) if value.isdigit() else None


def find_coordinators(workflow: Workflow) -> list[CoordinatorStep]:
    """Every step of `workflow` that uses the coordinator action."""
    found = []
    for job_id, job in workflow.jobs():
        steps = job.get("steps")
        for step in steps.seq() if steps is not None else []:
            uses = step.get("uses")
            ref = parse_uses(uses.text if uses is not None else None)
            if uses is None or ref is None or ref.kind != "coordinator":
                continue
            with_ = step.get("with")
            inputs = {
                name.replace("_", "-"): value
                for name, value in (with_.items() if with_ is not None else ())
            }
            found.append(CoordinatorStep(workflow, job_id, job, step, ref, uses.line, inputs))
    return found


def lint_coordinator(
    step: CoordinatorStep, report: Report, profiles: Mapping[str, Profile]
) -> None:
    """Report every coordinator rule broken by `step`."""
    path = step.workflow.path
    for name in _REQUIRED:
        if not step.text(name):
            report.add(
                path,
                step.uses_line,
                "RQF201",
                f"the coordinator step does not set `{name}`; the action fails before dispatching",
                f"set `{name}` under the step's `with:`",
            )
    for name, node in step.inputs.items():
        if name not in COORDINATOR_INPUTS:
            report.add(
                path,
                node.line,
                "RQF211",
                f"`{name}` is not an input of the coordinator action; it is ignored",
                f"use one of: {', '.join(COORDINATOR_INPUTS)}",
            )
    inputs = _validate(step, report, profiles)
    if inputs is not None:
        _timeout(step, inputs, report)
    _permissions(step, report)
    _trust(step, report)
    _concurrency(step, report)
    _matrix(step, report)
    pin_warning(step.workflow, step.ref, step.uses_line, report)


def _plannable(step: CoordinatorStep) -> bool:
    return step.literal("runner-type") is not None and all(
        step.literal(name) is not None for name in _POOL_INPUTS if step.text(name)
    )


def _validate(
    step: CoordinatorStep, report: Report, profiles: Mapping[str, Profile]
) -> CoordinatorInputs | None:
    """Run the action's own input validation on the literal inputs; return them if all pass."""
    plannable = _plannable(step)
    environ = {env_name("runner-type"): "cpu"}
    for name in COORDINATOR_INPUTS:
        if name in _POOL_INPUTS and not plannable:
            continue
        value = step.literal(name) if name != "token" else None
        if value is not None or name in _STAND_INS:
            environ[env_name(name)] = value if value is not None else _STAND_INS[name]
    try:
        inputs = read_coordinator_inputs(environ, profiles)
    except InputErrors as exc:
        for error in exc.errors:
            rule = "RQF205" if error.name == "workflow" else "RQF204"
            fix = f"give `{error.name}` a valid value ({error.allowed or 'see the action README'})"
            report.add(step.workflow.path, step.line(error.name), rule, str(error), fix)
        return None
    if not plannable and step.text("runner-type"):
        dynamic = [name for name in _POOL_INPUTS if is_expression(step.text(name))]
        report.add(
            step.workflow.path,
            _job_timeout_line(step),
            "RQF203",
            f"timeout-minutes not checked: {', '.join(dynamic)} come from expressions",
            "run `runner-queue-fallback plan` for each value they take and set the largest result",
            level="notice",
        )
    return inputs if plannable else None


def _job_timeout_line(step: CoordinatorStep) -> int:
    node = step.job.get("timeout-minutes")
    return node.line if node is not None else step.job.line


def _timeout(step: CoordinatorStep, inputs: CoordinatorInputs, report: Report) -> None:
    plan = make_plan(inputs.pools)
    need = plan.timeout_minutes
    node = step.job.get("timeout-minutes")
    text = (node.text or "").strip() if node is not None else ""
    if is_expression(text):
        report.add(
            step.workflow.path,
            _job_timeout_line(step),
            "RQF203",
            f"timeout-minutes not checked: it is an expression; these inputs need at least {need}",
            f"make sure it evaluates to {need} or more",
            level="notice",
        )
        return
    if text.isdigit() and int(text) >= need:
        return
    budget = (
        f"{plan.queue_minutes:g} min of queues, {plan.settings.execution_timeout_minutes} min of "
        f"execution, {plan.overhead_minutes:g} min of startup and cancellation"
    )
    have = f"is {text}" if text else "is not set (360 by default)"
    report.add(
        step.workflow.path,
        _job_timeout_line(step),
        "RQF203",
        f"job `{step.job_id}` timeout-minutes {have} but these inputs need at least {need} "
        f"({budget}); a coordinator that times out cannot clean up its child",
        f"set `timeout-minutes: {need}` or more on job `{step.job_id}`",
    )


def _permissions(step: CoordinatorStep, report: Report) -> None:
    job_level = step.job.get("permissions")
    node = job_level if job_level is not None else step.workflow.root.get("permissions")
    value = permissions_of(node)
    if value == "write-all":
        return
    scopes = value if isinstance(value, dict) else {}
    missing = []
    if scopes.get("actions", ("",))[0] != "write":
        missing.append("actions: write")
    if scopes.get("contents", ("",))[0] not in {"read", "write"}:
        missing.append("contents: read")
    if missing:
        report.add(
            step.workflow.path,
            node.line if node is not None else step.job.line,
            "RQF202",
            f"the coordinator's token lacks {' and '.join(f'`{m}`' for m in missing)}; "
            "dispatching and cancelling the child need `actions: write`, reading the source ref "
            "needs `contents: read`",
            f"add `permissions: {{actions: write, contents: read}}` to job `{step.job_id}`",
        )


def _trust(step: CoordinatorStep, report: Report) -> None:
    path = step.workflow.path
    policy = step.text("source-policy")
    if is_expression(policy):
        report.add(
            path,
            step.line("source-policy"),
            "RQF206",
            "`source-policy` comes from an expression; whoever controls it could let a worker "
            "keep running stale source",
            "write `source-policy` as a literal (`current`, or `pinned-after-start` for trusted "
            "cache preparation)",
        )
    for name in ("source-ref", "source-sha", "workflow-ref"):
        if _PR_CONTROLLED.search("".join(step.text(name).split())):
            report.add(
                path,
                step.line(name),
                "RQF208",
                f"`{name}` comes from a value the pull request's author controls; the child would "
                "run unapproved source or an untrusted workflow definition",
                f"take `{name}` from an approval gate (a dispatch input or a trusted job output)",
            )
    for name, node in step.inputs.items():
        if name != "token" and has_secret(node.text):
            report.add(
                path,
                node.line,
                "RQF209",
                f"`{name}` contains a secret; dispatch inputs are visible to anyone who can read "
                "the child run",
                "keep secrets out of the coordinator's inputs; the child must not need them",
            )


def _concurrency(step: CoordinatorStep, report: Report) -> None:
    if step.literal("source-policy") != "pinned-after-start":
        return
    for owner in (step.workflow.root, step.job):
        concurrency = owner.get("concurrency")
        cancel = concurrency.get("cancel-in-progress") if concurrency is not None else None
        if cancel is not None and (cancel.text or "").strip() != "false":
            report.add(
                step.workflow.path,
                cancel.line,
                "RQF207",
                "`source-policy: pinned-after-start` with `cancel-in-progress` not false; a newer "
                "push would cancel the useful work this policy lets finish",
                "set `cancel-in-progress: false`",
            )


def _matrix(step: CoordinatorStep, report: Report) -> None:
    strategy = step.job.get("strategy")
    if (
        strategy is None
        or strategy.get("matrix") is None
        or strategy.get("max-parallel") is not None
    ):
        return
    report.add(
        step.workflow.path,
        strategy.line,
        "RQF210",
        "a matrix of coordinators without `max-parallel` may dispatch every worker at once and "
        "share the repository's API quota",
        "set `strategy.max-parallel` to a small number such as 2",
    )
