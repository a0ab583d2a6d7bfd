"""Recommendations: which pool order and queue deadlines the measured waits favour.

For each order of the runner type's pools (those with enough data) and each deadline worth
considering (the pool's observed quantiles and the current deadline, never past the longest wait
the data can see through their censoring), the expected time to a runner, its 90th percentile and
the chance that every queue is exhausted are computed exactly from the Kaplan-Meier curves,
taking the pools as independent and each fallback as costing `FALLBACK_OVERHEAD_SECONDS`.
Nothing worse comes first: orders are ranked by the chance of exhaustion, then the mean wait, and
one that raises that chance above the current order's is never ranked first (the fastest such one
may be listed last, its cost beside its gain). `simulate --waits` checks the result end to end
with the real coordinator. Pure.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.tools.stats.survival import Survival

__all__ = [
    "FALLBACK_OVERHEAD_SECONDS",
    "MIN_ALLOCATIONS",
    "MIN_CHILDREN",
    "Evaluation",
    "PoolData",
    "Recommendation",
    "Step",
    "evaluate",
    "recommend",
]

#: The issue's floor: no recommendation rests on a pool with fewer children or allocations.
MIN_CHILDREN = 30
MIN_ALLOCATIONS = 10
#: Between a deadline and the next child's job in the queue: the cancel landing and confirmed
#: (a few 5 s polls), the next preflight and dispatch, and the job appearing. Measured in the
#: simulator at 20-30 s; replay measures the real figure.
FALLBACK_OVERHEAD_SECONDS = 30.0
#: Quantiles of a pool's waits offered as deadlines.
DEADLINE_QUANTILES = (0.5, 0.75, 0.9, 0.95)
#: Pools considered in the search of orders (5! orders times a few deadlines each).
MAX_POOLS = 5


@dataclass(frozen=True)
class PoolData:
    """One pool's measurements: its curve and how many children and runners it rests on."""

    group: str
    labels: str
    curve: Survival
    children: int
    allocated: int

    def refusal(self) -> str | None:
        """Why no recommendation may rest on this pool, or None."""
        if self.children < MIN_CHILDREN or self.allocated < MIN_ALLOCATIONS:
            return (
                f"{self.children} children and {self.allocated} allocations; at least "
                f"{MIN_CHILDREN} and {MIN_ALLOCATIONS} are needed"
            )
        return None

    def deadlines(self, current: Sequence[float]) -> list[int]:
        """Whole-minute deadlines worth trying, within what the data can see (1 to 60).

        When every child got a runner (the curve reaches 0), any deadline past the last one is
        known to be enough: the first such minute is offered, and the current one is kept.
        """
        curve = self.curve
        every = bool(curve.survival) and curve.survival[-1] == 0.0
        seen = timing.QUEUE_MINUTES_MAX if every else int(curve.horizon // 60)
        seen = min(timing.QUEUE_MINUTES_MAX, seen)
        options = {math.ceil(q / 60) for p in DEADLINE_QUANTILES if (q := curve.quantile(p))}
        options |= {math.ceil(m) for m in current}
        if every:
            options.add(math.ceil(curve.times[-1] / 60))
        return sorted(m for m in options if timing.QUEUE_MINUTES_MIN <= m <= seen)


@dataclass(frozen=True)
class Step:
    """One candidate of an order: a pool and its queue deadline in minutes."""

    group: str
    labels: str
    minutes: float
    #: a GitHub-hosted last resort (issue 33): recommended only as `{"hosted": ...}`, only last
    hosted: bool = False

    def runner(self) -> dict[str, object]:
        """The `runners` entry for this step."""
        if self.hosted:
            return {"hosted": self.labels, "queue-timeout-minutes": self.minutes}
        return {"group": self.group, "labels": self.labels, "queue-timeout-minutes": self.minutes}


@dataclass(frozen=True)
class Evaluation:
    """What an order and its deadlines give, by the measured curves."""

    steps: tuple[Step, ...]
    mean_seconds: float | None  # expected time to a runner, among sequences that get one
    p90_seconds: float | None  # 90% of sequences have a runner by then (None: never 90%)
    exhausted: float  # the chance that every queue times out

    def runners_json(self) -> str:
        """The exact `runners` input."""
        return json.dumps([s.runner() for s in self.steps], separators=(",", ":"))

    def key(self) -> tuple[float, float, float]:
        """Ranking: exhaustion first, then the mean, then the 90th percentile.

        Exhaustion is compared exactly (to 1e-9, float noise): rounding it to whole percent let
        an order with 0.2% exhausted rank above one with none.
        """
        return (round(self.exhausted, 9), self.mean(), self.p90())

    def mean(self) -> float:
        """The mean, infinite when no sequence gets a runner."""
        return math.inf if self.mean_seconds is None else self.mean_seconds

    def p90(self) -> float:
        """The 90th percentile, infinite when never reached."""
        return math.inf if self.p90_seconds is None else self.p90_seconds

    def raises_failure_rate(self, current: Evaluation | None) -> bool:
        """Whether this order is more often exhausted than `current` (beyond float noise)."""
        return current is not None and self.exhausted > current.exhausted + 1e-9


def evaluate(steps: Sequence[Step], curves: Mapping[str, Survival]) -> Evaluation | None:
    """Expected and 90th-percentile time to a runner and exhaustion; None past a horizon."""
    reach, offset, total, got = 1.0, 0.0, 0.0, 0.0
    parts: list[tuple[float, float, float, Survival]] = []  # (reach, offset, deadline, curve)
    for step in steps:
        curve, deadline = curves[step.labels], step.minutes * 60.0
        left = curve.surviving(deadline)
        if left is None:
            return None
        served = 1.0 - left
        partial = curve.mean_up_to(deadline) - deadline * left  # E[wait; wait <= deadline]
        total += reach * (offset * served + partial)
        got += reach * served
        parts.append((reach, offset, deadline, curve))
        reach *= left
        offset += deadline + FALLBACK_OVERHEAD_SECONDS
    mean = total / got if got > 0 else None
    return Evaluation(tuple(steps), mean, _p90(parts), reach)


def _p90(parts: Sequence[tuple[float, float, float, Survival]]) -> float | None:
    """The smallest time by which 90% of sequences have a runner, or None."""
    points = sorted(
        offset + t for _, offset, deadline, curve in parts for t in curve.times if t <= deadline
    )
    for x in points:
        done = 0.0
        for reach, offset, deadline, curve in parts:
            if x >= offset:
                done += reach * (1.0 - (curve.surviving(min(x - offset, deadline)) or 0.0))
        if done >= 0.9 - 1e-12:
            return x
    return None


@dataclass(frozen=True)
class Recommendation:
    """The best orders, the current one, and the pools refused for lack of data."""

    best: tuple[Evaluation, ...]
    current: Evaluation | None
    current_note: str | None
    refused: Mapping[str, str]
    considered: int


def recommend(
    current: Sequence[Candidate], pools: Mapping[str, PoolData], *, top: int = 3
) -> Recommendation:
    """Compare the current candidates with every order and deadline of the usable pools."""
    groups = {c.label_text: c.group for c in current}
    names = list(dict.fromkeys(c.label_text for c in current))
    refused = {n: "no children observed" for n in names if n not in pools}
    refused |= {n: r for n in names if n in pools and (r := pools[n].refusal()) is not None}
    usable = [pools[n] for n in names if n not in refused][:MAX_POOLS]
    curves = {p.labels: p.curve for p in usable}
    hosted = {c.label_text for c in current if c.hosted}  # kept last, in the hosted form
    now = [Step(c.group, c.label_text, c.queue_minutes, c.hosted) for c in current]
    current_eval, note = None, None
    if any(s.labels in refused for s in now):
        note = "the current order uses a pool without enough data"
    else:
        current_eval = evaluate(now, curves)
        if current_eval is None:
            note = "a current deadline is longer than the data can see past their censoring"
    choices = {
        p.labels: p.deadlines([c.queue_minutes for c in current if c.label_text == p.labels])
        for p in usable
    }
    found: list[Evaluation] = []
    last = tuple(p for p in usable if p.labels in hosted)
    movable = [p for p in usable if p.labels not in hosted]
    for moved in itertools.permutations(movable) if usable else ():  # no pool: no order at all
        order = (*moved, *last)
        for minutes in itertools.product(*(choices[p.labels] for p in order)):
            steps = [
                Step(groups.get(p.labels, p.group), p.labels, m, p.labels in hosted)
                for p, m in zip(order, minutes, strict=True)
            ]
            if (result := evaluate(steps, curves)) is not None:
                found.append(result)
    if current_eval is not None and all(e.steps != current_eval.steps for e in found):
        found.append(current_eval)  # a current deadline off the whole minutes: still a choice
    found.sort(key=Evaluation.key)
    return Recommendation(_rank(found, current_eval, top), current_eval, note, refused, len(found))


def _rank(
    found: Sequence[Evaluation], current: Evaluation | None, top: int
) -> tuple[Evaluation, ...]:
    """The `top` best of `found` (sorted) that are exhausted no more often than `current`.

    The fastest order that is exhausted more often is listed after them when it is faster than
    the first: a trade the reader may choose, never the first choice.
    """
    best = [e for e in found if not e.raises_failure_rate(current)][:top]
    worse = [e for e in found if e.raises_failure_rate(current)]
    faster = min(worse, key=lambda e: (e.mean(), e.key()), default=None)
    if faster is not None and (not best or faster.mean() < best[0].mean()):
        best.append(faster)
    return tuple(best)
