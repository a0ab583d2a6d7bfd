"""RQF222: `runners-token` comes from a secret or a step's output, and not from `GITHUB_TOKEN`.

The second token reads the organisation's runner groups, so it is a credential of its own: a
literal sits in the workflow file, a variable (`vars.*`, `env.*`) or a job output is stored or
shown in plain text, and `GITHUB_TOKEN` (`github.token`, `secrets.GITHUB_TOKEN`) cannot read
runner groups at all (403). A secret, or the output of a step that mints an App installation
token, is what it should be. A notice: the reads are optional and never write.
"""

from __future__ import annotations

import re
from pathlib import Path

from runner_queue_fallback.workflow.model import Findings, Node

__all__ = ["note_runners_token"]

_NAME = r"[A-Za-z_][\w-]*"
_KEY = rf"(?:\.{_NAME}|\['{_NAME}'\]|\[\"{_NAME}\"\])"
#: `${{ secrets.X }}` or `${{ steps.<id>.outputs.<name> }}`, alone (spaces dropped).
_FROM_SECRET = re.compile(rf"\$\{{\{{secrets(?P<name>{_KEY})\}}\}}")
_FROM_STEP = re.compile(rf"\$\{{\{{steps{_KEY}\.outputs{_KEY}\}}\}}")
_GITHUB_TOKEN = re.compile(
    r"\bgithub\.token\b|\bsecrets\s*(\.\s*|\[\s*['\"])github_token\b", re.IGNORECASE
)
_FIX = (
    "set `runners-token: ${{ secrets.RUNNERS_TOKEN }}` (a read-only fine-grained token with "
    'organisation "Self-hosted runners" (read) and "Actions policies" (read)), or '
    "`${{ steps.<id>.outputs.token }}` of a step that mints a GitHub App installation token"
)


def note_runners_token(path: Path, node: Node | None, report: Findings) -> None:
    """A notice when `runners-token` is set from anything but a secret or a step's output."""
    if node is None or not (node.text or "").strip():
        return
    text = "".join((node.text or "").split())
    if _GITHUB_TOKEN.search(text):
        why = "`runners-token` is `GITHUB_TOKEN`, which cannot read runner groups (403)"
    elif _FROM_SECRET.fullmatch(text) or _FROM_STEP.fullmatch(text):
        return
    elif "${{" not in text:
        why = "`runners-token` is written in the workflow file, readable by anyone who reads it"
    else:
        why = (
            "`runners-token` comes from an expression other than a secret or a step's output; "
            "a variable or job output holds it in plain text"
        )
    report.add(path, node.line, "RQF222", why, _FIX, level="notice")
