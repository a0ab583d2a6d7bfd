"""The benchmark: ours (ETags that hold, ETags that change on every read) against the original's polling.

Long (the bench's one command line) because its four measurements and the load sweep's options
are parsed, run and printed from one place.

    .venv/bin/python -m bench            # full run (a few minutes), table on stdout, JSON in bench/results/
    .venv/bin/python -m bench --quick    # seconds: short horizons, small N, a 100-request quota
    .venv/bin/python -m bench --load-sweep [--quick] [--quota N]   # fixed loads, run as jobs
                                                              # (bench/sweep.py)

Four measurements, each for (a) ours, (b) ours in a world whose ETags change on every read (no
304s: a world setting of the fake, not a coordinator variant), (c) the baseline:
1. counted API requests per coordinator-hour while queued, while executing and over a fallback
   sequence (plus totals, requests sent and 304s);
2. deadline precision: queue deadline -> cancel, cancel -> confirmation -> next dispatch;
3. concurrency: the most coordinators one repository's quota carries with a realistic mix and no
   rate-limit reply, and what happens past that number;
4. cost: CPU seconds per simulated coordinator-hour, CLI cold start (`--help` of the root,
   `coordinate` and `guard`) and the container's.

All API figures are virtual time on the fake GitHub; CPU and cold start are real time.
The coordinators run in bench/harness.py (the baseline: bench/baseline.py), their figures are
computed in bench/metrics.py, and the ratios, targets and printed table are in bench/table.py.

The settings and the coordinators each measurement runs are in bench/mix.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import VARIANTS, Trial, Variant, simulate
from bench.metrics import peak_window, precision, summarize_past_limit, usage
from bench.mix import Settings, mix_specs, single_specs
from bench.table import ratio, ratios, render, targets
from runner_queue_fallback.fake_github.world import API_VERSIONS, OLDER_SERVER

__all__ = ["Settings", "main", "run_bench"]

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "bench.json"


def search(
    variant: Variant, settings: Settings, log: Callable[[str], None]
) -> tuple[dict[str, Any], Trial | None, list[Trial]]:
    """Largest N with no rate-limit reply and every coordinator ending well; then past it."""
    trials: dict[int, Trial] = {}

    def passes(count: int) -> bool:
        if count in trials:
            return _ok(trials[count])
        trial = simulate(
            variant, mix_specs(count, settings), quota=settings.quota, latency=settings.latency
        )
        trials[count] = trial
        ok = _ok(trial)
        log(
            f"  {variant:13} N={count:4d}: {'ok' if ok else 'LIMITED'} "
            f"(peak {peak_window(trial)}/{settings.quota} in a window, "
            f"{trial.rate_limited} rate-limit replies, cpu {trial.cpu_seconds:.1f}s)"
        )
        return ok

    best, first_fail = 0, None
    for count in settings.ladder:
        if count > settings.max_n:
            break
        if not passes(count):
            first_fail = count
            break
        best = count
    if first_fail is not None:
        low, high = best, first_fail
        while high - low > max(1, low // 20):  # to within 5 %: each trial near N=100 costs a minute
            middle = (low + high) // 2
            low, high = (middle, high) if passes(middle) else (low, middle)
        best, first_fail = low, high
    past: list[tuple[int, Trial]] = []
    if first_fail is not None:
        past.append((first_fail, trials[first_fail]))
        double = max(2 * best, first_fail + 1)
        if double <= settings.max_n and double != first_fail:
            passes(double)
            past.append((double, trials[double]))
    summary = _search_summary(trials, best, first_fail, past)
    return summary, trials.get(best), [trial for _, trial in past]


def _search_summary(
    trials: dict[int, Trial], best: int, first_fail: int | None, past: list[tuple[int, Trial]]
) -> dict[str, Any]:
    """Every N tried, the answer, and what happened past it."""
    return {
        "max_coordinators": best,
        "capped": first_fail is None,
        "first_failing": first_fail,
        "tried": [
            {
                "n": count,
                "ok": _ok(trial),
                "rate_limited_replies": trial.rate_limited,
                "ended_well": sum(1 for r in trial.records if r.success),
                "peak_window_counted": peak_window(trial),
                "counted": trial.totals.counted,
                "cpu_seconds": trial.cpu_seconds,
            }
            for count, trial in sorted(trials.items())
        ],
        "past_limit": [{"n": n} | summarize_past_limit(trial) for n, trial in past],
    }


def _cpu(singles: Sequence[Trial], mix: Trial | None) -> dict[str, Any]:
    """CPU per simulated coordinator-hour over the single-coordinator runs, and the fake's share."""
    total = sum(t.cpu_seconds for t in singles)
    fake = sum(t.fake_cpu_seconds for t in singles)
    hours = sum(t.coordinator_hours for t in singles)
    return {
        "single_runs_cpu_s": total,
        "single_runs_fake_cpu_s": fake,
        "single_runs_coordinator_hours": hours,
        "per_coordinator_hour_s": ratio(total, hours),
        "per_coordinator_hour_without_fake_s": ratio(total - fake, hours),
        # many threads on one VirtualClock: thread hand-offs dominate, so not a coordinator cost
        "mix_per_coordinator_hour_s": None
        if mix is None
        else ratio(mix.cpu_seconds, mix.coordinator_hours),
    }


def _ok(trial: Trial) -> bool:
    return trial.rate_limited == 0 and all(r.success for r in trial.records)


# -- cold start -------------------------------------------------------------------------------


#: The action's entry points whose `--help` the bench starts cold, besides the root's own.
COLD_COMMANDS = ("coordinate", "guard")


def cli_cold_start(runs: int) -> dict[str, Any]:
    """Median wall time of `python -m runner_queue_fallback [COMMAND] --help` (warm-up discarded).

    The root's `--help` and the action's entry points (`coordinate`, `guard`): each loads only
    what it uses, so these measure the interpreter and the composition root. Byte-code is written
    and reused, as in the image, which ships it (PYTHONDONTWRITEBYTECODE would recompile our
    modules at every start).
    """
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, "-m", "runner_queue_fallback", "--help"]
    floor = [sys.executable, "-c", "pass"]
    commands = {}
    for name in COLD_COMMANDS:
        argv = [*command[:-1], name, "--help"]
        commands[f"{name} --help"] = {
            "command": " ".join(["python", *argv[1:]]),
            "median_s": _median_wall(argv, runs, environ),
        }
    return {
        "command": " ".join(["python", *command[1:]]),
        "runs": runs,
        "median_s": _median_wall(command, runs, environ),
        "python_floor_median_s": _median_wall(floor, runs, environ),
        "commands": commands,
    }


def container_cold_start(runs: int) -> dict[str, Any]:
    """Median of `docker run --rm <image> --help` if a local image exists; else why not."""
    docker = shutil.which("docker")
    if docker is None:
        return {"skipped": "no docker client on PATH"}
    for image in ("runner-queue-fallback:smoke", "runner-queue-fallback:latest"):
        probe = subprocess.run(  # noqa: S603  # fixed arguments
            [docker, "image", "inspect", image], capture_output=True, text=True, check=False
        )
        if probe.returncode == 0:
            return {
                "image": image,
                "runs": runs,
                "median_s": _median_wall([docker, "run", "--rm", image, "--help"], runs),
            }
        reason = (probe.stderr.strip().splitlines() or ["image not found"])[0]
    return {"skipped": f"no local image runner-queue-fallback:smoke ({reason})"}


def _median_wall(
    command: Sequence[str], runs: int, environ: Mapping[str, str] | None = None
) -> float:
    # The first run warms the page cache (and writes byte-code when `environ` allows it).
    subprocess.run(command, capture_output=True, check=True, env=environ)  # noqa: S603
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True, env=environ)  # noqa: S603
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- the whole bench --------------------------------------------------------------------------


def run_bench(settings: Settings, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every measurement; return the results as plain JSON-able data."""
    singles: dict[str, dict[str, Trial]] = {}
    for name, spec in single_specs(settings).items():
        singles[name] = {
            v: simulate(v, [spec], quota=settings.quota, latency=settings.latency) for v in VARIANTS
        }
    log("concurrency search (realistic mix; every coordinator must end well, no 403/429):")
    concurrency: dict[str, dict[str, Any]] = {}
    best: dict[str, Trial | None] = {}
    for variant in VARIANTS:
        concurrency[variant], best[variant], _ = search(variant, settings, log)
    variants: dict[str, dict[str, Any]] = {}
    for variant in VARIANTS:
        records = {name: trials[variant].records for name, trials in singles.items()}
        mix = best[variant]
        deadline_records = records["queued"] + records["fallback"] + records["deadlines"]
        variants[variant] = {
            "scenarios": {name: usage(recs).as_dict() for name, recs in records.items()},
            "mix_at_max": None if mix is None else usage(mix.records).as_dict(),
            "deadline": precision(deadline_records).as_dict(),
            "deadline_mix_at_max": None if mix is None else precision(mix.records).as_dict(),
            "concurrency": concurrency[variant],
            "cpu": _cpu([trials[variant] for trials in singles.values()], mix),
            "outcomes": {
                name: [
                    {"success": r.success, "error_type": r.error_type, "error": r.error}
                    for r in recs
                ]
                for name, recs in records.items()
            },
        }
    results: dict[str, Any] = {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "settings": settings.__dict__ | {"ladder": list(settings.ladder)},
        "variants": variants,
        "cold_start": {
            "cli": cli_cold_start(settings.cold_runs),
            "container": container_cold_start(settings.cold_runs),
        },
    }
    results["older_contract"] = older_contract(settings)
    results["ratios"] = ratios(results)
    results["targets"] = targets(results)
    return results


def older_contract(settings: Settings) -> dict[str, Any]:
    """The fallback sequence (ours) on an older server: the counted requests it adds.

    `api-version: auto` meets a server without 2026-03-10: one refused first request, then each
    dispatch answers 204 and its run is found by run-name (searches answered 304 cost nothing).
    """
    spec = single_specs(settings)["fallback"]
    newer, older = (
        simulate("ours", [spec], quota=settings.quota, latency=settings.latency, api_versions=v)
        for v in (API_VERSIONS, OLDER_SERVER)
    )
    extra = older.totals.counted - newer.totals.counted
    return {
        "candidates": len(spec.pools),
        "counted_2026_03_10": newer.totals.counted,
        "counted_2022_11_28": older.totals.counted,
        "extra_counted_per_sequence": extra,
        "success": all(r.success for r in (*newer.records, *older.records)),
    }


# -- command line -----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the bench, print the table, write the JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short horizons, small N (seconds)")
    parser.add_argument("--out", type=Path, default=None, help=f"JSON path ({DEFAULT_OUT})")
    parser.add_argument("--latency", type=float, default=0.25, help="virtual seconds per reply")
    parser.add_argument("--max-n", type=int, default=None, help="largest N the search may try")
    parser.add_argument(
        "--load-sweep",
        action="store_true",
        help="the load sweep instead (bench/sweep.py; JSON in bench/results/sweep.json)",
    )
    sweep = parser.add_argument_group("load sweep (with --load-sweep only)")
    sweep.add_argument(
        "--quota",
        type=_positive,
        default=None,
        help="requests an hour of the repository's quota; the loads scale with it (250: 22-66)",
    )
    sweep.add_argument(
        "--coordinator-quota",
        type=_positive,
        default=None,
        help="the coordinators on a GitHub App installation's bucket of N an hour; --quota stays "
        "the repository's, which the guards spend",
    )
    sweep.add_argument("--lanes", type=_lanes, default=None, help="loads of ours, e.g. 44,66")
    sweep.add_argument(
        "--baseline-lanes", type=_lanes, default=None, help="loads of the baseline ('' for none)"
    )
    sweep.add_argument(
        "--etags", choices=("both", "stable", "every-read"), default="both", help="ETag worlds"
    )
    sweep.add_argument(
        "--no-guards",
        action="store_true",
        help="children pass their guard step without a request (no guard reads charged)",
    )
    sweep.add_argument(
        "--guard-wait",
        type=_minutes,
        default=None,
        metavar="MINUTES",
        help="the guards' guard-quota-wait-minutes (default: the input's, 10; 0: fail closed)",
    )
    sweep.add_argument(
        "--admission-minutes",
        type=_minutes,
        default=None,
        metavar="MINUTES",
        help="the coordinators' admission-timeout-minutes (default: the input's, 60)",
    )
    args = parser.parse_args(argv)
    if args.load_sweep:
        return _load_sweep(args)
    sweeps = ("quota", "coordinator_quota", "lanes", "baseline_lanes")
    given = [a for a in sweeps if getattr(args, a) is not None]
    waits = (args.guard_wait, args.admission_minutes)
    if given or args.etags != "both" or args.no_guards or waits != (None, None):
        parser.error(
            "--quota, --coordinator-quota, --lanes, --baseline-lanes, --etags, --no-guards, "
            "--guard-wait and --admission-minutes need --load-sweep"
        )
    settings = Settings.make(quick=args.quick, latency=args.latency, max_n=args.max_n)
    results = run_bench(settings, log=lambda line: print(line, flush=True))
    print()
    print(render(results))
    out: Path = args.out or DEFAULT_OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"\nJSON: {out}")
    return 0


def _load_sweep(args: argparse.Namespace) -> int:
    """`--load-sweep`: the realistic mix at fixed loads, as jobs (bench/sweep.py)."""
    from bench import sweep  # noqa: PLC0415 (sweep builds on this module: a cycle)

    settings = sweep.SweepSettings.make(quick=args.quick, latency=args.latency, quota=args.quota)
    if args.lanes is not None:
        settings = replace(settings, ours=args.lanes)
    if args.baseline_lanes is not None:
        settings = replace(settings, baseline=args.baseline_lanes)
    if args.etags != "both":
        settings = replace(settings, etag_worlds=(args.etags,))
    if args.no_guards:
        settings = replace(settings, guards=False)
    if args.coordinator_quota is not None:
        settings = replace(settings, coordinator_quota=args.coordinator_quota)
    if args.guard_wait is not None:
        settings = replace(settings, guard_wait=args.guard_wait)
    if args.admission_minutes is not None:
        settings = replace(
            settings, mix=replace(settings.mix, admission_minutes=args.admission_minutes)
        )
    print("load sweep (realistic mix at fixed loads; every coordinator run as a job):", flush=True)
    results = sweep.run_sweep(settings, log=lambda line: print(line, flush=True))
    print()
    print(sweep.render_sweep(results))
    out: Path = args.out or sweep.DEFAULT_SWEEP_OUT
    sweep.write_sweep(results, out)
    print(f"\nJSON: {out}")
    return 0


def _positive(text: str) -> int:
    """A whole number above 0 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0, got {text!r}")
    return value


def _minutes(text: str) -> int:
    """A whole number of minutes, 0 or more (argparse type)."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"expected a whole number of minutes, got {text!r}")
    return int(text)


def _lanes(text: str) -> tuple[int, ...]:
    """A comma-separated list of loads (argparse type); empty: none."""
    return tuple(_positive(part.strip()) for part in text.split(",") if part.strip())
