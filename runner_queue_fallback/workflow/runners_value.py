"""RQF221: a `runners` value that holds `${{ ... }}` is read as far as it can be.

An expression inside a JSON string (a group or a label from a variable) is replaced by a stand-in,
so the candidates are still checked; an expression outside a string (the whole list from a
variable, a deadline) leaves the value unchecked, and a notice says so. `${{ github.* }}` in
`runners` is evaluated in the coordinator's job: a runner vendor's `${{ github.run_id }}` label
takes the coordinator's run id, never the child's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from runner_queue_fallback.workflow.model import Findings, is_expression

__all__ = ["STAND_IN", "note_runners_expressions", "with_stand_ins"]

#: What an expression inside a JSON string of `runners` is read as.
STAND_IN = "rqf-expression"
_EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.DOTALL)
_GITHUB_CONTEXT = re.compile(r"\bgithub\.[\w.]+")


def with_stand_ins(text: str) -> str | None:
    """`text` with each expression replaced by the stand-in; None when one is outside a string.

    A bare stand-in outside a JSON string is no JSON, so parsing tells the two apart.
    """
    if not is_expression(text):
        return text
    marked = _EXPRESSION.sub(STAND_IN, text)
    try:
        json.loads(marked)
    except (ValueError, RecursionError):
        return None
    return marked


def note_runners_expressions(path: Path, line: int, text: str, report: Findings) -> None:
    """RQF221 notices: `runners` left unchecked, and `github.*` taking the coordinator's values."""
    if not is_expression(text):
        return
    if with_stand_ins(text) is None:
        report.add(
            path,
            line,
            "RQF221",
            "`runners` was not checked: an expression stands outside a JSON string (the whole "
            "list, or a number, from an expression), so its candidates are known only at run time",
            "run `runner-queue-fallback plan --runners '<each value it takes>'`, or keep "
            "expressions inside the JSON strings (a group or a label) so lint can check the rest",
            level="notice",
        )
    found = sorted(set(_GITHUB_CONTEXT.findall(" ".join(_EXPRESSION.findall(text)))))
    if found:
        report.add(
            path,
            line,
            "RQF221",
            f"`runners` reads {', '.join(found)}: it is evaluated in the coordinator's job, so it "
            "takes the coordinator's value (its run id, its ref), not the child's; a runner "
            "label built from it names the coordinator's run",
            "use a value that is the same for the coordinator and the child, or none",
            level="notice",
        )
