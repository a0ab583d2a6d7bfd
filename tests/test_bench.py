"""The bench runs (quick mode) and its figures agree with each other. No timed assertions."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.baseline import OriginalCoordinator
from bench.harness import VARIANTS
from bench.metrics import ENDPOINTS, PHASES
from bench.report import FIGURES
from bench.run import main
from runner_queue_fallback.coordinator import Coordinator

SCENARIOS = ("queued", "executing", "fallback", "deadlines")


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    out = tmp_path_factory.mktemp("bench") / "bench.json"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["--quick", "--out", str(out)])
    assert code == 0
    return json.loads(Path(out).read_text(encoding="utf-8")), printed.getvalue()


def usages(results: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    found: list[tuple[str, str, dict[str, Any]]] = []
    for variant in VARIANTS:
        data = results["variants"][variant]
        found.extend((variant, name, data["scenarios"][name]) for name in SCENARIOS)
        if data["mix_at_max"] is not None:
            found.append((variant, "mix", data["mix_at_max"]))
    return found


def test_quick_bench_prints_a_table_and_writes_json(bench):
    results, printed = bench
    assert results["settings"]["quick"] is True
    assert set(results["variants"]) == set(VARIANTS)
    for heading in ("1. API requests", "2. Deadline precision", "3. Concurrency", "4. Cost"):
        assert heading in printed
    assert "ours/base" in printed
    assert "Targets (ours):" in printed


def test_the_older_contract_reports_its_extra_counted_requests(bench):
    """Issue 19: the fallback sequence on an older server succeeds and costs a few requests more."""
    results, printed = bench
    older = results["older_contract"]
    assert older["success"] is True
    extra = older["extra_counted_per_sequence"]
    assert extra == older["counted_2022_11_28"] - older["counted_2026_03_10"]
    # One refused first request, then a first search per candidate; later searches are 304s.
    assert 1 <= extra <= 1 + 2 * older["candidates"], older
    assert f"{extra:+d} per sequence" in printed


def test_sent_is_counted_plus_304s_plus_rate_limited(bench):
    results, _ = bench
    for variant, name, usage in usages(results):
        where = f"{variant}/{name}"
        assert usage["sent"] == usage["counted"] + usage["not_modified"] + usage["rate_limited"], (
            where
        )
        # what the fake saw is what the coordinators' clients say they sent
        assert usage["client_sent"] == usage["sent"], where
        assert usage["client_not_modified"] == usage["not_modified"], where
        if name != "mix":
            assert usage["rate_limited"] == 0, where
        if variant != "ours":
            assert usage["not_modified"] == 0, f"{where}: no conditional requests, no 304s"


def test_phase_and_endpoint_breakdowns_add_up_to_the_totals(bench):
    results, _ = bench
    for variant, name, usage in usages(results):
        for breakdown, keys in (("by_phase", PHASES), ("by_endpoint", ENDPOINTS)):
            assert set(usage[breakdown]) == set(keys)
            for field in ("sent", "counted", "not_modified"):
                total = sum(bucket[field] for bucket in usage[breakdown].values())
                expected = usage[field] if field != "sent" else usage["sent"]
                assert total == expected, f"{variant}/{name} {breakdown} {field}"
        assert usage["queued"]["counted"] == usage["by_phase"][PHASES[2]]["counted"]
        assert usage["executing"]["counted"] == usage["by_phase"][PHASES[4]]["counted"]


def test_per_hour_figures_are_totals_over_durations(bench):
    results, _ = bench
    for variant, name, usage in usages(results):
        where = f"{variant}/{name}"
        assert usage["counted_per_hour"] == pytest.approx(
            usage["counted"] * 3600 / usage["seconds"]
        ), where
        for phase in ("queued", "executing"):
            part = usage[phase]
            if part["seconds"] > 0:
                assert part["counted_per_hour"] == pytest.approx(
                    part["counted"] * 3600 / part["seconds"]
                ), f"{where} {phase}"
            else:
                assert part["counted_per_hour"] is None
    queued = results["variants"]["ours"]["scenarios"]["queued"]["queued"]
    assert queued["seconds"] == pytest.approx(results["settings"]["queued_minutes"] * 60, abs=5)


def test_baseline_polls_about_four_reads_a_minute_while_queued(bench):
    results, _ = bench
    for variant in ("baseline", "ours-no-etag", "ours"):
        queued = results["variants"][variant]["scenarios"]["queued"]["queued"]
        assert 3.5 <= queued["sent_per_minute"] <= 5.0, variant
    baseline = results["variants"]["baseline"]["scenarios"]["queued"]
    assert baseline["queued"]["counted"] == baseline["queued"]["sent"], "all of them count"
    for endpoint in ("child run", "child jobs", "source ref", "parent run"):
        assert baseline["by_endpoint"][endpoint]["sent"] >= results["settings"]["queued_minutes"]


def test_ratios_are_computed_from_the_same_numbers(bench):
    results, _ = bench
    variants = results["variants"]
    for name, figure in FIGURES.items():
        base = figure(variants["baseline"])
        for variant in ("ours", "ours-no-etag"):
            value = figure(variants[variant])
            ratio = results["ratios"][name][variant]
            if value is None or not base:
                assert ratio is None, name
            else:
                assert ratio == pytest.approx(value / base), name


def test_deadline_precision_comes_from_the_queue_timeouts(bench):
    results, _ = bench
    for variant in VARIANTS:
        deadline = results["variants"][variant]["deadline"]
        late = deadline["cancel_after_deadline_s"]
        # the queued scenario times out once, the fallback scenario twice, and every pool of
        # the deadlines scenario once
        expected = 3 + len(results["settings"]["deadline_minutes"])
        assert late["count"] == expected, variant
        assert late["count"] == len(late["values"])
        assert all(value >= 0 for value in late["values"]), variant
        assert late["max"] == pytest.approx(max(late["values"]), abs=1e-3)
        assert deadline["cancel_to_confirmed_s"]["count"] == late["count"]
        assert deadline["confirmed_to_next_dispatch_s"]["count"] >= 2


def test_concurrency_search_brackets_its_answer(bench):
    results, _ = bench
    for variant in VARIANTS:
        concurrency = results["variants"][variant]["concurrency"]
        tried = {trial["n"]: trial for trial in concurrency["tried"]}
        best = concurrency["max_coordinators"]
        if best:
            assert tried[best]["ok"], variant
            assert tried[best]["rate_limited_replies"] == 0
            assert tried[best]["peak_window_counted"] <= results["settings"]["quota"]
        if not concurrency["capped"]:
            first = concurrency["first_failing"]
            assert best < first <= best + max(1, best // 20), variant  # bisected to 5 %
            assert not tried[first]["ok"]
        for past in concurrency["past_limit"]:
            assert past["ended_well"] + past["failed"] == past["coordinators"]
            assert past["recovered_after_rate_limit"] <= past["coordinators_rate_limited"]
            assert past["peak_window_counted"] <= results["settings"]["quota"]


def test_cpu_and_cold_start_are_measured(bench):
    results, _ = bench
    for variant in VARIANTS:
        cpu = results["variants"][variant]["cpu"]
        assert cpu["single_runs_cpu_s"] >= cpu["single_runs_fake_cpu_s"] >= 0
        assert cpu["per_coordinator_hour_s"] == pytest.approx(
            cpu["single_runs_cpu_s"] / cpu["single_runs_coordinator_hours"]
        )
    cli = results["cold_start"]["cli"]
    assert cli["median_s"] > 0
    assert math.isfinite(cli["median_s"])
    container = results["cold_start"]["container"]
    assert "skipped" in container or container["median_s"] > 0


def test_the_baseline_is_our_coordinator_with_only_the_polling_policy_swapped():
    # Everything but the queue and execution waits is inherited, so it cannot drift from ours.
    overridden = {name for name in vars(OriginalCoordinator) if not name.startswith("__")}
    assert overridden == {"_minute_poll", "_wait_in_queue", "_wait_for_result"}
    assert issubclass(OriginalCoordinator, Coordinator)


def test_the_baseline_notices_a_deadline_at_the_next_minute_poll(bench):
    results, _ = bench
    late = results["variants"]["baseline"]["deadline"]["cancel_after_deadline_s"]["values"]
    # at most a minute (the next poll) plus its four reads and the fresh read
    assert all(0 <= value <= 60 + 5 * 0.25 + 1 for value in late)
    assert max(late) > 5, "the original does not aim a poll at the deadline"
