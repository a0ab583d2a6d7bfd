"""core/labels.py: labels compare as GitHub matches them, a set with letter case ignored."""

from __future__ import annotations

import pytest

from runner_queue_fallback.core.labels import (
    as_list,
    canonical,
    has_label,
    label_set,
    same_labels,
    same_pool,
)


def test_order_and_case_do_not_make_other_labels():
    assert same_labels(["self-hosted", "Linux", "X64"], ["x64", "linux", "SELF-HOSTED"])
    assert not same_labels(["self-hosted", "linux"], ["self-hosted", "linux", "x64"])
    assert label_set("Linux") == frozenset({"linux"})


def test_one_string_is_one_label_never_split_at_commas():
    """GitHub reads `"a,b"` as one label named `a,b`, so the comparison does too."""
    assert label_set("self-hosted,linux") == frozenset({"self-hosted,linux"})
    assert not same_labels("self-hosted,linux", ["self-hosted", "linux"])


def test_canonical_text_is_the_same_for_any_order_or_case():
    assert canonical(["b", "A"]) == canonical(("a", "B")) == "a,b"


def test_a_label_is_found_in_any_case():
    assert has_label(["Self-Hosted", "gpu"], "self-hosted")
    assert not has_label(["self-hosted-x"], "self-hosted")


def test_as_list_keeps_what_was_written():
    assert as_list("linux-amd64-cpu16") == ["linux-amd64-cpu16"]
    assert as_list(("Linux", "X64")) == ["Linux", "X64"]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        # equal sets, in any order or case
        (("ci", ("self-hosted", "Linux")), ("ci", ("linux", "SELF-HOSTED")), True),
        # one set holds the other: the larger set's runners answer the smaller one too
        (("ci", ("linux-amd64-cpu32",)), ("ci", ("linux-amd64-cpu32", "self-hosted")), True),
        # labels that differ are other pools, even in one group
        (("ci", ("linux-amd64-cpu16",)), ("ci", ("linux-amd64-cpu8",)), False),
        # equal labels are the same pool whatever the group (the group rule comes after)
        (("a", ("gpu", "a6000")), ("b", ("a6000", "gpu")), True),
        # no labels: the same pool only when the group is
        (("ci", ()), ("ci", ()), True),
        (("ci", ()), ("other", ()), False),
        # a group alone and a group with labels are not the same candidate
        (("ci", ()), ("ci", ("gpu",)), False),
    ],
)
def test_the_repeated_pool_rule_reads_sets(a, b, same):
    assert same_pool(a[0], a[1], b[0], b[1]) is same
    assert same_pool(b[0], b[1], a[0], a[1]) is same
