"""The request id: the child's unique run-name, and the only link from a child back to its parent.

Format (stable: the guard, the post step and `stats` parse it)::

    rqf-<parent run id>-<parent run attempt>-<candidate number>-<token>

with decimal numbers without leading zeros and a token of 8 lowercase hex digits. The coordinator
formats it; everyone else parses it with `parse` and refuses what does not match exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The whole grammar, anchored: nothing before, nothing after, no other characters.
PATTERN = re.compile(r"rqf-([1-9][0-9]{0,19})-([1-9][0-9]{0,4})-([1-9][0-9]?)-([0-9a-f]{8})")


@dataclass(frozen=True)
class RequestId:
    """One parsed request id."""

    run_id: int
    run_attempt: int
    candidate: int
    token: str

    def __str__(self) -> str:
        """The run-name the child shows."""
        return f"rqf-{self.run_id}-{self.run_attempt}-{self.candidate}-{self.token}"


def parse(text: str) -> RequestId | None:
    """The request id in `text`, or None when `text` is not exactly one."""
    match = PATTERN.fullmatch(text)
    if match is None:
        return None
    run_id, attempt, candidate, token = match.groups()
    return RequestId(int(run_id), int(attempt), int(candidate), token)
