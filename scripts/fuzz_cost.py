"""What a fuzzed run costs (CPU milliseconds, one process) and the mix of faults and phases it reaches.

Usage: `.venv/bin/python scripts/fuzz_cost.py [--save FILE] [--compare FILE] [-k EXPR] [TEST_FILE ...]`
(default: both fuzz files). Runs pytest in this process (`-n 0`), times each fuzz test's call with
`time.process_time` (CPU time: a busy machine does not inflate it), divides by the runs the tests
recorded (`RQF_FUZZ_MIX`, see tests/test_fuzz_coordinator.py), and prints the share of coordinator
runs in which each fault kind was drawn and fired, each furthest phase and each flag. `--save`
keeps the figures as JSON; `--compare` prints a saved run's shares beside these and fails (exit 1)
when a share moved more than 2 percentage points.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
FUZZ_FILES = ("tests/test_fuzz_coordinator.py", "tests/test_fuzz_inputs.py")
#: How far a share may move between two measurements (percentage points).
TOLERANCE = 2.0


class CallTimer:
    """A pytest plugin: CPU seconds of each fuzz test's call phase, by file."""

    def __init__(self) -> None:
        """Nothing timed yet."""
        self.cpu: collections.Counter[str] = collections.Counter()
        self.examples: collections.Counter[str] = collections.Counter()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        """Time the call (fixtures' setup and teardown are not part of a run)."""
        module = getattr(item, "module", None)
        real = getattr(module, "read_coordinator_inputs", None)
        if real is not None:  # the inputs fuzz test records no mix: count its input sets
            module.read_coordinator_inputs = self._counted(item.path.name, real)
        start = time.process_time()
        try:
            return (yield)
        finally:
            if item.name.startswith("test_fuzz_"):
                self.cpu[item.path.name] += time.process_time() - start
            if real is not None:
                module.read_coordinator_inputs = real

    def _counted(self, name: str, real: Any) -> Any:
        """`real`, counting its calls as examples of `name`."""

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.examples[name] += 1
            return real(*args, **kwargs)

        return counted


def shares(records: list[dict[str, Any]]) -> dict[str, float]:
    """Percent of coordinator runs with each drawn fault, fired fault, phase and flag."""
    counts: collections.Counter[str] = collections.Counter()
    for record in records:
        counts.update(f"drawn: {kind}" for kind in record["drawn"])
        counts.update(f"fired: {kind}" for kind in record["fired"])
        counts[f"fired: {len(record['fired'])} kinds"] += 1
        counts[f"reached: {record['reached']}"] += 1
        counts[f"quota phase: {record['quota_phase']}"] += 1
        counts.update(f"flag: {flag}" for flag in record["flags"])
    total = max(1, len(records))
    return {key: 100.0 * count / total for key, count in sorted(counts.items())}


class Salted:
    """A pytest plugin: the CI profile's derandomized runs, from another seed.

    The CI profile seeds each test from its digest (its source and node ID), which
    `--hypothesis-seed` does not change; salting the digest gives each shard another sample of
    the same strategies and keeps the shards distinct from each other. Patched once pytest has
    loaded hypothesis' plugin (importing it earlier defeats pytest's assertion rewriting).
    """

    def __init__(self, seed: int) -> None:
        """Salt with `seed`."""
        self.seed = seed
        self.real: Any = None

    def pytest_configure(self) -> None:
        """Salt the digest hypothesis seeds a derandomized test from."""
        import hypothesis.core  # noqa: PLC0415  # after pytest's own imports

        self.real = real = hypothesis.core.function_digest
        salt = f"seed {self.seed}".encode()
        hypothesis.core.function_digest = lambda f: real(f) + salt

    def pytest_unconfigure(self) -> None:
        """Leave hypothesis as it was."""
        import hypothesis.core  # noqa: PLC0415  # as above

        hypothesis.core.function_digest = self.real


def measure(files: list[str], keyword: str | None, seed: int | None = None) -> dict[str, Any]:
    """Run the fuzz files once in this process; CPU per run and the mix."""
    with tempfile.TemporaryDirectory() as tmp:
        mix_file = Path(tmp) / "mix.jsonl"
        os.environ["RQF_FUZZ_MIX"] = str(mix_file)
        timer = CallTimer()
        args = ["-n", "0", "-p", "no:cacheprovider", "-q", "-o", "addopts=", *files]
        args += ["-k", keyword] if keyword else []
        sys.path.insert(0, str(ROOT))
        plugins: list[object] = [timer] if seed is None else [timer, Salted(seed)]
        code = pytest.main(args, plugins=plugins)
        lines = mix_file.read_text(encoding="utf-8").splitlines() if mix_file.exists() else []
    records = [json.loads(line) for line in lines]
    timer.examples["test_fuzz_coordinator.py"] = len(records)
    per_run = {
        name: 1000.0 * timer.cpu[name] / timer.examples[name]
        for name in timer.cpu
        if timer.examples[name]
    }
    return {
        "exit": int(code),
        "cpu_seconds": dict(timer.cpu),
        "runs": dict(timer.examples),
        "ms_per_run": per_run,
        "shares": shares(records),
    }


def report(now: dict[str, Any], before: dict[str, Any] | None) -> int:
    """Print the figures (beside `before`'s); 1 when a share moved past the tolerance."""
    for name, ms in sorted(now["ms_per_run"].items()):
        runs, cpu = now["runs"][name], now["cpu_seconds"][name]
        old = f" (before {before['ms_per_run'][name]:.1f})" if before else ""
        print(f"{name}: {runs} runs, {cpu:.1f} s CPU, {ms:.1f} ms per run{old}")
    keys = sorted(set(now["shares"]) | set((before or {}).get("shares", {})))
    moved = []
    for key in keys:
        share = now["shares"].get(key, 0.0)
        if before is None:
            print(f"  {key:40} {share:5.1f} %")
            continue
        old_share = before["shares"].get(key, 0.0)
        mark = "  MOVED" if abs(share - old_share) > TOLERANCE else ""
        moved += [key] if mark else []
        print(f"  {key:40} {old_share:5.1f} % -> {share:5.1f} % ({share - old_share:+.1f}){mark}")
    return 1 if moved or now["exit"] else 0


def main(argv: list[str] | None = None) -> int:
    """Measure, print, and keep or compare."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=list(FUZZ_FILES))
    parser.add_argument("--save", type=Path, help="keep the figures as JSON")
    parser.add_argument("--compare", type=Path, help="a saved measurement to compare with")
    parser.add_argument("-k", dest="keyword", help="pytest -k: a subset of the shards")
    parser.add_argument(
        "--seed", type=int, help="another sample: the CI profile's runs from another seed"
    )
    args = parser.parse_args(argv)
    now = measure(args.files, args.keyword, args.seed)
    if args.save:
        args.save.write_text(json.dumps(now, indent=1) + "\n", encoding="utf-8")
    before = json.loads(args.compare.read_text(encoding="utf-8")) if args.compare else None
    return report(now, before)


if __name__ == "__main__":
    sys.exit(main())
