"""The composition root's signature (`cli.main`), for what runs other subcommands.

Here, below every place, because `commands`' Context carries the root and the tools that run the
action's own steps (`simulate`) call it: each may import this, and neither imports `cli`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import requests

    from runner_queue_fallback.core.clock import Clock

__all__ = ["Main"]


class Main(Protocol):
    """The composition root's signature (`cli.main`), handed to what runs other subcommands."""

    def __call__(
        self,
        argv: Sequence[str] | None = None,
        environ: Mapping[str, str] | None = None,
        *,
        clock: Clock | None = None,
        session: requests.Session | None = None,
    ) -> int:
        """Run one subcommand and return its exit code."""
        ...
