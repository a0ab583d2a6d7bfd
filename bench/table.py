"""The bench's figures, their ratios to the baseline, the targets, and the printed table.

Long (a table of data) because its rows, read as one list, are most of the module.

The table is data: `SECTIONS` lists its rows (a label, where the value comes from, how it is
formatted and which ratio to the baseline goes with it); `render` only walks it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.harness import VARIANTS
from bench.metrics import ENDPOINTS, PHASES

__all__ = ["FIGURES", "SECTIONS", "Row", "Section", "ratios", "render", "targets"]

#: A figure of one variant's results (None: not measured).
Figure = Callable[[Mapping[str, Any]], Any]

FIGURES: dict[str, Figure] = {
    "queued_counted_per_hour": lambda v: v["scenarios"]["queued"]["queued"]["counted_per_hour"],
    "queued_sent_per_hour": lambda v: 60 * v["scenarios"]["queued"]["queued"]["sent_per_minute"],
    "queued_run_counted_per_hour": lambda v: v["scenarios"]["queued"]["counted_per_hour"],
    "executing_counted_per_hour": lambda v: v["scenarios"]["executing"]["executing"][
        "counted_per_hour"
    ],
    "fallback_counted_per_hour": lambda v: v["scenarios"]["fallback"]["counted_per_hour"],
    "fallback_counted": lambda v: v["scenarios"]["fallback"]["counted"],
    "fallback_sent": lambda v: v["scenarios"]["fallback"]["sent"],
    "fallback_not_modified": lambda v: v["scenarios"]["fallback"]["not_modified"],
    "mix_counted_per_hour": lambda v: (v["mix_at_max"] or {}).get("counted_per_hour"),
    "cancel_after_deadline_max_s": lambda v: v["deadline"]["cancel_after_deadline_s"]["max"],
    "cancel_after_deadline_mean_s": lambda v: v["deadline"]["cancel_after_deadline_s"]["mean"],
    "cancel_to_confirmed_max_s": lambda v: v["deadline"]["cancel_to_confirmed_s"]["max"],
    "confirmed_to_next_dispatch_max_s": lambda v: v["deadline"]["confirmed_to_next_dispatch_s"][
        "max"
    ],
    "max_concurrent_coordinators": lambda v: v["concurrency"]["max_coordinators"],
    "cpu_per_coordinator_hour_s": lambda v: v["cpu"]["per_coordinator_hour_s"],
    "cpu_without_fake_per_coordinator_hour_s": lambda v: v["cpu"][
        "per_coordinator_hour_without_fake_s"
    ],
}
OURS = ("ours", "ours-no-etag")


def ratios(results: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """Each figure of ours and of ours without ETags, divided by the baseline's same figure."""
    variants = results["variants"]
    out: dict[str, dict[str, float | None]] = {}
    for name, figure in FIGURES.items():
        base = figure(variants["baseline"])
        out[name] = {v: ratio(figure(variants[v]), base) for v in OURS}
    settings = results["settings"]
    base = steady_state(variants["baseline"], settings)
    out["steady_state_estimate"] = {
        v: ratio(steady_state(variants[v], settings), base) for v in OURS
    }
    return out


def steady_state(variant: Mapping[str, Any], settings: Mapping[str, Any]) -> float | None:
    """How many coordinators of the mix one quota carries: quota / mix counted per hour."""
    return ratio(float(settings["quota"]), FIGURES["mix_counted_per_hour"](variant))


def targets(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Where ours stands against the issue's targets."""
    ours = results["variants"]["ours"]
    rows = [
        (
            "<= 30 counted requests per coordinator-hour while queued",
            FIGURES["queued_counted_per_hour"](ours),
            30.0,
            "<=",
        ),
        (
            "every cancel within 5 virtual seconds of its deadline",
            FIGURES["cancel_after_deadline_max_s"](ours),
            5.0,
            "<=",
        ),
        ("CLI cold start < 0.3 s", results["cold_start"]["cli"]["median_s"], 0.3, "<"),
        *(
            (f"`{name}` cold start < 0.15 s", measured["median_s"], 0.15, "<")
            for name, measured in results["cold_start"]["cli"]["commands"].items()
        ),
    ]
    if not results["settings"]["quick"]:  # a 100-request quota's N says nothing about 1,000
        count = FIGURES["max_concurrent_coordinators"](ours)
        rows.insert(
            1, (">= 32 concurrent coordinators within 1,000 requests/hour", count, 32, ">=")
        )
        # a quick run's queue is a few minutes long: most of its reads are near the deadline
        sent = FIGURES["queued_sent_per_hour"](ours)
        rows.insert(1, ("<= 60 requests sent per queued coordinator-hour", sent, 60.0, "<="))
    out = []
    for text, value, limit, op in rows:
        met = None
        if value is not None:
            met = {"<=": value <= limit, "<": value < limit, ">=": value >= limit}[op]
        out.append({"target": text, "value": value, "limit": limit, "met": met})
    return out


def ratio(value: float | None, base: float | None) -> float | None:
    """`value / base`, or None when either is missing or the base is 0."""
    if value is None or base is None or base == 0:
        return None
    return value / base


# -- the table: rows as data ------------------------------------------------------------------

#: A cell's value from one variant's results and the run's settings.
Getter = Callable[[Mapping[str, Any], Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Row:
    """One line of the table: a value for each variant, and maybe its ratio to the baseline.

    `label` is formatted with `_context(settings)` (e.g. `{q:g}`: the queued scenario's minutes).
    """

    label: str
    get: Getter
    fmt: str = "d"
    ratio: str | None = None  # a key of results["ratios"]


@dataclass(frozen=True)
class Section:
    """A numbered block of rows under a title (formatted like the row labels)."""

    title: str
    rows: tuple[Row, ...]


def _figure(label: str, name: str, fmt: str) -> Row:
    """A row showing FIGURES[name] and its ratio to the baseline."""
    return Row(label, lambda v, _s: FIGURES[name](v), fmt, name)


def _at(*keys: str | int) -> Getter:
    """The value at `keys` in a variant's results (None if any step is missing)."""
    return lambda v, _s: _dig(v, *keys)


def _past(index: int, key: str) -> Getter:
    """A field of the `index`-th trial past the concurrency limit."""
    return lambda v, _s: _dig(v, "concurrency", "past_limit", index, key)


def _peak_at_max(variant: Mapping[str, Any], _settings: Mapping[str, Any]) -> Any:
    best = variant["concurrency"]["max_coordinators"]
    tried = (t for t in variant["concurrency"]["tried"] if t["n"] == best)
    return next((t["peak_window_counted"] for t in tried), None)


_PAST_FIELDS = (
    ("  past it #{n}: N at once", "n"),
    ("    coordinator runs (N x generations)", "coordinators"),
    ("    ended well", "ended_well"),
    ("    rate-limit replies (403)", "rate_limited_replies"),
    ("    recovered after a rate-limit reply", "recovered_after_rate_limit"),
    ("    failed", "failed"),
    ("    ...of which with a RateLimited error", "failed_rate_limited"),
    ("    cleanup unconfirmed", "cleanup_unconfirmed"),
    ("    children left queued/running after it ended", "children_outliving_coordinator"),
)

SECTIONS: tuple[Section, ...] = (
    Section(
        "1. API requests (counted = against the primary limit; 304s are free)",
        (
            _figure(
                "  queued ({q:g}-min queue): counted/coordinator-hour",
                "queued_counted_per_hour",
                ".1f",
            ),
            _figure(
                "  queued: whole run (start, queue, cancel): counted/hour",
                "queued_run_counted_per_hour",
                ".1f",
            ),
            Row(
                "  queued: reads sent per minute (304s included)",
                _at("scenarios", "queued", "queued", "sent_per_minute"),
                ".2f",
            ),
            _figure(
                "  executing ({e:g}-min job): counted/coordinator-hour",
                "executing_counted_per_hour",
                ".1f",
            ),
            _figure(
                "  fallback (2 x {fb:g}-min timeouts, then runs): counted/hour",
                "fallback_counted_per_hour",
                ".1f",
            ),
            _figure("  fallback sequence: counted requests", "fallback_counted", "d"),
            _figure("  fallback sequence: requests sent", "fallback_sent", "d"),
            _figure("  fallback sequence: 304 Not Modified", "fallback_not_modified", "d"),
            Row(
                "  fallback sequence: virtual minutes",
                lambda v, _s: v["scenarios"]["fallback"]["seconds"] / 60,
                ".1f",
            ),
            _figure(
                "  realistic mix (at each one's max N): counted/hour",
                "mix_counted_per_hour",
                ".1f",
            ),
        ),
    ),
    Section(
        "2. Deadline precision (virtual s; every timeout of the single runs: queued, fallback, "
        "and queues of {minutes} min)",
        (
            Row("  queue timeouts measured", _at("deadline", "cancel_after_deadline_s", "count")),
            _figure("  deadline -> cancel POST, max", "cancel_after_deadline_max_s", ".2f"),
            _figure("  deadline -> cancel POST, mean", "cancel_after_deadline_mean_s", ".2f"),
            _figure(
                "  cancel POST -> confirmed cancelled, max", "cancel_to_confirmed_max_s", ".2f"
            ),
            _figure("  confirmed -> next dispatch, max", "confirmed_to_next_dispatch_max_s", ".2f"),
            Row(
                "  in the concurrency mix at max N: timeouts measured",
                _at("deadline_mix_at_max", "cancel_after_deadline_s", "count"),
            ),
            Row(
                "  in the concurrency mix at max N: deadline -> cancel, max",
                _at("deadline_mix_at_max", "cancel_after_deadline_s", "max"),
                ".2f",
            ),
        ),
    ),
    Section(
        "3. Concurrency in one repository ({quota} requests/hour; mix {mix}: "
        "Q queued, E executing, F falling back)",
        (
            _figure(
                "  max N at once ({gens} in a row each), all end well, no 403",
                "max_concurrent_coordinators",
                "d",
            ),
            Row("  ...first N tried that hit the limit", _at("concurrency", "first_failing")),
            Row(
                "  steady-state estimate: quota / mix counted per hour",
                steady_state,
                "d",
                "steady_state_estimate",
            ),
            Row("  ...counted requests in the fullest quota window", _peak_at_max),
            *(
                Row(label.format(n=index + 1), _past(index, key))
                for index in range(2)
                for label, key in _PAST_FIELDS
            ),
        ),
    ),
    Section(
        "4. Cost of the coordinator itself (real time)",
        (
            _figure(
                "  CPU s per simulated coordinator-hour (all, incl. fake)",
                "cpu_per_coordinator_hour_s",
                ".4f",
            ),
            _figure(
                "  CPU s per simulated coordinator-hour (fake excluded)",
                "cpu_without_fake_per_coordinator_hour_s",
                ".4f",
            ),
        ),
    ),
)

#: (title, scenario, breakdown, keys): counted / 304s per phase or endpoint, after the table.
BREAKDOWNS = (
    (
        "Counted requests by the rule they serve, fallback sequence (counted / 304s):",
        "fallback",
        "by_phase",
        PHASES,
    ),
    (
        "Counted requests by endpoint, queued scenario ({q:g}-min queue; counted / 304s):",
        "queued",
        "by_endpoint",
        ENDPOINTS,
    ),
)
_LABEL = 58  # label column width; the variant columns follow
_HEAD = (
    f"{'':58}{'ours':>11}{'ours-no-ETag':>14}{'baseline':>11}{'ours/base':>11}{'noETag/base':>12}"
)


# -- the table: walking the rows --------------------------------------------------------------


def render(results: Mapping[str, Any]) -> str:
    """The printed table: every figure for the three variants, with ratios to the baseline."""
    settings = results["settings"]
    context = _context(settings)
    mode = "QUICK (short horizons, quota 100/h)" if settings["quick"] else "full"
    title = (
        f"runner-queue-fallback bench: {mode}; fake GitHub, virtual time, "
        f"{settings['latency']:g} s per API reply, quota {settings['quota']}/h per repository"
    )
    lines = [title, _HEAD, "-" * len(_HEAD)]
    for section in SECTIONS:
        lines.append(section.title.format(**context))
        lines.extend(_row(row, results, context) for row in section.rows)
    lines += [*_cold_start(results["cold_start"]), ""]
    for title, scenario, breakdown, keys in BREAKDOWNS:
        lines.append(title.format(**context))
        lines.extend(_breakdown(results["variants"], scenario, breakdown, keys))
    lines += _older_contract(results.get("older_contract"))
    lines += ["", "Targets (ours):"]
    for target in results["targets"]:
        status = {True: "MET", False: "NOT MET", None: "n/a"}[target["met"]]
        lines.append(f"  [{status:7}] {target['target']}: {_fmt(target['value'], '.3f')}")
    if settings["quick"]:
        lines.append(
            "  (quick mode: the concurrency and sent-per-hour targets are only judged by a full run)"
        )
    return "\n".join(lines)


def _older_contract(older: Mapping[str, Any] | None) -> list[str]:
    """One line: the extra counted requests of a fallback sequence on an older server."""
    if not older:
        return []
    return [
        "",
        f"Older contract (API 2022-11-28, runs found by run-name), fallback sequence of "
        f"{older['candidates']} candidates (ours): {older['counted_2022_11_28']} counted requests "
        f"vs {older['counted_2026_03_10']} on 2026-03-10: "
        f"{older['extra_counted_per_sequence']:+d} per sequence"
        + ("" if older["success"] else " (a run did not succeed: check the JSON)"),
    ]


def _context(settings: Mapping[str, Any]) -> dict[str, Any]:
    """What row labels and titles may name: the scenarios' horizons, the quota, the mix."""
    return {
        "q": settings["queued_minutes"],
        "e": settings["executing_seconds"] / 60,
        "fb": settings["fallback_minutes"],
        "minutes": ", ".join(f"{m:g}" for m in settings["deadline_minutes"]),
        "quota": settings["quota"],
        "mix": settings["mix"],
        "gens": settings["generations"],
    }


def _row(row: Row, results: Mapping[str, Any], context: Mapping[str, Any]) -> str:
    variants, settings = results["variants"], results["settings"]
    cells = [_fmt(row.get(variants[v], settings), row.fmt) for v in VARIANTS]
    of_base = results["ratios"].get(row.ratio, {}) if row.ratio else {}
    return (
        f"{row.label.format(**context):{_LABEL}}{cells[0]:>11}{cells[1]:>14}{cells[2]:>11}"
        f"{_fmt(of_base.get('ours'), '.3f'):>11}{_fmt(of_base.get('ours-no-etag'), '.3f'):>12}"
    )


def _cold_start(cold: Mapping[str, Any]) -> list[str]:
    cli, container = cold["cli"], cold["container"]
    lines = [
        (
            f"  CLI cold start `{cli['command']}`: median {cli['median_s']:.3f} s of "
            f"{cli['runs']} (bare `python -c pass`: {cli['python_floor_median_s']:.3f} s); the "
            "original is a JavaScript action: no baseline here"
        ),
        *(
            f"  cold start `{measured['command']}`: median {measured['median_s']:.3f} s"
            for measured in cli["commands"].values()
        ),
    ]
    if "skipped" in container:
        lines.append(f"  container cold start: skipped, {container['skipped']}")
    else:
        lines.append(
            f"  container cold start `docker run --rm {container['image']} --help`: median "
            f"{container['median_s']:.3f} s of {container['runs']}"
        )
    return lines


def _breakdown(
    variants: Mapping[str, Any], scenario: str, breakdown: str, keys: Sequence[str]
) -> list[str]:
    lines = []
    for key in keys:
        cells = [
            "{counted}/{not_modified}".format(**variants[v]["scenarios"][scenario][breakdown][key])
            for v in VARIANTS
        ]
        lines.append(f"  {key:56}{cells[0]:>11}{cells[1]:>14}{cells[2]:>11}")
    return lines


def _dig(data: Any, *keys: str | int) -> Any:
    """`data[k1][k2]...`, None once a step is None or a list index is out of range."""
    for key in keys:
        if data is None or (isinstance(key, int) and key >= len(data)):
            return None
        data = data[key]
    return data


def _fmt(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if fmt == "d":
        return str(round(value))
    return format(value, fmt)
