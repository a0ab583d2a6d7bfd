"""Whether a runner group's workflow restriction admits the child: exact, or not proven.

A group restricted to workflows (`restricted_to_workflows`) gives its runners only to jobs defined
directly in a workflow its `selected_workflows` list, each entry naming a file at a ref
(`owner/repo/.github/workflows/<file>@<ref>`, the ref a full ref, a short branch or tag name, or a
commit SHA; github-api.md 13). What is not compared exactly is never a "no".
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["restriction_admits"]

_SHA = re.compile(r"[0-9a-f]{40}")
_ENTRY = re.compile(
    r"(?P<repo>[^/@*]+/[^/@*]+)/\.github/workflows/(?P<file>[^/@*]+)@(?P<ref>[^@*]+)"
)


def _short(ref: str) -> str:
    for prefix in ("refs/heads/", "refs/tags/", "heads/", "tags/"):
        if ref.startswith(prefix):
            return ref.removeprefix(prefix)
    return ref


def restriction_admits(
    entries: Sequence[str], repository: str, workflow: str, workflow_ref: str, commit: str | None
) -> bool | None:
    """Whether a selected-workflows list admits the child: True, False, or None (not proven).

    An entry `owner/repo/.github/workflows/<file>@<ref>` matches when the repository (case
    ignored), the file and the ref (full or short) agree; a 40-hex SHA entry when it is the commit
    `workflow-ref` resolves to. Any other form (a wildcard, unknown) leaves it not proven.
    """
    unknown = False
    for entry in entries:
        match = _ENTRY.fullmatch(entry.strip())
        if match is None:
            unknown = True
            continue
        if match["repo"].casefold() != repository.casefold() or match["file"] != workflow:
            continue
        ref = match["ref"]
        if _SHA.fullmatch(ref):
            if commit is None:
                unknown = True
            elif ref == commit:
                return True
            continue
        full_given = workflow_ref.startswith("refs/") and ref.startswith("refs/")
        if (ref == workflow_ref) if full_given else (_short(ref) == _short(workflow_ref)):
            return True
    return None if unknown else False
