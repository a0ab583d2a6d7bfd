"""The history's pools: a pool is its labels as a set, and what the history cannot measure.

Children are grouped by their job's labels as GitHub matches them (`core/labels.py`: a set, case
ignored), so a pool written in any order or case is one pool. History records a runner group only
for jobs that got a runner: the jobs of a group-only pool, and those of labels whose runners came
from several groups, cannot be told apart when they got none, so such a pool, and a candidate
naming a group the history did not see on its labels, are "not measurable from history", with
that reason, never merged into one curve. Pure.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from runner_queue_fallback.core import timing
from runner_queue_fallback.core.labels import Labels, canonical, label_names
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.tools.stats.history import Child
from runner_queue_fallback.tools.stats.survival import Survival, kaplan_meier

__all__ = [
    "GROUP_ONLY",
    "MIN_ALLOCATIONS",
    "MIN_CHILDREN",
    "NOT_MEASURABLE",
    "LabelledPool",
    "PoolData",
    "candidate_text",
    "labels_text",
    "pool_data",
    "pool_unmeasurable",
    "unmeasurable",
]

#: The issue's floor: no recommendation rests on a pool with fewer children or allocations.
MIN_CHILDREN = 30
MIN_ALLOCATIONS = 10
#: Quantiles of a pool's waits offered as deadlines.
DEADLINE_QUANTILES = (0.5, 0.75, 0.9, 0.95)

#: How every refusal for want of a group in history begins.
NOT_MEASURABLE = "not measurable from history"
_GROUP_KNOWN = "history records a runner group only for jobs that got a runner"
#: Why a candidate without labels has no measured waits.
GROUP_ONLY = (
    f"{NOT_MEASURABLE}: a group-only candidate; {_GROUP_KNOWN}, so its children that got none "
    "cannot be told from other pools'"
)


def labels_text(labels: Labels) -> str:
    """Labels for a person to read, comma-joined as written; `(no labels)` when there are none."""
    return ",".join(label_names(labels)) or "(no labels)"


def candidate_text(group: str, labels: Labels) -> str:
    """A candidate for a person to read: its labels, or its group when it has none."""
    return labels_text(labels) if label_names(labels) else f"group {group} (no labels)"


class LabelledPool:
    """A pool known by its labels: a key that ignores their order and case, a text as written."""

    labels: Labels

    @property
    def key(self) -> str:
        """The pool's labels as a set (`core/labels.py: canonical`)."""
        return canonical(self.labels)

    @property
    def text(self) -> str:
        """The labels for a person to read."""
        return labels_text(self.labels)


@dataclass(frozen=True)
class PoolData(LabelledPool):
    """One pool's measurements: its curve and how many children and runners it rests on.

    `group`: the one runner group its runners came from ("" when none is known); `unmeasurable`:
    why no figure may rest on it at all (several groups, or no labels), else None.
    """

    group: str
    labels: Labels
    curve: Survival
    children: int
    allocated: int
    unmeasurable: str | None = None

    def refusal(self) -> str | None:
        """Why no recommendation may rest on this pool, or None."""
        if self.unmeasurable is not None:
            return self.unmeasurable
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


def pool_unmeasurable(labels: Labels, groups: Sequence[str]) -> str | None:
    """Why a pool of the history cannot be measured, or None.

    `groups`: the runner groups whose runners took its jobs. Jobs with no labels went to a group
    alone; labels served by several groups are several pools: in both, the jobs that got no runner
    (no group recorded) cannot be told apart, and one curve of them all would merge pools.
    """
    if not label_names(labels):
        return (
            f"{NOT_MEASURABLE}: jobs with no labels, sent to a runner group alone; {_GROUP_KNOWN}, "
            "so those that got none cannot be told apart by group"
        )
    if len(groups) > 1:
        return (
            f"{NOT_MEASURABLE}: runners of {len(groups)} groups ({', '.join(groups)}) took jobs "
            f"with these labels, and {_GROUP_KNOWN}, so the waits of those that got none cannot "
            "be told apart"
        )
    return None


def unmeasurable(candidate: Candidate, seen_group: str) -> str | None:
    """Why the history cannot measure `candidate` whatever its data, or None.

    `seen_group`: the one group whose runners took the jobs of the candidate's labels ("" when
    none is known). A group-only candidate is never measurable; a candidate naming another group
    than the history saw is another pool.
    """
    if candidate.hosted:
        return None
    if not label_names(candidate.labels):
        return GROUP_ONLY
    if candidate.group and seen_group and candidate.group != seen_group:
        return (
            f"{NOT_MEASURABLE}: jobs with these labels got runners of group {seen_group}, not "
            f"{candidate.group}; {_GROUP_KNOWN}, so it holds no waits of group {candidate.group}"
        )
    return None


def pool_data(children: Sequence[Child]) -> dict[str, PoolData]:
    """Per pool (its label set, `Child.pool`): the Kaplan-Meier curve of its waits, its counts.

    A pool is shown with its labels as most of its jobs listed them; its group is the one group
    whose runners took its jobs ("" when none or several: `pool_unmeasurable` then says why).
    """
    by_pool: dict[str, list[Child]] = {}
    for child in children:
        if child.wait is not None:
            by_pool.setdefault(child.pool, []).append(child)
    found = {}
    for key, members in sorted(by_pool.items()):
        labels = Counter(c.labels for c in members).most_common(1)[0][0]
        groups = sorted({c.group for c in members if c.group})
        found[key] = PoolData(
            group=groups[0] if len(groups) == 1 else "",
            labels=labels,
            curve=kaplan_meier(c.wait for c in members if c.wait is not None),
            children=len(members),
            allocated=sum(1 for c in members if c.wait is not None and c.wait.event),
            unmeasurable=pool_unmeasurable(labels, groups),
        )
    return found
