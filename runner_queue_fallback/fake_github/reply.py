"""What the fake GitHub answers, and what it remembers about each request."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["LedgerEntry", "Reply"]


@dataclass(frozen=True)
class Reply:
    """One HTTP answer, or no answer at all (`error`: the client times out or loses the line)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    error: Literal["timeout", "connection"] | None = None

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


@dataclass(frozen=True)
class LedgerEntry:
    """One request as the fake saw it. `client` numbers tokens in order of first use."""

    seq: int
    time: float  # virtual seconds when it was served
    method: str
    path: str  # without the query
    query: str
    status: int | None  # None: no reply reached the client (timeout, dropped connection)
    counted: bool  # against the repository's primary rate limit (304s are not)
    client: int | None  # None: no Authorization header
    request_id: str
    fault: str | None = None  # the injected fault kind, if any
    points: int = 0  # charged against the secondary limits (0 when they are off)
    limit: str | None = None  # "primary" or "secondary": the rate limit that refused it
    bucket: str = "repository"  # whose primary quota its credential spends (`QuotaBucket.owner`)
