"""Find coordinator workflows and their children, lint each once, and check each pair."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runner_queue_fallback.core.profiles import Profile, load_profiles
from runner_queue_fallback.tools.lint.coordinator import execution_minutes, lint_coordinator
from runner_queue_fallback.tools.lint.hosted import (
    hosted_candidates,
    lint_hosted_child,
    note_unchecked,
)
from runner_queue_fallback.workflow.child import (
    QUOTA_WAIT,
    check_dispatch_inputs,
    dispatch_inputs,
    find_guard,
    guard_longest_minutes,
    guard_quota_wait,
    lint_child,
    worker_job,
)
from runner_queue_fallback.workflow.coordinator_steps import CoordinatorStep, find_coordinators
from runner_queue_fallback.workflow.model import (
    Finding,
    Findings,
    Node,
    Workflow,
    is_expression,
    load_workflow,
    whole_minutes,
)

__all__ = ["LintResult", "lint_directory", "lint_files"]

_WORKFLOW_SUFFIXES = (".yml", ".yaml")


@dataclass(frozen=True)
class LintResult:
    """Every finding, and the coordinator workflows that were linted."""

    findings: list[Finding]
    coordinators: tuple[Path, ...]

    @property
    def errors(self) -> list[Finding]:
        """The findings that fail the lint."""
        return [f for f in self.findings if f.level == "error"]


def lint_files(
    coordinator: Path, child: Path | None = None, *, profiles: Mapping[str, Profile] | None = None
) -> LintResult:
    """Lint one coordinator workflow with the given child, or with the child its steps name."""
    linter = _Linter(profiles)
    linter.coordinator_file(coordinator, child, explicit=True)
    return linter.result()


def lint_directory(directory: Path, *, profiles: Mapping[str, Profile] | None = None) -> LintResult:
    """Lint every workflow in `directory` that uses the coordinator action, with its child."""
    linter = _Linter(profiles)
    for path in sorted(
        p for p in directory.iterdir() if p.suffix in _WORKFLOW_SUFFIXES and p.is_file()
    ):
        linter.coordinator_file(path, None, explicit=False)
    return linter.result()


class _Linter:
    def __init__(self, profiles: Mapping[str, Profile] | None) -> None:
        self.report = Findings()
        self.profiles = profiles if profiles is not None else load_profiles()
        self.coordinators: list[Path] = []
        self._loaded: dict[Path, Workflow | None] = {}
        self._children: set[Path] = set()

    def result(self) -> LintResult:
        return LintResult(self.report.findings, tuple(self.coordinators))

    def _load(self, path: Path) -> Workflow | None:
        key = path.resolve()
        if key not in self._loaded:
            self._loaded[key] = load_workflow(path, self.report)
        return self._loaded[key]

    def coordinator_file(self, path: Path, child: Path | None, *, explicit: bool) -> None:
        workflow = self._load(path)
        if workflow is None:
            return
        steps = find_coordinators(workflow)
        if steps:
            self.coordinators.append(path)
        elif explicit:
            self.report.add(
                path,
                1,
                "RQF200",
                "no step uses the coordinator action (`.../runner-queue-fallback@<ref>` or `./`)",
                "pass the coordinator workflow first, then the child",
            )
            if child is not None and child.is_file():
                self._child(child)
        for step in steps:
            lint_coordinator(step, self.report, self.profiles)
            note_unchecked(step, self.report)
            found = self._child_of(step, child)
            if found is not None:
                budget = execution_minutes(step, self.profiles)
                _pair(step, found, self.report, budget)
                hosted = hosted_candidates(step, self.profiles)
                job = worker_job(found)
                if job is not None:
                    lint_hosted_child(
                        step, found, job[1], self.report, hosted=hosted, budget=budget
                    )

    def _child(self, path: Path) -> Workflow | None:
        workflow = self._load(path)
        if workflow is not None and path.resolve() not in self._children:
            self._children.add(path.resolve())
            lint_child(workflow, self.report)
        return workflow

    def _child_of(self, step: CoordinatorStep, given: Path | None) -> Workflow | None:
        value = step.text("workflow")
        name = value.removeprefix(".github/workflows/")
        if given is not None and value and not is_expression(value) and name != given.name:
            self.report.add(
                step.workflow.path,
                step.line("workflow"),
                "RQF205",
                f"`workflow: {value}` names another file than the child given ({given.name}); "
                "the coordinator would dispatch that file",
                f"set `workflow: {given.name}`, or lint the pair that belongs together",
            )
        if given is None and is_expression(value):
            self.report.add(
                step.workflow.path,
                step.line("workflow"),
                "RQF205",
                "child not linted: `workflow` comes from an expression",
                "lint each child with `runner-queue-fallback lint COORDINATOR.yml CHILD.yml`",
                level="notice",
            )
        if given is None and (not name or is_expression(name) or "/" in name):
            return None  # missing (RQF201), dynamic (noted) or not a file name (RQF205)
        path = given if given is not None else step.workflow.path.parent / name
        if not path.is_file():
            self.report.add(
                step.workflow.path,
                step.line("workflow"),
                "RQF301",
                f"the child workflow {path} does not exist; every dispatch would fail",
                f"add the child next to the coordinator as {path.name}, or fix `workflow`",
            )
            return None
        return self._child(path)


def _pair(step: CoordinatorStep, child: Workflow, report: Findings, budget: int | None) -> None:
    trigger = dispatch_inputs(child)
    if trigger is not None:
        check_dispatch_inputs(child, trigger, report, sender=step.workflow.path.name)
    found = worker_job(child)
    if found is None:
        return
    job = found[1]
    guard = find_guard(job)
    if guard is not None and guard.ref.source != step.ref.source:
        report.add(
            child.path,
            guard.uses_line,
            "RQF303",
            f"the guard comes from {guard.ref.source} but the coordinator "
            f"({step.workflow.path.name}) from {step.ref.source}; the two must agree on the "
            "protocol",
            f"use the guard from {step.ref.source}",
        )
    if guard is not None:
        _coordinator_workflow(step, child, guard.step, guard.uses_line, report)
        _execution_room(step, guard.step, report, budget)
    _timeouts(step, child, job, report, budget)


def _execution_room(
    step: CoordinatorStep, guard: Node, report: Findings, budget: int | None
) -> None:
    """RQF308: the execution timeout (from the runner's allocation) outlasts the guard's start."""
    wait, _ = guard_quota_wait(guard)
    if not wait or budget is None or budget > guard_longest_minutes(wait):
        return
    longest = guard_longest_minutes(wait)
    report.add(
        step.workflow.path,
        step.line("execution-timeout-minutes"),
        "RQF308",
        f"the coordinator allows {budget} minutes of execution from the runner's allocation, and "
        f"the child's guard may take {longest:g} of them when it meets a spent API quota (a wait "
        f"of up to {wait} minutes for the reset, `{QUOTA_WAIT}`, and its 2-minute check before "
        "and after): the workload could be cancelled for the execution timeout before it starts",
        f"raise `execution-timeout-minutes` above {longest:g} by the workload's own time, or "
        f"lower the guard's `{QUOTA_WAIT}`",
    )


def _coordinator_workflow(
    step: CoordinatorStep, child: Workflow, guard: Node, line: int, report: Findings
) -> None:
    """RQF306: the guard names the coordinator's workflow, so no other run can be its parent."""
    name = step.workflow.path.name
    with_ = guard.get("with")
    node = with_.get("coordinator-workflow") if with_ is not None else None
    value = (node.text or "").strip() if node is not None else ""
    if node is not None and is_expression(value):
        return
    named = {item.removeprefix(".github/workflows/") for item in re.split(r"[\s,]+", value) if item}
    if name in named:
        return
    problem = (
        f"the guard's `coordinator-workflow` ({value}) does not name {name}"
        if value
        else "the guard does not set `coordinator-workflow`"
    )
    report.add(
        child.path,
        node.line if node is not None else line,
        "RQF306",
        f"{problem}: without it, a child dispatched with any in-progress run of another "
        f"workflow as its parent passes the guard",
        f"set `coordinator-workflow: {name}` under the guard's `with:` (separate several "
        "coordinators with spaces)",
        level="warning",
    )


def _timeouts(
    step: CoordinatorStep, child: Workflow, job: Node, report: Findings, budget: int | None
) -> None:
    node = job.get("timeout-minutes")
    text = (node.text or "").strip() if node is not None else ""
    have = whole_minutes(text)
    if node is None or have is None or budget is None or have >= budget:
        return
    report.add(
        child.path,
        node.line,
        "RQF305",
        f"the worker stops after {text} minutes but the coordinator ({step.workflow.path.name}) "
        f"allows {budget} minutes of execution; a workload that needs them would be cut off",
        f"raise the child's `timeout-minutes` to {budget}, or set the coordinator's "
        f"`execution-timeout-minutes` to {text}",
    )
