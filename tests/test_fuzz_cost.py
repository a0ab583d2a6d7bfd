"""scripts/fuzz_cost.py, the tool that measures a fuzzed run: its shares, its 2-point check and
its other samples, each on a known case before its figures are believed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import core as hypothesis_core

from tests.script_files import load_file

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "fuzz_cost.py"


fuzz_cost = load_file(SCRIPT, "rqf_fuzz_cost")


def _digest() -> Callable[[object], bytes]:
    """The digest hypothesis seeds a derandomized test from, as `hypothesis.core` holds it now."""
    return hypothesis_core.function_digest  # type: ignore[attr-defined]  # not exported


def record(
    drawn: tuple[str, ...] | list[str] = (),
    fired: tuple[str, ...] | list[str] = (),
    reached: str = "queue",
    quota_phase: str | None = None,
    flags: tuple[str, ...] | list[str] = (),
) -> dict[str, object]:
    return {
        "drawn": list(drawn),
        "fired": list(fired),
        "reached": reached,
        "quota_phase": quota_phase,
        "flags": list(flags),
    }


def test_a_share_is_the_percentage_of_runs_that_drew_fired_or_reached_it():
    records = [
        record(drawn=["timeout"], fired=["timeout"], flags=["cancel"]),
        record(drawn=["timeout", "status"], reached="workload"),
        record(),
        record(quota_phase="search"),
    ]
    shares = fuzz_cost.shares(records)
    assert shares["drawn: timeout"] == 50.0
    assert shares["drawn: status"] == 25.0
    assert shares["fired: timeout"] == 25.0
    assert shares["fired: 0 kinds"] == 75.0
    assert shares["reached: queue"] == 75.0
    assert shares["reached: workload"] == 25.0
    assert shares["quota phase: None"] == 75.0
    assert shares["quota phase: search"] == 25.0
    assert shares["flag: cancel"] == 25.0


def _measurement(shares: dict[str, float]) -> dict[str, object]:
    name = "test_fuzz_coordinator.py"
    return {
        "exit": 0,
        "cpu_seconds": {name: 20.0},
        "runs": {name: 1000},
        "ms_per_run": {name: 20.0},
        "shares": shares,
    }


def test_a_share_that_moved_more_than_2_points_fails_the_comparison(capsys):
    before = _measurement({"reached: queue": 26.7, "drawn: timeout": 12.4})
    moved = _measurement({"reached: queue": 29.0, "drawn: timeout": 12.4})
    assert fuzz_cost.report(moved, before) == 1
    assert "reached: queue" in capsys.readouterr().out.split("MOVED")[0].splitlines()[-1]


def test_shares_within_2_points_pass_and_a_share_that_vanished_counts_as_moved(capsys):
    before = _measurement({"reached: queue": 26.7, "flag: cancel": 3.0})
    assert (
        fuzz_cost.report(_measurement({"reached: queue": 28.6, "flag: cancel": 1.1}), before) == 0
    )
    assert fuzz_cost.report(_measurement({"reached: queue": 26.7}), before) == 1
    capsys.readouterr()


def test_a_failed_fuzz_run_fails_the_measurement_whatever_its_shares():
    failed = _measurement({"reached: queue": 26.7}) | {"exit": 1}
    assert fuzz_cost.report(failed, _measurement({"reached: queue": 26.7})) == 1


@pytest.mark.parametrize("seed", [1, 2])
def test_another_seed_salts_the_digest_a_derandomized_test_is_seeded_from_and_then_restores_it(
    seed,
):
    """The CI profile ignores --hypothesis-seed: another sample needs another digest, one per
    seed, while each shard keeps its own (the digest still covers the node ID)."""

    def shard() -> None:
        """A stand-in test function."""

    real = _digest()
    plugin = fuzz_cost.Salted(seed)
    plugin.pytest_configure()
    try:
        salted = _digest()(shard)
        assert salted != real(shard)
        assert salted.startswith(real(shard))
        other = fuzz_cost.Salted(seed + 10)
        assert salted != real(shard) + f"seed {other.seed}".encode()
    finally:
        plugin.pytest_unconfigure()
    assert _digest() is real
