"""What `stats` prints: per-pool and per-sequence figures as text, JSON (schema v1) or Markdown.

Pure: takes a History (and a Recommendation) and returns strings and dicts. Text from GitHub (a
pool's labels, which the dispatcher chose, a runner group) goes through `escape_markdown` in a
table cell, into a Mermaid chart only as the characters a label may have, and every line of the
text and the Markdown through `report.escape_log_line` (the command prints them to a log); no URL
from a reply is ever printed.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runner_queue_fallback.report import escape_log_line, escape_markdown
from runner_queue_fallback.stats.history import Child, Ending, History, sequences
from runner_queue_fallback.stats.recommend import Evaluation, PoolData, Recommendation
from runner_queue_fallback.stats.survival import kaplan_meier

__all__ = ["MINUTES", "SCHEMA", "SCHEMA_VERSION", "Report", "pool_data"]

SCHEMA = "runner-queue-fallback/stats"
#: Bump on any change a reader could notice; `docs/stats-schema.json` describes each version.
SCHEMA_VERSION = 1
#: P(runner within t) is reported at these minutes.
MINUTES = (1, 2, 5, 10, 15, 30, 60)
_MERMAID_SAFE = re.compile(r"[^A-Za-z0-9._,/ -]")


def pool_data(children: Sequence[Child]) -> dict[str, PoolData]:
    """Per pool (labels): the Kaplan-Meier curve of its waits and its counts."""
    by_pool: dict[str, list[Child]] = {}
    for child in children:
        if child.pool and child.wait is not None:
            by_pool.setdefault(child.pool, []).append(child)
    found = {}
    for labels, members in sorted(by_pool.items()):
        groups = Counter(c.group for c in members if c.group)
        found[labels] = PoolData(
            group=groups.most_common(1)[0][0] if groups else "",
            labels=labels,
            curve=kaplan_meier(c.wait for c in members if c.wait is not None),
            children=len(members),
            allocated=sum(1 for c in members if c.wait is not None and c.wait.event),
        )
    return found


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

    @property
    def pools(self) -> dict[str, PoolData]:
        """Per-pool measurements."""
        return pool_data(self.history.children)

    def _counts(self, labels: str) -> Counter[Ending]:
        return Counter(c.ending for c in self.history.children if c.pool == labels)

    # ------------------------------------------------------------------------------ JSON

    def as_json(self) -> dict[str, Any]:
        """The `--json` document (schema `runner-queue-fallback/stats`, version 1)."""
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
        counts = self._counts(pool.labels)
        return {
            "group": pool.group or None,
            "labels": pool.labels,
            "children": pool.children,
            "allocated": counts[Ending.ALLOCATED],
            "timed_out": counts[Ending.TIMED_OUT],
            "race": counts[Ending.RACE],
            "waiting": counts[Ending.WAITING],
            "within": {str(m): pool.curve.within(m * 60.0) for m in MINUTES},
            "median_seconds": pool.curve.quantile(0.5),
            "p90_seconds": pool.curve.quantile(0.9),
            "refused": pool.refusal(),
            "curve": pool.curve.as_json(),
        }

    def _rec_json(self) -> dict[str, Any]:
        rec = self.recommendation
        assert rec is not None  # noqa: S101  # only called with one
        return {
            "current": None if rec.current is None else _eval_json(rec.current),
            "current_note": rec.current_note,
            "best": [_eval_json(e) for e in rec.best],
            "refused": dict(rec.refused),
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
            f"{h.not_ours} runs not ours; {self.requests_sent} requests "
            f"({self.requests_counted} counted)" + (f"; {h.stopped}" if h.stopped else ""),
            "",
            "pool                               children alloc t/o race "
            + " ".join(f"{m:>4}m" for m in MINUTES)
            + "   median      p90",
        ]
        for pool in self.pools.values():
            counts = self._counts(pool.labels)
            within = " ".join(_percent(pool.curve.within(m * 60.0)) for m in MINUTES)
            lines.append(  # labels escaped before they are cut, so the columns stay aligned
                f"{escape_log_line(pool.labels)[:34]:<34} {pool.children:>8} {pool.allocated:>5} "
                f"{counts[Ending.TIMED_OUT]:>3} {counts[Ending.RACE]:>4} {within} "
                f"{_minutes(pool.curve.quantile(0.5)):>11} {_minutes(pool.curve.quantile(0.9)):>11}"
            )
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
        for labels, reason in rec.refused.items():
            lines.append(f"  refused for {labels}: {reason}")
        counts = ", ".join(
            f"{p.labels} {p.children} children/{p.allocated} runners" for p in self.pools.values()
        )
        lines.append(f"  resting on: {counts}")
        if rec.current is not None:
            lines.append(f"  current:  {_describe(rec.current)}")
        else:
            lines.append(f"  current:  not evaluated ({rec.current_note})")
        for rank, best in enumerate(rec.best, start=1):
            lines.append(f"  #{rank}:       {_describe(best)}")
            lines.append(f"      runners: {best.runners_json()}")
        if not rec.best:
            lines.append("  no order can be evaluated with the data at hand")
        return lines

    # -------------------------------------------------------------------------- Markdown

    def markdown(self) -> str:
        """A step summary: the table, one Mermaid chart per pool, sequences, recommendation."""
        h = self.history
        out = [
            f"## Queue waits: `{escape_markdown(self.workflow)}`",
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
            counts = self._counts(pool.labels)
            within = " | ".join(_percent(pool.curve.within(m * 60.0)).strip() for m in MINUTES)
            out.append(
                f"| {escape_markdown(pool.labels)} | {pool.children} | {pool.allocated} | "
                f"{counts[Ending.TIMED_OUT]} | {within} | {_minutes(pool.curve.quantile(0.5))} | "
                f"{_minutes(pool.curve.quantile(0.9))} |"
            )
        for pool in self.pools.values():
            out += ["", *_mermaid(pool)]
        out += ["", *(f"{line}  " for line in self._sequence_lines()[1:])]
        if self.recommendation is not None:
            text = [escape_log_line(line) for line in self._recommendation_lines()[1:]]
            fence = _fence(text)
            out += ["", f"{fence}text", *text, fence]
        return _log_lines(out) + "\n"


def _mermaid(pool: PoolData) -> list[str]:
    """A Mermaid bar chart of P(runner within t), only at the minutes the data can see."""
    seen = [(m, v) for m in MINUTES if (v := pool.curve.within(m * 60.0)) is not None]
    title = _MERMAID_SAFE.sub("_", pool.labels)[:80]
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
    order = " -> ".join(f"{s.labels} {s.minutes:g}m" for s in e.steps)
    return (
        f"{order}: mean {_minutes(e.mean_seconds)}, "
        f"p90 {_minutes(e.p90_seconds)}, exhausted {100 * e.exhausted:.1f}%"
    )


def _eval_json(e: Evaluation) -> dict[str, Any]:
    return {
        "steps": [s.runner() for s in e.steps],
        "mean_seconds": e.mean_seconds,
        "p90_seconds": e.p90_seconds,
        "exhausted": e.exhausted,
        "runners": e.runners_json(),
    }


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
