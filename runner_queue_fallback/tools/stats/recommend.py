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

A candidate is matched with the history's pool of the same label set, in any order or case
(`pools`); one the history cannot measure is refused with the reason, never merged. Each step is
written back as the `runners` entry its candidate was: its labels as a list, its group, and the
machine declaration it needs (`plan` accepts it pasted back as it stands).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runner_queue_fallback.core.labels import Labels, as_list, canonical, label_names
from runner_queue_fallback.core.machine import MachineProblem, RunnerNeeds, read_machine
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.tools.stats.pools import (
    NOT_MEASURABLE,
    LabelledPool,
    PoolData,
    candidate_text,
    unmeasurable,
)
from runner_queue_fallback.tools.stats.survival import Survival

__all__ = [
    "FALLBACK_OVERHEAD_SECONDS",
    "Evaluation",
    "PoolData",  # defined in `pools`: the measurements a recommendation rests on
    "Recommendation",
    "Refusal",
    "Step",
    "evaluate",
    "recommend",
]

#: Between a deadline and the next child's job in the queue: the cancel landing and confirmed
#: (a few 5 s polls), the next preflight and dispatch, and the job appearing. Measured in the
#: simulator at 20-30 s; replay measures the real figure.
FALLBACK_OVERHEAD_SECONDS = 30.0
#: Pools considered in the search of orders (5! orders times a few deadlines each).
MAX_POOLS = 5


@dataclass(frozen=True)
class Step(LabelledPool):
    """One candidate of an order: a pool and its queue deadline in minutes.

    `labels` as the candidate wrote them; `declared`: the machine facts (`os`, `arch`, `gpus`) the
    candidate needs written beside them because its labels do not tell them.
    """

    group: str
    labels: Labels
    minutes: float
    #: a GitHub-hosted last resort (a departure): recommended only as `{"hosted": ...}`, only last
    hosted: bool = False
    declared: tuple[tuple[str, str | int], ...] = ()

    @classmethod
    def of(cls, candidate: Candidate, minutes: float) -> Step:
        """The step that tries `candidate` for `minutes`."""
        return cls(
            "" if candidate.hosted else candidate.group,
            candidate.labels,
            minutes,
            candidate.hosted,
            _declared(candidate),
        )

    def runner(self) -> dict[str, object]:
        """The `runners` entry for this step, which `plan` accepts as it stands."""
        if self.hosted:
            return {
                "hosted": ",".join(label_names(self.labels)),
                "queue-timeout-minutes": self.minutes,
            }
        entry: dict[str, object] = {"group": self.group} if self.group else {}
        if label_names(self.labels):
            entry["labels"] = as_list(self.labels)
        entry.update(self.declared)
        entry["queue-timeout-minutes"] = self.minutes
        return entry


def _declared(candidate: Candidate) -> tuple[tuple[str, str | int], ...]:
    """The candidate's machine, when its labels alone do not tell it (else nothing to write)."""
    machine = candidate.machine
    if machine is None or candidate.hosted:
        return ()
    needs = RunnerNeeds("", machine.family, machine.arch, machine.gpus)
    try:
        told = read_machine({}, candidate.labels, needs)
    except MachineProblem:
        told = None
    if told == machine:
        return ()
    return (("os", machine.os), ("arch", machine.arch), ("gpus", machine.gpus))


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
        curve, deadline = curves[step.key], step.minutes * 60.0
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
class Refusal:
    """A current candidate no recommendation rests on, and why."""

    group: str
    labels: Labels
    reason: str

    @property
    def text(self) -> str:
        """The candidate for a person to read: its labels, or its group when it has none."""
        return candidate_text(self.group, self.labels)


@dataclass(frozen=True)
class Recommendation:
    """The best orders, the current one, and the candidates refused for lack of data."""

    best: tuple[Evaluation, ...]
    current: Evaluation | None
    current_note: str | None
    refused: tuple[Refusal, ...]
    considered: int


def _refusal(candidate: Candidate, pools: Mapping[str, PoolData]) -> str | None:
    """Why no recommendation may rest on the candidate's pool, or None."""
    pool = pools.get(canonical(candidate.labels))
    if (reason := unmeasurable(candidate, pool.group if pool else "")) is not None:
        return reason
    if pool is None:
        return "no children observed"
    return pool.refusal()


def recommend(
    current: Sequence[Candidate], pools: Mapping[str, PoolData], *, top: int = 3
) -> Recommendation:
    """Compare the current candidates with every order and deadline of the usable pools.

    Pools are matched by their label sets (`PoolData.key`), whatever `pools` is keyed by.
    """
    by_key = {p.key: p for p in pools.values()}
    refused: dict[tuple[str, str], Refusal] = {}
    first: dict[str, Candidate] = {}  # each usable pool's first candidate: how it is written
    for c in current:
        if (reason := _refusal(c, by_key)) is not None:
            refused.setdefault((c.group, canonical(c.labels)), Refusal(c.group, c.labels, reason))
        else:
            first.setdefault(canonical(c.labels), c)
    usable = [by_key[key] for key in first][:MAX_POOLS]
    curves = {p.key: p.curve for p in usable}
    current_eval, note = None, None
    if any(r.reason.startswith(NOT_MEASURABLE) for r in refused.values()):
        note = "the current order uses a pool not measurable from history"
    elif refused:
        note = "the current order uses a pool without enough data"
    else:
        current_eval = evaluate([Step.of(c, c.queue_minutes) for c in current], curves)
        if current_eval is None:
            note = "a current deadline is longer than the data can see past their censoring"
    choices = {
        p.key: p.deadlines([c.queue_minutes for c in current if canonical(c.labels) == p.key])
        for p in usable
    }
    found: list[Evaluation] = []
    last = tuple(p for p in usable if first[p.key].hosted)  # kept last, in the hosted form
    movable = [p for p in usable if not first[p.key].hosted]
    for moved in itertools.permutations(movable) if usable else ():  # no pool: no order at all
        order = (*moved, *last)
        for minutes in itertools.product(*(choices[p.key] for p in order)):
            steps = [Step.of(first[p.key], m) for p, m in zip(order, minutes, strict=True)]
            if (result := evaluate(steps, curves)) is not None:
                found.append(result)
    if current_eval is not None and all(e.steps != current_eval.steps for e in found):
        found.append(current_eval)  # a current deadline off the whole minutes: still a choice
    found.sort(key=Evaluation.key)
    best = _rank(found, current_eval, top)
    return Recommendation(best, current_eval, note, tuple(refused.values()), len(found))


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
