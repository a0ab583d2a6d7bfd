"""The step summary's picture: a Mermaid `gantt` chart of the attempts, right wherever it is drawn.

GitHub draws the chart with whichever Mermaid it ships, in the viewer's browser, so the chart is
written to read the same in Mermaid 10, 11 and 12 and in every time zone:

- every time is an epoch value in milliseconds (`dateFormat x`), the start and the end of each
  task alike: Mermaid 11 reads an integer start under `dateFormat X` as milliseconds and the end
  as seconds, which put every bar at zero;
- the epoch is the first dispatch, and the axis shows seconds since the epoch (`%s`) at ticks a
  whole number of milliseconds apart (`tickInterval ...millisecond`, which d3 counts from the
  epoch): any clock format (`%H:%M`) would show the viewer's local time, 05:30 in India;
- each bar's label carries its duration, so the chart reads without the axis;
- no zero-length bar (it leaves a floating label); milestones only where something happened,
  inside the chart: a queue deadline the child was still waiting at, a runner that came as the
  coordinator stopped (the cancel/start race: no execution to draw).

`chart` is the model, in whole seconds since the first dispatch; `mermaid` writes it; the render
check (scripts/render-check) compares the model with the SVG that real Mermaid draws from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner_queue_fallback.action.attempts import Attempt, Result
from runner_queue_fallback.core.actions_io import escape_mermaid

__all__ = [
    "TITLE",
    "Bar",
    "Chart",
    "Milestone",
    "Section",
    "chart",
    "duration",
    "mermaid",
    "timeline",
]

TITLE = "Attempts (seconds since the first dispatch)"
#: Axis steps in seconds: the chart takes the smallest that gives at most MAX_TICKS intervals.
TICK_STEPS = (1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)
MAX_TICKS = 8
DAY = 86400


@dataclass(frozen=True)
class Bar:
    """A phase of an attempt, in whole seconds since the first dispatch; never zero-length."""

    label: str
    start: int
    end: int

    @property
    def length(self) -> int:
        """The bar's length in seconds (at least 1)."""
        return self.end - self.start


@dataclass(frozen=True)
class Milestone:
    """A moment that made something happen (a deadline reached, a runner with no execution)."""

    label: str
    at: int


@dataclass(frozen=True)
class Section:
    """One attempt: its title (number and pool), its bars in order, its milestones."""

    title: str
    bars: tuple[Bar, ...]
    milestones: tuple[Milestone, ...] = ()


@dataclass(frozen=True)
class Chart:
    """The picture's numbers. Its span runs from the first bar's start to the last bar's end."""

    sections: tuple[Section, ...]

    @property
    def start(self) -> int:
        """Where the axis begins: the earliest bar."""
        return min(bar.start for section in self.sections for bar in section.bars)

    @property
    def end(self) -> int:
        """Where the axis ends: the latest bar (every milestone lies inside)."""
        return max(bar.end for section in self.sections for bar in section.bars)

    @property
    def tick(self) -> int:
        """Seconds between axis labels: at most MAX_TICKS intervals over the span."""
        span = self.end - self.start
        steps = [*TICK_STEPS, *(DAY * n for n in (1, 2, 3, 6))]
        return next((step for step in steps if span <= step * MAX_TICKS), steps[-1])


def chart(result: Result) -> Chart | None:
    """The model of the picture; None when nothing was dispatched or nothing lasted a second."""
    started = [a for a in result.attempts if a.dispatched_at is not None]
    if not started:
        return None
    origin = min(a.dispatched_at for a in started if a.dispatched_at is not None)
    sections = [s for s in (_section(a, origin) for a in started) if s.bars]
    return Chart(tuple(sections)) if sections else None


def _section(a: Attempt, origin: float) -> Section:
    """One attempt's bars (zero-length ones left out) and its moments inside them.

    The moments: the queue deadline, when the child was still waiting at it; a runner that came
    as the coordinator stopped (the cancel/start race), which leaves no execution to draw.
    """
    bars = []
    for label, begin, stop in _phases(a):
        start, end = round(begin - origin), round(stop - origin)
        if end > start:
            bars.append(Bar(label, start, end))
    moments: list[tuple[str, float]] = []
    deadline = _deadline_reached(a)
    if deadline is not None:
        moments.append((f"queue deadline {a.candidate.queue_minutes:g} min", deadline))
    if a.allocated_at is not None and all(bar.label != "execution" for bar in bars):
        moments.append(("runner acquired", a.allocated_at))
    milestones = [
        Milestone(label, at)
        for label, when in moments
        if bars and bars[0].start <= (at := round(when - origin)) <= bars[-1].end
    ]
    title = f"{a.number} {a.candidate.pool_text}"
    return Section(title, tuple(bars), tuple(milestones))


def _deadline_reached(a: Attempt) -> float | None:
    """The queue deadline, when the child was still waiting for a runner when it came."""
    if a.queued_at is None or a.queue_left_at is None:
        return None
    deadline = a.queued_at + a.candidate.queue_seconds
    return deadline if a.queue_left_at >= deadline else None


def _phases(a: Attempt) -> list[tuple[str, float, float]]:
    """The phases of one attempt that have a start and an end, in order.

    startup (dispatch to the job seen), queue wait (until a runner or the cancel), cancel and
    proof (a cancel, until proven or a runner seen: the race), execution (a runner to the end).
    """
    assert a.dispatched_at is not None  # noqa: S101  # only dispatched attempts are drawn
    end = max(a.dispatched_at, a.ended_at if a.ended_at is not None else a.dispatched_at)
    seen = a.queued_at if a.queued_at is not None else a.allocated_at
    left = a.queue_left_at
    phases = [("startup", a.dispatched_at, seen if seen is not None else end)]
    if a.queued_at is not None:
        phases.append(("queue wait", a.queued_at, left if left is not None else end))
    cancelled = left is not None and (a.allocated_at is None or a.allocated_at > left)
    if cancelled and left is not None and left < end:
        phases.append(("cancel and proof", left, end if a.allocated_at is None else a.allocated_at))
    if a.allocated_at is not None:
        phases.append(("execution", a.allocated_at, end))
    return [(label, begin, max(begin, stop)) for label, begin, stop in phases]


def duration(seconds: int) -> str:
    """A whole number of seconds as a reader says it: `15 s`, `4 min 9 s`, `1 h 5 min`."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n} {unit}" for n, unit in ((hours, "h"), (minutes, "min"), (secs, "s")) if n]
    return " ".join(parts) or "0 s"


def mermaid(model: Chart) -> list[str]:
    """The fenced ```mermaid block of the chart; every label goes through `escape_mermaid`."""
    lines = [
        "```mermaid",
        "gantt",
        f"    title {TITLE}",
        "    dateFormat x",
        "    axisFormat %s",
        f"    tickInterval {model.tick * 1000}millisecond",
        "    todayMarker off",
    ]
    for section in model.sections:
        lines.append(f"    section {escape_mermaid(section.title)}")
        for bar in section.bars:
            label = escape_mermaid(f"{bar.label} {duration(bar.length)}")
            lines.append(f"    {label} :{bar.start * 1000}, {bar.end * 1000}")
        for mark in section.milestones:
            at = mark.at * 1000
            lines.append(f"    {escape_mermaid(mark.label)} :milestone, {at}, {at}")
    lines.append("```")
    return lines


def timeline(result: Result) -> list[str]:
    """The summary's lines for the chart (and a blank line); none when there is nothing to draw."""
    model = chart(result)
    return [*mermaid(model), ""] if model is not None else []
