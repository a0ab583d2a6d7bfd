"""What a coordinator will do for given inputs, and the `timeout-minutes` its job needs."""

from __future__ import annotations

import math
from dataclasses import dataclass

from runner_queue_fallback import timing
from runner_queue_fallback.inputs import PoolSettings
from runner_queue_fallback.profiles import Candidate

__all__ = ["Plan", "make_plan"]


@dataclass(frozen=True)
class Plan:
    """The resolved candidates and the time budget they add up to."""

    settings: PoolSettings

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """The pools in the order they are tried."""
        return self.settings.candidates

    @property
    def queue_minutes(self) -> float:
        """The longest total time spent waiting in queues: every deadline, one after another."""
        return sum(c.queue_minutes for c in self.candidates)

    @property
    def overhead_minutes(self) -> float:
        """Startup and cancellation windows per candidate, plus the parent grace."""
        return (
            len(self.candidates) * timing.PER_CANDIDATE_OVERHEAD_MINUTES
            + timing.PARENT_GRACE_MINUTES
        )

    @property
    def timeout_minutes(self) -> int:
        """The least `timeout-minutes` the coordinator job needs: queues + one execution + overhead."""
        total = self.queue_minutes + self.settings.execution_timeout_minutes + self.overhead_minutes
        return math.ceil(total)

    @property
    def fits_hosted_runner(self) -> bool:
        """Whether the coordinator fits in a GitHub-hosted runner's job time limit."""
        return self.timeout_minutes <= timing.HOSTED_JOB_LIMIT_MINUTES

    def as_dict(self) -> dict[str, object]:
        """The plan as JSON-ready data."""
        return {
            "runner-type": self.settings.runner_type,
            "queue-policy": self.settings.queue_policy,
            "runners-override": self.settings.overridden,
            "candidates": [
                {"order": n, "pool": c.name, **c.runner(), "queue-timeout-minutes": c.queue_minutes}
                for n, c in enumerate(self.candidates, start=1)
            ],
            "queue-budget-minutes": self.queue_minutes,
            "execution-timeout-minutes": self.settings.execution_timeout_minutes,
            "overhead-minutes": self.overhead_minutes,
            "timeout-minutes": self.timeout_minutes,
            "fits-hosted-runner": self.fits_hosted_runner,
        }

    def render(self) -> str:
        """The plan as a table a person reads in a terminal or a log."""
        rows = [("#", "pool", "group", "labels", "queue deadline")]
        rows += [
            (str(n), c.name or "-", c.group, c.label_text, f"{_fmt(c.queue_minutes)} min")
            for n, c in enumerate(self.candidates, start=1)
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows
        ]
        s = self.settings
        lines += [
            "",
            (
                f"runner-type {s.runner_type}, queue-policy {s.queue_policy}"
                + (", explicit runners list" if s.overridden else "")
            ),
            f"queue budget:      {_fmt(self.queue_minutes)} min (every deadline, in turn)",
            f"execution timeout: {s.execution_timeout_minutes} min",
            (
                f"overhead:          {_fmt(self.overhead_minutes)} min ({len(self.candidates)} x 4 min"
                " startup + cancellation windows, 2 min parent grace)"
            ),
            f"coordinator job needs timeout-minutes >= {self.timeout_minutes}",
        ]
        if not self.fits_hosted_runner:
            lines.append(
                f"note: over the {timing.HOSTED_JOB_LIMIT_MINUTES}-minute limit of a job on a "
                "GitHub-hosted runner; run the coordinator on a self-hosted runner outside the "
                "pools, or shorten the queues or the execution timeout"
            )
        return "\n".join(lines)


def make_plan(settings: PoolSettings) -> Plan:
    """Plan a sequence for validated pool settings."""
    return Plan(settings)


def _fmt(minutes: float) -> str:
    return str(int(minutes)) if minutes == int(minutes) else f"{minutes:g}"
