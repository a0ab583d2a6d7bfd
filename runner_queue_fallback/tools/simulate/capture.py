"""What a simulated step prints, kept per thread with the virtual second it was written at.

The simulated coordinators take turns in threads (`VirtualClock.run_all`), so `sys.stdout` is routed
per thread; the runner's GITHUB_OUTPUT / GITHUB_STATE files are read back the way the runner does.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

__all__ = ["GuardLog", "Sink", "Stamped", "StampedLog", "capture_stdout", "read_key_values"]

#: A log line and the virtual second (`clock.monotonic()`) it was written at.
Stamped = tuple[float, str]
#: Where captured output goes: any text stream.
Sink = TextIO | io.TextIOBase


class StampedLog(io.TextIOBase):
    """A text stream that keeps each complete line with the time `now()` gave when it ended."""

    def __init__(self, now: Callable[[], float]) -> None:
        """Stamp lines with `now()` (virtual seconds)."""
        super().__init__()
        self._now = now
        self._partial = ""
        self.lines: list[Stamped] = []

    def writable(self) -> bool:
        """Always writable."""
        return True

    def write(self, text: str) -> int:
        """Buffer `text`; every newline completes a line, stamped now."""
        self._partial += text
        *done, self._partial = self._partial.split("\n")
        stamp = self._now()
        self.lines.extend((stamp, line) for line in done)
        return len(text)

    def getvalue(self) -> str:
        """Everything written, as plain text."""
        return "".join(f"{line}\n" for _, line in self.lines) + self._partial


class _ThreadStdout(io.TextIOBase):
    """`sys.stdout` while simulating: each thread writes to the stream it is capturing into.

    `contextlib.redirect_stdout` swaps one global, which breaks when simulated coordinators take
    turns in threads (`VirtualClock.run_all`): their redirections would interleave and restore
    each other's streams.
    """

    def __init__(self, fallback: TextIO) -> None:
        super().__init__()
        self.fallback = fallback
        self.local = threading.local()

    def _target(self) -> Sink:
        stack: list[Sink] = getattr(self.local, "stack", [])
        return stack[-1] if stack else self.fallback

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()


_ROUTER_LOCK = threading.Lock()
_router_users = 0


@contextlib.contextmanager
def capture_stdout(target: Sink) -> Iterator[None]:
    """Send this thread's `sys.stdout` to `target` (other threads keep their own)."""
    global _router_users  # noqa: PLW0603  # one router for the process, counted by its users
    with _ROUTER_LOCK:
        if not isinstance(sys.stdout, _ThreadStdout):
            sys.stdout = _ThreadStdout(sys.stdout)
        router = sys.stdout
        _router_users += 1
    assert isinstance(router, _ThreadStdout)  # noqa: S101  # installed just above
    stack: list[Sink] = router.local.__dict__.setdefault("stack", [])
    stack.append(target)
    try:
        yield
    finally:
        stack.pop()
        with _ROUTER_LOCK:
            _router_users -= 1
            if _router_users == 0 and sys.stdout is router:
                sys.stdout = router.fallback


@dataclass
class GuardLog:
    """What the guard step of one child run printed, stamped with the worker's virtual time."""

    run_id: int
    lines: list[Stamped]
    passed: bool


def read_key_values(path: Path) -> dict[str, str]:
    """Read a GITHUB_OUTPUT / GITHUB_STATE file (`name<<delimiter` blocks or `name=value` lines)."""
    values: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    index = 0
    while index < len(lines):
        line = lines[index]
        if "<<" in line:
            name, delimiter = line.split("<<", 1)
            end = lines.index(delimiter, index + 1)
            values[name] = "\n".join(lines[index + 1 : end])
            index = end + 1
        else:
            name, _, value = line.partition("=")
            values[name] = value
            index += 1
    return values
