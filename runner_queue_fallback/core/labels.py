"""Runner labels as GitHub matches them: a set, letter case ignored.

`runs-on` gives a job to a runner that carries every label asked for, whatever their order or case
(`Linux` and `linux` are one label). Every command compares labels through this module, so that
no two of them can disagree on whether two candidates, a pool in history and a pool in `runners`,
or an expectation and a result, are the same.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "Labels",
    "as_list",
    "canonical",
    "has_label",
    "label_names",
    "label_set",
    "same_labels",
    "same_pool",
]

#: Labels as a candidate writes them: one string, or a sequence of strings (empty: none given).
Labels = str | tuple[str, ...]


def label_names(labels: Labels | Iterable[str]) -> tuple[str, ...]:
    """The labels as written, one string or many, in their order."""
    return (labels,) if isinstance(labels, str) else tuple(labels)


def label_set(labels: Labels | Iterable[str]) -> frozenset[str]:
    """The labels as GitHub compares them: a set of case-folded names."""
    return frozenset(name.casefold() for name in label_names(labels))


def same_labels(a: Labels | Iterable[str], b: Labels | Iterable[str]) -> bool:
    """Whether two label lists ask for the same runners (order and case ignored)."""
    return label_set(a) == label_set(b)


def has_label(labels: Labels | Iterable[str], name: str) -> bool:
    """Whether `name` is among `labels`, in any letter case."""
    return name.casefold() in label_set(labels)


def canonical(labels: Labels | Iterable[str]) -> str:
    """One stable text for a label set (sorted, case-folded, comma-joined): a key, never a label."""
    return ",".join(sorted(label_set(labels)))


def as_list(labels: Labels | Iterable[str]) -> list[str]:
    """The labels as a JSON list, as written: what a user pastes back into `runners`."""
    return list(label_names(labels))


def same_pool(group_a: str, labels_a: Labels, group_b: str, labels_b: Labels) -> bool:
    """Whether two candidates ask for the same pool, as the repeated-pool rule reads it.

    Non-empty label sets are the same pool when they are equal or one holds the other: a runner
    that carries the larger set also answers the smaller one, so an extra label (such as
    `self-hosted`) cannot hide a repeat. Candidates without labels are the same pool when their
    groups are.
    """
    a, b = label_set(labels_a), label_set(labels_b)
    if a and b:
        return a <= b or b <= a
    return not a and not b and group_a == group_b
