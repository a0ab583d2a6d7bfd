"""The `stats` command: flags, the plan shown before reading, the reading, the output.

Every flag is checked before the first request: a bad one prints a message naming it and its
allowed values and exits 2. The window is measured on the injected Clock. `--history FILE` reads
a saved reading instead of GitHub (no token, no request); `--save-history FILE` saves one.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from runner_queue_fallback.core.actions_io import escape_json, escape_log_line
from runner_queue_fallback.core.clock import Clock
from runner_queue_fallback.core.errors import GitHubError, NotFound
from runner_queue_fallback.core.input_names import TOKEN_VARIABLES
from runner_queue_fallback.core.inputs import InputErrors, env_name, read_pool_settings
from runner_queue_fallback.core.profiles import describe_runner_types, load_profiles
from runner_queue_fallback.github.client import GitHubClient
from runner_queue_fallback.tools.stats import history_file
from runner_queue_fallback.tools.stats.history import (
    QUOTA_RESERVE,
    History,
    read_history,
    request_budget,
)
from runner_queue_fallback.tools.stats.history_file import HistoryFileError, SavedHistory
from runner_queue_fallback.tools.stats.recommend import recommend
from runner_queue_fallback.tools.stats.report import Report

if TYPE_CHECKING:
    import requests

    from runner_queue_fallback.core.inputs import PoolSettings

__all__ = ["DEFAULT_MAX_RUNS", "MAX_RUNS_LIMIT", "add_arguments", "run"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
#: 400 runs cost at most 404 requests: with the 300-request reserve, a 1,000-an-hour
#: GITHUB_TOKEN keeps room for coordinators.
DEFAULT_MAX_RUNS = 400
#: GitHub lists at most 1,000 runs per filtered query, but `stats` splits the window past that;
#: 10,000 runs cost about 10,150 requests, two hours of a 5,000-an-hour token.
MAX_RUNS_LIMIT = 10_000
DEFAULT_SINCE = "14d"
#: Flags that say what to read from GitHub: none of them applies to `--history`.
_ONLINE = ("workflow", "since", "repo", "token_env", "max_runs")
MAX_WINDOW_DAYS = 90
_SINCE = re.compile(r"(?P<n>[1-9][0-9]{0,3})(?P<unit>[dh])")
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_WORKFLOW = re.compile(r"[A-Za-z0-9_.-]+\.ya?ml")


class UsageError(Exception):
    """A bad flag: one message naming it and what is allowed."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `stats` flags."""
    parser.add_argument(
        "--workflow",
        help="the child workflow file, e.g. runner-worker.yml (required unless --history)",
    )
    parser.add_argument("--since", help=f"window: 1h to 90d, as Nd or Nh (default {DEFAULT_SINCE})")
    parser.add_argument("--repo", help="owner/name (default: GITHUB_REPOSITORY)")
    parser.add_argument(
        "--token-env",
        help=(
            "the environment variable holding the token (default: "
            f"{', then '.join(TOKEN_VARIABLES)}, as every command reads it)"
        ),
    )
    parser.add_argument(
        "--max-runs",
        help=f"read at most this many runs, 1 to {MAX_RUNS_LIMIT:,} (default {DEFAULT_MAX_RUNS})",
    )
    parser.add_argument(
        "--history",
        metavar="FILE",
        help="read a saved history file instead of GitHub: offline, no token (default: none)",
    )
    parser.add_argument(
        "--save-history",
        metavar="FILE",
        help="also save the children read to FILE, for --history later (default: none)",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json", action="store_true", help="print JSON, schema version 3 (default: text)"
    )
    output.add_argument(
        "--markdown", action="store_true", help="print Markdown with Mermaid charts (default: text)"
    )
    parser.add_argument(
        "--plot", metavar="FILE", help="also write a chart, .png or .svg (default: none)"
    )
    parser.add_argument(
        "--runner-type",
        help=(
            "recommend an order and deadlines for this runner type: "
            f"{describe_runner_types(load_profiles())} (default: none)"
        ),
    )
    parser.add_argument(
        "--runners", help="the current `runners` JSON (with --runner-type; default: the profile)"
    )
    parser.add_argument(
        "--queue-timeout-minutes",
        help="the current deadline, 1 to 60 (with --runner-type; default: the policy's)",
    )


def _parse_since(text: str) -> timedelta:
    match = _SINCE.fullmatch(text.strip())
    if match is None:
        raise UsageError(
            f"--since must be like 14d or 36h (1h to {MAX_WINDOW_DAYS}d), got {text!r}"
        )
    n = int(match["n"])
    window = timedelta(days=n) if match["unit"] == "d" else timedelta(hours=n)
    if window > timedelta(days=MAX_WINDOW_DAYS):
        raise UsageError(f"--since must be at most {MAX_WINDOW_DAYS}d, got {text!r}")
    return window


def _parse_max_runs(text: str) -> int:
    value = text.strip()
    if not value.isdigit() or len(value) > 6 or not 1 <= int(value) <= MAX_RUNS_LIMIT:
        raise UsageError(
            f"--max-runs must be a whole number from 1 to {MAX_RUNS_LIMIT:,}, got {text!r}"
        )
    return int(value)


def _settings_environ(args: argparse.Namespace) -> dict[str, str] | None:
    """The INPUT_* mapping `read_pool_settings` reads, from the recommendation flags."""
    if args.runner_type is None:
        if args.runners is not None or args.queue_timeout_minutes is not None:
            raise UsageError("--runners and --queue-timeout-minutes need --runner-type")
        return None
    given = {
        "runner-type": args.runner_type,
        "runners": args.runners,
        "queue-timeout-minutes": args.queue_timeout_minutes,
    }
    return {env_name(k): v for k, v in given.items() if v is not None}


def _check(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str, str]:
    """Repository, token and API URL, or UsageError; no request is sent before this passes."""
    if args.workflow is None:
        raise UsageError("--workflow is required (or read a saved reading with --history FILE)")
    if _WORKFLOW.fullmatch(args.workflow) is None:
        raise UsageError(
            f"--workflow must be a workflow file name such as runner-worker.yml, got {args.workflow!r}"
        )
    repo = args.repo or environ.get("GITHUB_REPOSITORY", "")
    if _REPO.fullmatch(repo) is None:
        raise UsageError(f"--repo must be owner/name (or set GITHUB_REPOSITORY), got {repo!r}")
    names = (args.token_env,) if args.token_env else TOKEN_VARIABLES
    token = next((environ[n].strip() for n in names if environ.get(n, "").strip()), "")
    if not token:
        raise UsageError(
            f"no token: set {' or '.join(names)} (or name another variable with --token-env); "
            "no flag takes the token itself"
        )
    api_url = environ.get("GITHUB_API_URL") or "https://api.github.com"
    return repo, token, api_url


def _given(value: str | None, default: str) -> str:
    return default if value is None else value


def _check_files(args: argparse.Namespace) -> None:
    """The file flags, checked before anything is read: a chart's type, a place to save to."""
    if args.plot is not None and Path(args.plot).suffix.lower() not in {".png", ".svg"}:
        raise UsageError(f"--plot must name a .png or .svg file, got {args.plot!r}")
    if args.save_history is not None and not Path(args.save_history).parent.is_dir():
        raise UsageError(f"--save-history {args.save_history!r}: its directory does not exist")
    if args.history is not None:
        given = [
            f"--{name.replace('_', '-')}" for name in _ONLINE if getattr(args, name) is not None
        ]
        if given:
            raise UsageError(
                f"--history reads a saved reading: {', '.join(given)} cannot apply to it"
            )


@dataclass(frozen=True)
class _Flags:
    window: timedelta
    max_runs: int
    settings: PoolSettings | None
    repo: str
    token: str
    api_url: str


def _read_flags(args: argparse.Namespace, environ: Mapping[str, str], err: TextIO) -> _Flags | None:
    """Every flag checked, or None after printing why (nothing has been sent yet)."""
    try:
        _check_files(args)
        window = _parse_since(_given(args.since, DEFAULT_SINCE))
        max_runs = _parse_max_runs(_given(args.max_runs, str(DEFAULT_MAX_RUNS)))
        pool_env = _settings_environ(args)
        settings = None if pool_env is None else read_pool_settings(pool_env, load_profiles())
        repo, token, api_url = ("", "", "") if args.history else _check(args, environ)
    except UsageError as exc:
        _say(err, f"stats: error: {exc}")
        return None
    except InputErrors as exc:
        for error in exc.errors:
            _say(err, f"stats: error: {error}")
        return None
    return _Flags(window, max_runs, settings, repo, token, api_url)


def run(
    args: argparse.Namespace,
    environ: Mapping[str, str],
    clock: Clock,
    session_factory: Callable[[], requests.Session],
    out: TextIO,
    *,
    err: TextIO | None = None,
) -> int:
    """Run `stats`; return the exit code."""
    err = err or sys.stderr
    flags = _read_flags(args, environ, err)
    if flags is None:
        return EXIT_BAD_INPUT
    if args.history is not None:
        return _offline(args, flags, out, err)
    window, max_runs, repo = flags.window, flags.max_runs, flags.repo
    token, api_url = flags.token, flags.api_url
    now = clock.now()
    since = now - window
    _say(
        err,
        f"stats: plan: runs of {args.workflow} in {repo} created since "
        f"{since:%Y-%m-%dT%H:%M:%SZ} ({_given(args.since, DEFAULT_SINCE)}); at most "
        f"{max_runs} runs and "
        f"{request_budget(max_runs)} requests; stops when {QUOTA_RESERVE} or fewer requests "
        "are left this hour",
    )
    client = GitHubClient(session_factory(), api_url, repo, token, clock, api_version="auto")
    progress = _progress(err, max_runs) if _isatty(err) else None
    try:
        history = read_history(
            client, args.workflow, since=since, now=now, max_runs=max_runs, progress=progress
        )
    except NotFound:
        _say(
            err,
            f"stats: error: workflow file {args.workflow!r} not found in {repo} (it must be "
            "under .github/workflows/ on the default branch; the token needs actions: read)",
        )
        return EXIT_BAD_INPUT
    except GitHubError as exc:
        _say(err, f"stats: error: {exc}")
        return EXIT_FAILED
    if progress is not None:
        print(file=err)
    report = Report(
        repo, args.workflow, since, now, history, client.stats.sent, client.stats.counted
    )
    if args.save_history is not None:
        saved = SavedHistory(repo, args.workflow, since, now, "github", history)
        if not _save(Path(args.save_history), saved, err):
            return EXIT_FAILED
    return _print(report, args, flags.settings, out, err)


def _offline(args: argparse.Namespace, flags: _Flags, out: TextIO, err: TextIO) -> int:
    """`--history FILE`: the report of a saved reading, without a request."""
    try:
        saved = history_file.load(Path(args.history))
    except HistoryFileError as exc:
        _say(err, f"stats: error: {exc}")
        return EXIT_BAD_INPUT
    report = Report(
        saved.repository,
        saved.workflow,
        saved.since,
        saved.until,
        saved.history,
        0,
        0,
        history_file=(args.history, saved.source),
    )
    if args.save_history is not None and not _save(Path(args.save_history), saved, err):
        return EXIT_FAILED
    return _print(report, args, flags.settings, out, err)


def _save(path: Path, saved: SavedHistory, err: TextIO) -> bool:
    try:
        history_file.save(path, saved)
    except OSError as exc:
        _say(err, f"stats: error: --save-history {path}: cannot write ({exc.strerror})")
        return False
    _say(err, f"stats: saved {len(saved.history.children)} children to {path}")
    return True


def _print(
    report: Report,
    args: argparse.Namespace,
    settings: PoolSettings | None,
    out: TextIO,
    err: TextIO,
) -> int:
    """The report in the format asked for, and the chart if asked for."""
    if settings is not None:
        report.recommendation = recommend(settings.candidates, report.pools)
    if args.json:
        print(escape_json(json.dumps(report.as_json(), indent=2)), file=out)
    elif args.markdown:
        print(report.markdown(), file=out, end="")
    else:
        print(report.text(), file=out)
    if args.plot is not None:
        return _plot(report, Path(args.plot), err)
    return EXIT_OK


def _plot(report: Report, path: Path, err: TextIO) -> int:
    from runner_queue_fallback.tools.stats import plot  # noqa: PLC0415  # optional extra, loaded on use

    try:
        plot.write(report.pools, path)
    except plot.PlotUnavailable as exc:
        _say(err, f"stats: error: --plot: {exc}")
        return EXIT_BAD_INPUT
    _say(err, f"stats: wrote {path}")
    return EXIT_OK


def _say(err: TextIO, line: str) -> None:
    """One line on stderr, which the runner reads for commands too (flags, GitHub's messages)."""
    print(escape_log_line(line), file=err)


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _progress(err: TextIO, max_runs: int) -> Callable[[History], None]:
    def show(history: History) -> None:
        total = min(max_runs, history.in_window)
        err.write(f"\rstats: {history.examined}/{total} runs read, {len(history.children)} ours")
        err.flush()

    return show
