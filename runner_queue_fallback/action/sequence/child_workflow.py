"""The child workflow before any dispatch: workflow-ref and the file, read and checked.

The child file comes with its blob SHA in one request (the contents endpoint returns both), so
checking it costs nothing extra. Before the first dispatch it is checked with `lint`'s child rules
and the pair rule on the inputs: a breach that makes the dispatch fail or unsafe stops the step
before any child exists, with lint's message; every other finding is a warning annotation.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from runner_queue_fallback.core.errors import (
    CHILD_FILE_NOT_FOUND,
    WORKFLOW_REF_NOT_FOUND,
    NotFound,
    SequenceError,
)
from runner_queue_fallback.workflow.child import check_dispatch_inputs, dispatch_inputs, lint_child
from runner_queue_fallback.workflow.model import Finding, Findings, parse_workflow

if TYPE_CHECKING:
    from runner_queue_fallback.action.sequence.state import SequenceState
    from runner_queue_fallback.core.actions_io import Reporter
    from runner_queue_fallback.core.inputs import CoordinatorInputs
    from runner_queue_fallback.github.client import GitHubClient
    from runner_queue_fallback.github.models import ContentFile

__all__ = [
    "BLOCKING_RULES",
    "ChildRejected",
    "check_child",
    "child_findings",
    "is_blocking",
    "read_child",
    "read_definition",
    "workflow_commit",
]

#: Rules whose breach makes a dispatch fail or unsafe: the step stops before any child exists.
#: RQF101 blocks only when `workflow_dispatch` is missing (another trigger beside it is a warning);
#: RQF000: a file that is not a workflow cannot be dispatched either.
BLOCKING_RULES = frozenset({"RQF000", "RQF101", "RQF103", "RQF104", "RQF105", "RQF112", "RQF302"})
#: How the coordinator names itself in lint's pair messages.
_SENDER = "runner-queue-fallback"


class ChildRejected(SequenceError):
    """The child workflow breaks a rule that makes its dispatch fail or unsafe; nothing was sent."""

    title = "Child workflow rejected"

    def __init__(self, path: str, ref: str, findings: list[Finding]) -> None:
        """List lint's findings (rule id, line, message and fix)."""
        super().__init__(
            f"the child workflow {path} at workflow-ref {ref!r} would make the dispatch fail or "
            "unsafe, so nothing was dispatched: "
            + "; ".join(finding.text() for finding in findings)
        )


def read_definition(seq: SequenceState) -> tuple[str, str]:
    """The commit of workflow-ref and the child's blob SHA there; its rules before the first dispatch."""
    commit = workflow_commit(seq.client, seq.inputs.workflow_ref, seq.ctx.repository)
    child = read_child(seq.client, seq.inputs, commit)
    if seq.definition_sha is None:
        check_child(child, seq.inputs, seq.report)
    return commit, child.sha


def workflow_commit(client: GitHubClient, ref: str, repository: str) -> str:
    """The commit of `ref` as a branch, else as a tag; neither is one message naming both."""
    try:
        return client.get_commit_sha(f"heads/{ref}")
    except NotFound:
        pass
    try:
        return client.get_commit_sha(f"tags/{ref}")
    except NotFound:
        raise SequenceError(WORKFLOW_REF_NOT_FOUND.format(ref=ref, repository=repository)) from None


def read_child(client: GitHubClient, inputs: CoordinatorInputs, commit: str) -> ContentFile:
    """The child workflow file at `commit`; a 404 names the inputs `workflow` and `workflow-ref`."""
    path = f".github/workflows/{inputs.workflow}"
    try:
        return client.get_file(path, commit)
    except NotFound as exc:
        raise SequenceError(
            CHILD_FILE_NOT_FOUND.format(
                path=path, ref=inputs.workflow_ref, workflow=inputs.workflow, detail=exc.reply
            )
        ) from None


def child_findings(path: str, text: str) -> list[Finding]:
    """Every finding of lint's child rules and its pair rule on the inputs, for the file's text."""
    report = Findings()
    child = parse_workflow(Path(path), text, report)  # nothing is read: the path names the file
    if child is not None:
        lint_child(child, report)
        trigger = dispatch_inputs(child)
        if trigger is not None:
            check_dispatch_inputs(child, trigger, report, sender=_SENDER)
    return report.findings


def is_blocking(finding: Finding) -> bool:
    """True for a finding that makes the dispatch fail or unsafe."""
    if finding.level != "error" or finding.rule not in BLOCKING_RULES:
        return False
    # RQF101 blocks only when workflow_dispatch itself is missing, not for another trigger beside it
    return not (finding.rule == "RQF101" and finding.message.startswith("the child also runs on"))


def check_child(child: ContentFile, inputs: CoordinatorInputs, report: Reporter) -> list[Finding]:
    """Check the child file: raise ChildRejected for blocking findings, warn about the others."""
    path = f".github/workflows/{inputs.workflow}"
    text = child.text()
    if text is None:
        report.warning(
            f"the child workflow {path} came without its content (larger than 1 MB?), so its "
            "rules were not checked; run `runner-queue-fallback lint` on it",
            title="Child workflow not checked",
        )
        return []
    findings = child_findings(path, text)
    blocking = [f for f in findings if is_blocking(f)]
    if blocking:
        raise ChildRejected(path, inputs.workflow_ref, blocking)
    for finding in findings:
        report.command(
            finding.level if finding.level != "error" else "warning",
            f"{finding.message} (fix: {finding.fix})",
            file=finding.path,
            line=str(finding.line),
            title=finding.rule,
        )
    return findings
