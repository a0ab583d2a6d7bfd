"""Queue-wait distributions from right-censored observations: the Kaplan-Meier estimator.

A child cancelled at its queue deadline with no runner waited *at least* that long: a
right-censored observation. Dropping such children makes a pool look faster than it is; capping
them at the deadline does too. Kaplan-Meier uses them for exactly what they say (no runner up to
then) and leaves the distribution unknown beyond the longest observation, which is why every
figure here may be None: "the data do not reach it".

Pure: no I/O, no time, no third-party dependency (the action's image stays free of scipy; the
tests compare this with scipy's `ecdf(CensoredData(...))` where scipy is installed).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Observation", "Survival", "kaplan_meier"]


@dataclass(frozen=True)
class Observation:
    """One queue wait in seconds; `event` False: censored (no runner came up to `seconds`)."""

    seconds: float
    event: bool


@dataclass(frozen=True)
class Survival:
    """A Kaplan-Meier curve: S(t) = P(no runner within t seconds), a step function.

    `times` are the distinct event times (a runner came), `survival[i]` is S just after
    `times[i]`; `horizon` is the longest wait observed (event or censored): S is known up to it.
    """

    times: tuple[float, ...]
    survival: tuple[float, ...]
    horizon: float
    observations: int
    events: int

    def __post_init__(self) -> None:
        """Check the step function is well formed (increasing times, non-increasing S)."""
        if len(self.times) != len(self.survival):
            raise ValueError("times and survival differ in length")
        if any(b <= a for a, b in zip(self.times, self.times[1:], strict=False)):
            raise ValueError("times must increase")
        if any(b > a for a, b in zip(self.survival, self.survival[1:], strict=False)):
            raise ValueError("survival must not increase")

    def surviving(self, seconds: float) -> float | None:
        """S(seconds), or None beyond the horizon (the data cannot see that far)."""
        if seconds > self.horizon and not (self.survival and self.survival[-1] == 0.0):
            return None
        index = bisect.bisect_right(self.times, seconds)
        return 1.0 if index == 0 else self.survival[index - 1]

    def within(self, seconds: float) -> float | None:
        """P(a runner within `seconds`), or None beyond the horizon."""
        value = self.surviving(seconds)
        return None if value is None else 1.0 - value

    def quantile(self, q: float) -> float | None:
        """The shortest wait by which a fraction `q` of children had a runner, if reached."""
        for time, value in zip(self.times, self.survival, strict=True):
            if 1.0 - value >= q - 1e-12:
                return time
        return None

    def mean_up_to(self, seconds: float) -> float:
        """E[min(wait, seconds)] = the area under S from 0 to `seconds` (<= the horizon)."""
        area, previous, level = 0.0, 0.0, 1.0
        for time, value in zip(self.times, self.survival, strict=True):
            if time >= seconds:
                break
            area += level * (time - previous)
            previous, level = time, value
        return area + level * max(0.0, seconds - previous)

    def sample(self, rng: random.Random) -> float:
        """One wait drawn from the curve; the mass beyond the last event is `inf` (no runner)."""
        u = rng.random()
        for time, value in zip(self.times, self.survival, strict=True):
            if 1.0 - value >= u:
                return time
        return math.inf

    def as_json(self) -> dict[str, Any]:
        """The curve for `stats --json` (schema version 1, `pools[].curve`)."""
        return {
            "observations": self.observations,
            "events": self.events,
            "horizon_seconds": self.horizon,
            "steps": [[t, s] for t, s in zip(self.times, self.survival, strict=True)],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Survival:
        """Read `as_json` back (the input of `simulate --waits`)."""
        steps = [(float(t), float(s)) for t, s in data["steps"]]
        return cls(
            times=tuple(t for t, _ in steps),
            survival=tuple(s for _, s in steps),
            horizon=float(data["horizon_seconds"]),
            observations=int(data["observations"]),
            events=int(data["events"]),
        )


def kaplan_meier(observations: Iterable[Observation]) -> Survival:
    """The product-limit estimate: at each event time, S *= 1 - events / at risk.

    A child censored at the same time as an event is still at risk at that time (the usual
    convention: censoring happens just after events).
    """
    ordered = sorted(observations, key=lambda o: (o.seconds, not o.event))
    at_risk, times, survival, level = len(ordered), [], [], 1.0
    index = 0
    while index < len(ordered):
        time, end = ordered[index].seconds, index
        while end < len(ordered) and ordered[end].seconds == time:
            end += 1
        events = sum(1 for o in ordered[index:end] if o.event)
        if events:
            level *= 1.0 - events / at_risk
            times.append(time)
            survival.append(level)
        at_risk -= end - index
        index = end
    return Survival(
        times=tuple(times),
        survival=tuple(survival),
        horizon=ordered[-1].seconds if ordered else 0.0,
        observations=len(ordered),
        events=sum(1 for o in ordered if o.event),
    )
