"""Shared fixtures: a clean environment, a fake clock, and a session that refuses to touch the network."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator

import pytest
import requests
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from runner_queue_fallback.core.clock import FakeClock

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Our own CI runs inside Actions: drop every variable the runner sets."""
    for key in list(os.environ):
        if key.startswith(("INPUT_", "GITHUB_", "RUNNER_", "STATE_")):
            monkeypatch.delenv(key, raising=False)


@pytest.fixture(autouse=True)
def _no_real_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """Invariant 6: nothing sleeps for real in a test; all waiting goes through a fake Clock."""

    real_sleep = time.sleep

    def refuse(seconds: float) -> None:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith(("runner_queue_fallback", "tests", "bench")) and seconds > 0:
            raise AssertionError(f"a real sleep of {seconds}s from {caller}: use the fake Clock")
        real_sleep(seconds)  # subprocess and thread libraries poll with tiny sleeps of their own

    monkeypatch.setattr(time, "sleep", refuse)


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


class NoNetworkAdapter(requests.adapters.BaseAdapter):
    """Fails the test if anything tries to send a request; counts attempts."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def send(self, request, *_args, **_kwargs):
        self.sent.append(f"{request.method} {request.url}")
        raise AssertionError(f"unexpected network request: {request.method} {request.url}")

    def close(self) -> None:
        """Nothing to close."""


@pytest.fixture
def no_network() -> Iterator[tuple[requests.Session, NoNetworkAdapter]]:
    adapter = NoNetworkAdapter()
    session = requests.Session()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    yield session, adapter
    session.close()


# Hypothesis profiles for the fuzz tests (tests/test_fuzz_*.py), picked by RQF_FUZZ_PROFILE:
#   ci       (default) derandomized: the same 2,000 coordinator runs and 2,000 input sets on
#            every run, so a CI failure reproduces locally with the same command; no database.
#   nightly  random, five times the examples, failures kept in .hypothesis/examples (gitignored)
#            and replayed first on the next run; a failure prints its seed (--hypothesis-seed=N)
#            and a @reproduce_failure blob. Run it as
#              RQF_FUZZ_PROFILE=nightly pytest -o faulthandler_timeout=0 tests/test_fuzz_*.py
settings.register_profile(
    "ci",
    max_examples=2000,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "nightly",
    max_examples=10_000,
    derandomize=False,
    database=DirectoryBasedExampleDatabase(".hypothesis/examples"),
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("RQF_FUZZ_PROFILE", "ci"))
