"""What `stats` prints: per-pool and per-sequence figures as text, JSON (schema v3) or Markdown.

A pool is its labels as a set (`core/labels.py`): children are grouped by it, in any order or case,
and shown with the labels as their jobs listed them (a JSON list); a pool the history cannot
measure (no labels, or several runner groups) says why instead of figures.

Pure: takes a History (and a Recommendation) and returns strings and dicts. Text from GitHub (a
pool's labels, which the dispatcher chose, a runner group) goes through `escape_markdown` in a
table cell, into a Mermaid chart only as the characters a label may have, and every line of the
text and the Markdown through `actions_io.escape_log_line` (the command prints them to a log); no URL
from a reply is ever printed.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runner_queue_fallback.core.actions_io import escape_log_line, escape_markdown, markdown_code
from runner_queue_fallback.core.labels import as_list
from runner_queue_fallback.tools.stats.history import Ending, History, sequences
from runner_queue_fallback.tools.stats.history_file import QUEUE_DURATION
from runner_queue_fallback.tools.stats.pools import PoolData, pool_data
from runner_queue_fallback.tools.stats.recommend import Evaluation, Recommendation

__all__ = [
    "MINUTES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SCHEMA_VERSIONS",
    "Report",
    "pool_data",  # defined in `pools`: per-pool measurements, as the report groups them
]

SCHEMA = "runner-queue-fallback/stats"
#: Bump on any change a reader could notice; `docs/stats-schema.json` describes each version.
SCHEMA_VERSION = 3
#: The versions `simulate --waits` reads (their pools' curves are the same; up to 2 a pool's
#: labels are one string, sorted and comma-joined).
SCHEMA_VERSIONS = (1, 2, 3)
#: P(runner within t) is reported at these minutes.
MINUTES = (1, 2, 5, 10, 15, 30, 60)
_MERMAID_SAFE = re.compile(r"[^A-Za-z0-9._,/ -]")


def _minutes(seconds: float | None) -> str:
    return "not reached" if seconds is None else f"{seconds / 60:.1f} min"


def _percent(value: float | None) -> str:
    return "  n/a" if value is None else f"{100 * value:4.0f}%"


@dataclass
class Report:
    """One reading, ready to print."""

    repository: str
    workflow: str
    since: datetime
    until: datetime
    history: History
    requests_sent: int
    requests_counted: int
    recommendation: Recommendation | None = None
    #: where the children came from: None for GitHub, else the history file as given (and the
    #: file's own `source`, github or simulate)
    history_file: tuple[str, str] | None = None

    @property
    def pools(self) -> dict[str, PoolData]:
        """Per-pool measurements."""
        return pool_data(self.history.children)

    def _counts(self, key: str) -> Counter[Ending]:
        return Counter(c.ending for c in self.history.children if c.pool == key)

    # ------------------------------------------------------------------------------ JSON

    def as_json(self) -> dict[str, Any]:
        """The `--json` document (schema `runner-queue-fallback/stats`, version 3)."""
        history = self.history
        seqs = sequences(history.children)
        waits = [s.seconds_to_runner for s in seqs if s.seconds_to_runner is not None]
        return {
            "schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "repository": self.repository,
            "workflow": self.workflow,
            "window": {"since": _iso(self.since), "until": _iso(self.until)},
            "reading": {
                "runs_in_window": history.in_window,
                "runs_examined": history.examined,
                "runs_not_ours": history.not_ours,
                "children": len(history.children),
                "requests_sent": self.requests_sent,
                "requests_counted": self.requests_counted,
                "stopped": history.stopped,
                "carried_forward": history.carried_forward,
                "queued_with_steps": history.queued_with_steps,
                "windows": history.windows,
                "source": "github" if self.history_file is None else "history",
            },
            "pools": [self._pool_json(p) for p in self.pools.values()],
            "sequences": {
                "count": len(seqs),
                "endings": dict(Counter(s.ending for s in seqs)),
                "candidates_used": {
                    str(k): v for k, v in Counter(s.candidates for s in seqs).items()
                },
                "seconds_to_runner": _spread(waits),
            },
            "recommendation": None if self.recommendation is None else self._rec_json(),
        }

    def _pool_json(self, pool: PoolData) -> dict[str, Any]:
        """One pool; no figure at all for a pool the history cannot measure (its `refused`)."""
        counts = self._counts(pool.key)
        measured = pool.unmeasurable is None
        median = pool.curve.quantile(0.5) if measured else None
        p90 = pool.curve.quantile(0.9) if measured else None
        return {
            "group": pool.group or None,
            "labels": as_list(pool.labels),
            "children": pool.children,
            "allocated": counts[Ending.ALLOCATED],
            "timed_out": counts[Ending.TIMED_OUT],
            "race": counts[Ending.RACE],
            "waiting": counts[Ending.WAITING],
            "within": {str(m): pool.curve.within(m * 60.0) if measured else None for m in MINUTES},
            "median_seconds": median,
            "p90_seconds": p90,
            QUEUE_DURATION: {"median": median, "p90": p90},
            "refused": pool.refusal(),
            "curve": pool.curve.as_json() if measured else None,
        }

    def _rec_json(self) -> dict[str, Any]:
        rec = self.recommendation
        assert rec is not None  # noqa: S101  # only called with one
        return {
            "current": None if rec.current is None else _eval_json(rec.current, None),
            "current_note": rec.current_note,
            "best": [_eval_json(e, rec.current) for e in rec.best],
            "refused": [
                {"group": r.group or None, "labels": as_list(r.labels), "reason": r.reason}
                for r in rec.refused
            ],
            "orders_considered": rec.considered,
        }

    # ------------------------------------------------------------------------------ text

    def text(self) -> str:
        """The default table; each line one log line, whatever the labels hold."""
        h = self.history
        lines = [
            (
                f"Queue waits of {self.workflow} in {self.repository}, "
                f"{_iso(self.since)} to {_iso(self.until)}"
            ),
            f"{h.examined} of {h.in_window} runs read, {len(h.children)} children of ours, "
            f"{h.not_ours} runs not ours{self._traps()}; {self._cost()}"
            + (f"; {h.stopped}" if h.stopped else ""),
            "",
            "pool                               children alloc t/o race "
            + " ".join(f"{m:>4}m" for m in MINUTES)
            + "   median      p90",
        ]
        for pool in self.pools.values():
            counts = self._counts(pool.key)
            lines.append(  # labels escaped before they are cut, so the columns stay aligned
                f"{escape_log_line(pool.text)[:34]:<34} {pool.children:>8} {pool.allocated:>5} "
                f"{counts[Ending.TIMED_OUT]:>3} {counts[Ending.RACE]:>4} {_figures(pool)}"
            )
        if not self.pools:
            lines.append("(no children of ours in this window: no pool to estimate)")
        lines += [
            "",
            (
                "P(runner within t) by Kaplan-Meier: timed-out children are censored at "
                "their deadline; n/a: beyond what the data can see."
            ),
        ]
        lines += self._sequence_lines()
        if self.recommendation is not None:
            lines += self._recommendation_lines()
        return _log_lines(lines)

    def _traps(self) -> str:
        """Children left out or read specially (github-api.md 12), when there are any."""
        h, said = self.history, ""
        if h.carried_forward:
            said += f", {h.carried_forward} carried into a re-run attempt (left out)"
        if h.queued_with_steps:
            said += f", {h.queued_with_steps} still shown queued although they ran (counted run)"
        return said

    def _cost(self) -> str:
        """What the reading cost: requests, or the history file it came from (none)."""
        if self.history_file is None:
            return f"{self.requests_sent} requests ({self.requests_counted} counted)"
        path, source = self.history_file
        return f"read offline from {path} (saved by {source}), no request"

    def _sequence_lines(self) -> list[str]:
        seqs = sequences(self.history.children)
        waits = [s.seconds_to_runner for s in seqs if s.seconds_to_runner is not None]
        spread = _spread(waits)
        endings = ", ".join(f"{k} {v}" for k, v in sorted(Counter(s.ending for s in seqs).items()))
        used = ", ".join(
            f"{k}: {v}" for k, v in sorted(Counter(s.candidates for s in seqs).items())
        )
        return [
            "",
            f"Sequences: {len(seqs)} ({endings}); candidates used: {used}",
            (
                f"Time to a runner: median {_minutes(spread['median'])}, "
                f"p90 {_minutes(spread['p90'])}, mean {_minutes(spread['mean'])} "
                f"(over {len(waits)} sequences that got one)"
            ),
        ]

    def _recommendation_lines(self) -> list[str]:
        rec = self.recommendation
        assert rec is not None  # noqa: S101  # checked by the caller
        lines = ["", "Recommendation (pools independent; each fallback costs ~30 s):"]
        lines += [f"  nothing rests on {r.text}: {r.reason}" for r in rec.refused]
        counts = ", ".join(
            f"{p.text} {p.children} children/{p.allocated} runners" for p in self.pools.values()
        )
        lines.append(f"  resting on: {counts}")
        if rec.current is not None:
            lines.append(f"  current:  {_describe(rec.current)}")
        else:
            lines.append(f"  current:  not evaluated ({rec.current_note})")
        for rank, best in enumerate(rec.best, start=1):
            lines.append(f"  #{rank}:       {_describe(best)}{_versus(best, rec.current)}")
            lines.append(f"      runners: {best.runners_json()}")
        if not rec.best and rec.considered == 0 and rec.refused:
            lines.append("  nothing recommended: no pool of the runner type has enough data")
        elif not rec.best:
            lines.append("  no order can be evaluated with the data at hand")
        return lines

    # -------------------------------------------------------------------------- Markdown

    def markdown(self) -> str:
        """A step summary: the table, one Mermaid chart per pool, sequences, recommendation."""
        h = self.history
        out = [
            # a code span takes no backslash escape: the text goes in whole, fenced long enough
            f"## Queue waits: {markdown_code(self.workflow)} in {markdown_code(self.repository)}",
            "",
            f"{_iso(self.since)} to {_iso(self.until)}: {h.examined} of {h.in_window} runs read, "
            f"{len(h.children)} children, {self.requests_counted} counted requests"
            + (f" ({escape_markdown(h.stopped)})" if h.stopped else ""),
            "",
            "| pool | children | allocated | timed out | "
            + " | ".join(f"≤{m} min" for m in MINUTES)
            + " | median | p90 |",
            "|---|---:|---:|---:|" + "---:|" * len(MINUTES) + "---:|---:|",
        ]
        for pool in self.pools.values():
            counts = self._counts(pool.key)
            out.append(
                f"| {escape_markdown(pool.text)} | {pool.children} | {pool.allocated} | "
                f"{counts[Ending.TIMED_OUT]} | {_markdown_figures(pool)} |"
            )
        for pool in self.pools.values():
            if pool.refusal() is None:
                out += ["", *_mermaid(pool)]
        out += ["", *(f"{line}  " for line in self._sequence_lines()[1:])]
        if self.recommendation is not None:
            text = [escape_log_line(line) for line in self._recommendation_lines()[1:]]
            fence = _fence(text)
            out += ["", f"{fence}text", *text, fence]
        return _log_lines(out) + "\n"


def _figures(pool: PoolData) -> str:
    """A text row's P(runner within t), median and p90, or why the data cannot give them."""
    if pool.unmeasurable is not None:
        return f"  {pool.unmeasurable}"
    if (thin := pool.refusal()) is not None:
        return f"  too few to estimate its waits: {thin}"
    within = " ".join(_percent(pool.curve.within(m * 60.0)) for m in MINUTES)
    median, p90 = _minutes(pool.curve.quantile(0.5)), _minutes(pool.curve.quantile(0.9))
    return f"{within} {median:>11} {p90:>11}"


def _markdown_figures(pool: PoolData) -> str:
    """The same as table cells (the note in the first, the others empty)."""
    if pool.unmeasurable is not None:
        return pool.unmeasurable + " |" * (len(MINUTES) + 1)
    if (thin := pool.refusal()) is not None:
        return f"too few to estimate its waits: {thin}" + " |" * (len(MINUTES) + 1)
    within = " | ".join(_percent(pool.curve.within(m * 60.0)).strip() for m in MINUTES)
    median, p90 = _minutes(pool.curve.quantile(0.5)), _minutes(pool.curve.quantile(0.9))
    return f"{within} | {median} | {p90}"


def _mermaid(pool: PoolData) -> list[str]:
    """A Mermaid bar chart of P(runner within t), only at the minutes the data can see."""
    seen = [(m, v) for m in MINUTES if (v := pool.curve.within(m * 60.0)) is not None]
    title = _MERMAID_SAFE.sub("_", pool.text)[:80]
    return [
        "```mermaid",
        "xychart-beta",
        f'    title "{title}: P(runner within t), {pool.children} children"',
        f'    x-axis "minutes" [{", ".join(str(m) for m, _ in seen)}]',
        '    y-axis "%" 0 --> 100',
        f"    bar [{', '.join(f'{100 * v:.0f}' for _, v in seen)}]",
        "```",
    ]


def _log_lines(lines: Sequence[str]) -> str:
    """`lines` joined, each made one log line: a value's line break or `::` starts none."""
    return "\n".join(escape_log_line(line) for line in lines)


def _fence(lines: Sequence[str]) -> str:
    """A code fence longer than any run of backticks in `lines`, which cannot close it."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    return "`" * max(3, longest + 1)


def _describe(e: Evaluation) -> str:
    order = " -> ".join(f"{s.text} {s.minutes:g}m" for s in e.steps)
    return (
        f"{order}: mean {_minutes(e.mean_seconds)}, "
        f"p90 {_minutes(e.p90_seconds)}, exhausted {100 * e.exhausted:.1f}%"
    )


def _versus(e: Evaluation, current: Evaluation | None) -> str:
    """Gain and cost against the current order: the wait saved (or added), exhaustion's change."""
    if current is None:
        return ""
    parts = []
    if math.isfinite(gain := current.mean() - e.mean()):
        parts.append(
            "as fast"
            if abs(gain) < 0.05 * 60
            else f"{abs(gain) / 60:.1f} min {'faster' if gain > 0 else 'slower'}"
        )
    change = 100 * (e.exhausted - current.exhausted)
    if e.raises_failure_rate(current):
        parts.append(f"exhausted {change:.1f} points more often, so never ranked first")
    elif change < -1e-7:
        parts.append(f"exhausted {-change:.1f} points less often")
    else:
        parts.append("exhausted no more often")
    return f" (vs current: {'; '.join(parts)})"


def _eval_json(e: Evaluation, current: Evaluation | None) -> dict[str, Any]:
    versus = None
    if current is not None:
        versus = {
            "mean_seconds": _delta(e.mean_seconds, current.mean_seconds),
            "p90_seconds": _delta(e.p90_seconds, current.p90_seconds),
            "exhausted": e.exhausted - current.exhausted,
        }
    return {
        "steps": [s.runner() for s in e.steps],
        "mean_seconds": e.mean_seconds,
        "p90_seconds": e.p90_seconds,
        "exhausted": e.exhausted,
        "runners": e.runners_json(),
        "raises_failure_rate": e.raises_failure_rate(current),
        "versus_current": versus,
    }


def _delta(value: float | None, base: float | None) -> float | None:
    return None if value is None or base is None else value - base


def _spread(values: Sequence[float]) -> Mapping[str, float | None]:
    if not values:
        return {"median": None, "p90": None, "mean": None}
    ordered = sorted(values)
    return {
        "median": statistics.median(ordered),
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "mean": statistics.fmean(ordered),
    }


def _iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")
