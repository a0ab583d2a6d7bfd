"""Kaplan-Meier: hand-computed values, scipy's estimator, and the truth of a generated history."""

from __future__ import annotations

import math
import random

import pytest

from runner_queue_fallback.fake_github.history import Exponential, LogNormal
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.tools.stats.history import Ending, read_history
from runner_queue_fallback.tools.stats.report import pool_data
from runner_queue_fallback.tools.stats.survival import Observation, Survival, kaplan_meier
from tests.stats_support import CPU8, CPU16, history_world, slow_first_spec

#: Stated tolerance: |KM - true CDF| at 1, 2, 5 and 10 minutes, with >= 150 children a pool.
KM_TOLERANCE = 0.06


def obs(*pairs: tuple[float, bool]) -> list[Observation]:
    return [Observation(t, event=e) for t, e in pairs]


def test_hand_computed_curve():
    """Events at 1, 3, 3, 6; censored at 2 and 5 (and 3, which stays at risk at 3)."""
    curve = kaplan_meier(
        obs((1, True), (2, False), (3, True), (3, True), (3, False), (5, False), (6, True))
    )
    # n=7: t=1 S=6/7; t=3 at risk 5 (2 left), 2 events: S=6/7*3/5; t=6 at risk 1: S=0
    assert curve.times == (1, 3, 6)
    assert curve.survival == pytest.approx((6 / 7, 6 / 7 * 3 / 5, 0.0))
    assert curve.within(0.5) == 0.0
    assert curve.within(2) == pytest.approx(1 / 7)
    assert curve.quantile(0.4) == 3
    assert curve.quantile(0.5) == 6  # F(3) = 1 - 18/35 < 0.5
    assert (curve.observations, curve.events, curve.horizon) == (7, 4, 6)


def test_censoring_hides_what_lies_beyond_the_last_observation():
    curve = kaplan_meier(obs((60, True), (600, False), (600, False)))
    assert curve.within(599) == pytest.approx(1 / 3)
    assert curve.within(601) is None  # nobody was watched that long
    assert curve.quantile(0.5) is None  # the median is not reached
    assert curve.mean_up_to(600) == pytest.approx(60 + 540 * 2 / 3)


def test_sampling_puts_unseen_mass_at_infinity():
    curve = kaplan_meier(obs((10, True), (20, False)))
    draws = [curve.sample(random.Random(seed)) for seed in range(400)]
    assert set(draws) == {10, math.inf}
    assert 0.4 < draws.count(10) / len(draws) < 0.6


def test_json_round_trip():
    curve = kaplan_meier(obs((5, True), (7, False), (9, True)))
    assert Survival.from_json(curve.as_json()) == curve


def test_matches_scipy_ecdf():
    """The estimator agrees with scipy's Kaplan-Meier on a large censored sample."""
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(3)
    waits = [rng.expovariate(1 / 300) for _ in range(500)]
    deadlines = [rng.choice((120, 300, 600)) for _ in waits]
    data = [Observation(min(w, d), event=w <= d) for w, d in zip(waits, deadlines, strict=True)]
    ours = kaplan_meier(data)
    theirs = stats.ecdf(
        stats.CensoredData(
            uncensored=[o.seconds for o in data if o.event],
            right=[o.seconds for o in data if not o.event],
        )
    )
    for t in (30, 60, 120, 200, 300, 450, 590):
        assert ours.within(t) == pytest.approx(float(theirs.cdf.evaluate(t)), abs=1e-9)


def test_km_matches_the_generated_truth_and_dropping_timeouts_is_biased():
    """Heavy censoring (cpu16: 60% cancelled at 10 min): KM within tolerance, naive far off."""
    spec = slow_first_spec(sequences=500)
    world, clock = history_world(spec)
    client = GitHubClient(world.session(), world.api_url, world.repository, "t", clock)
    history = read_history(
        client,
        "runner-worker.yml",
        since=clock.now().replace(month=10),
        now=clock.now(),
        max_runs=1000,
    )
    pools = pool_data(history.children)
    truth: dict[str, Exponential | LogNormal] = {
        CPU16: Exponential(mean=1200.0),
        CPU8: LogNormal(median=60.0, sigma=0.8),
    }
    slow = [c for c in history.children if c.pool == CPU16]
    censored = sum(1 for c in slow if c.ending is Ending.TIMED_OUT) / len(slow)
    assert censored > 0.5
    for labels, dist in truth.items():
        assert pools[labels].children >= 150
        for minutes in (1, 2, 5, 10):
            km = pools[labels].curve.within(minutes * 60.0 - 1)
            assert km is not None
            assert abs(km - dist.cdf(minutes * 60.0 - 1)) < KM_TOLERANCE, (labels, minutes)
    naive = kaplan_meier(c.wait for c in slow if c.wait is not None and c.wait.event)
    seen = naive.within(5 * 60.0 - 1)
    assert seen is not None
    bias = seen - truth[CPU16].cdf(5 * 60.0 - 1)
    assert bias > 0.25  # dropping the timed-out children makes cpu16 look twice as fast
