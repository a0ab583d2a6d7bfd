"""Faults a scenario injects into the fake GitHub: which requests, when, how often, and what breaks."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, Literal, get_args

from pydantic import ConfigDict

__all__ = ["FAULT_KINDS", "Fault", "FaultKind", "FaultPlan"]

FaultKind = Literal[
    "status",  # an HTTP error status: 500, 502, 503, 408 (`status`, default 500)
    "timeout",  # no reply: the in-process adapter raises requests' ReadTimeout
    "connection",  # no reply: ConnectionError (the loopback server drops the connection)
    "malformed",  # 200 with a broken JSON body
    "unauthorized",  # 401 Bad credentials
    "forbidden",  # 403 Resource not accessible by integration (a missing permission)
    "primary_rate_limit",  # 403 (or `status` 429) with x-ratelimit-remaining: 0 and a reset
    "secondary_rate_limit",  # 403 (or `status` 429) with retry-after and the secondary message
    "lost_reply",  # served for real (a dispatch creates its run), then 502 or a timeout
]
FAULT_KINDS: tuple[str, ...] = get_args(FaultKind)


@dataclass(frozen=True)
class Fault:
    r"""Break matching requests inside a virtual-time window, up to `count` times, with a chance.

    `path` is a regular expression searched in the request path (without the query), e.g.
    `r"/dispatches$"` or `r"/actions/runs/\\d+$"`. `method` is `*` or an HTTP method.
    For `lost_reply`, `status` None means the client sees a timeout, else that status (502).
    For rate limits, `retry_after` is the retry-after seconds (secondary) or the seconds until
    x-ratelimit-reset (primary).
    """

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    kind: FaultKind
    method: str = "*"
    path: str = ""
    start: float = 0.0
    end: float = math.inf
    count: int | None = None
    probability: float = 1.0
    status: int | None = None
    retry_after: int = 60

    def matches(self, method: str, path: str, at: float) -> bool:
        """Whether this fault applies to `method path` at virtual time `at` (count aside)."""
        if self.method not in {"*", method.upper()}:
            return False
        return self.start <= at < self.end and re.search(self.path, path) is not None


class FaultPlan:
    """The faults of one world, in order; the first one that fires wins. Seeded, so replayable."""

    def __init__(self, faults: Iterable[Fault] = (), seed: int = 0) -> None:
        """Plan `faults`; chances are rolled with `random.Random(seed)`."""
        self.faults: list[Fault] = list(faults)
        self.fired: list[int] = [0] * len(self.faults)
        self._rng = random.Random(seed)

    def add(self, fault: Fault) -> None:
        """Add a fault at the end of the plan."""
        self.faults.append(fault)
        self.fired.append(0)

    def pick(self, method: str, path: str, at: float) -> Fault | None:
        """The fault to apply to this request, if any (and count it as fired)."""
        for index, fault in enumerate(self.faults):
            if fault.count is not None and self.fired[index] >= fault.count:
                continue
            if not fault.matches(method, path, at):
                continue
            if fault.probability < 1.0 and self._rng.random() >= fault.probability:
                continue
            self.fired[index] += 1
            return fault
        return None
