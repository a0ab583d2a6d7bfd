"""The steps of a workflow that use the coordinator action, with their jobs and `with:` inputs.

`lint` checks each such step; the coordinator finds its own among them to read its job's timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from runner_queue_fallback.workflow.model import (
    ActionRef,
    Node,
    Workflow,
    is_expression,
    parse_uses,
)
from runner_queue_fallback.workflow.runners_value import with_stand_ins

__all__ = ["CoordinatorStep", "find_coordinators"]


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

    def checkable(self, name: str) -> str | None:
        """The value lint checks (None: it cannot be checked).

        The literal, or `runners` with stand-ins for expressions inside its JSON strings (RQF221).
        """
        if name != "runners":
            return self.literal(name)
        value = self.text(name)
        return with_stand_ins(value) if value else None

    def line(self, name: str) -> int:
        """The line of the input, or of the `uses:` when it is absent."""
        node = self.inputs.get(name)
        return node.line if node is not None else self.uses_line


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
