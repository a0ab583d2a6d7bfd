"""The step summary's Mermaid timeline: its model and the chart written from it, without a browser.

The browser half (what Mermaid 10, 11 and 12 draw from it) is scripts/render-check, a CI stage.
`bars_in` reads a summary's chart back for the tests of other rules.
"""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner_queue_fallback.action.attempts import Attempt, Result
from runner_queue_fallback.action.timeline import (
    MAX_TICKS,
    Chart,
    chart,
    duration,
    mermaid,
    timeline,
)
from runner_queue_fallback.core.profiles import Candidate
from tests.test_coordinator import FOREVER, Scenario

_TASK = re.compile(
    r"^    (?P<label>[A-Za-z0-9 ._/()+=@-]+?) :(?P<milestone>milestone, )?(?P<start>\d+), (?P<end>\d+)$"
)


def bars_in(summary: str) -> list[tuple[int, str, float, float]]:
    """Every task of a summary's chart: (attempt number, label, start s, end s), in order."""
    block = summary.split("```mermaid\n", 1)[1].split("```", 1)[0]
    tasks, number = [], 0
    for line in block.splitlines():
        if line.startswith("    section "):
            number = int(line.split()[1])
        elif match := _TASK.match(line):
            start, end = int(match["start"]) / 1000, int(match["end"]) / 1000
            tasks.append((number, match["label"], start, end))
    return tasks


def bar(summary: str, number: int, phase: str) -> tuple[float, float]:
    """The one bar of attempt `number` whose label begins with `phase`: (start s, end s)."""
    [found] = [
        (s, e) for n, label, s, e in bars_in(summary) if n == number and label.startswith(phase)
    ]
    return found


def attempt(number: int = 1, queue_minutes: float = 10.0, **times: float) -> Attempt:
    """An attempt of a hand-made ledger, with the given times (seconds)."""
    a = Attempt(number, Candidate("grp", f"pool{number}", queue_minutes, "pool"), f"rqf-{number}")
    for name, value in times.items():
        setattr(a, name, value)
    return a


def model(*attempts: Attempt) -> Chart:
    drawn = chart(Result(attempts=list(attempts)))
    assert drawn is not None
    return drawn


def fallback() -> Result:
    """Attempt 1 cancelled at its 10-minute deadline; attempt 2 runs at once (a 0 s queue wait)."""
    first = attempt(1, dispatched_at=100.0, queued_at=115.0, queue_left_at=715.0, ended_at=720.0)
    second = attempt(
        2, dispatched_at=720.0, queued_at=726.0, queue_left_at=726.0, allocated_at=726.0
    )
    second.ended_at = 975.0
    return Result(attempts=[first, second])


def test_times_are_seconds_since_the_first_dispatch_and_bars_follow_the_phases():
    drawn = chart(fallback())
    assert drawn is not None
    bars = [[(b.label, b.start, b.end) for b in s.bars] for s in drawn.sections]
    assert bars == [
        [("startup", 0, 15), ("queue wait", 15, 615), ("cancel and proof", 615, 620)],
        [("startup", 620, 626), ("execution", 626, 875)],
    ]
    assert (drawn.start, drawn.end) == (0, 875)


def test_no_bar_is_zero_length():
    """A zero-length bar leaves a floating label: the 0 s queue wait of attempt 2 is not drawn."""
    drawn = chart(fallback())
    assert drawn is not None
    assert all(b.end > b.start for s in drawn.sections for b in s.bars)
    assert "queue wait 0 s" not in "\n".join(timeline(fallback()))


def test_a_deadline_is_marked_where_the_child_was_still_waiting_for_a_runner():
    drawn = chart(fallback())
    assert drawn is not None
    assert [(m.label, m.at) for m in drawn.sections[0].milestones] == [
        ("queue deadline 10 min", 615)
    ]


def test_a_deadline_after_the_runner_came_is_not_marked():
    """The winner's deadline lies after its job ended: marking it would stretch the chart."""
    drawn = chart(fallback())
    assert drawn is not None
    assert drawn.sections[1].milestones == ()
    assert drawn.end == 875  # not the winner's deadline at 1226 s
    # nor one that falls inside the execution: nothing happened at 615 s
    ran = attempt(1, dispatched_at=0.0, queued_at=15.0, queue_left_at=300.0, allocated_at=300.0)
    ran.ended_at = 900.0
    assert model(ran).sections[0].milestones == ()


def test_a_deadline_that_never_came_is_not_marked():
    """Cancelled for another reason (the source moved) 15 minutes into a 30-minute deadline."""
    a = attempt(1, 30.0, dispatched_at=0.0, queued_at=15.0, queue_left_at=915.0, ended_at=920.0)
    assert model(a).sections[0].milestones == ()


def test_a_runner_that_came_as_the_coordinator_stopped_is_marked():
    """The cancel/start race: the runner's arrival ends the attempt, no execution to draw."""
    a = attempt(1, dispatched_at=0.0, queued_at=15.0, queue_left_at=615.0, ended_at=620.0)
    a.allocated_at = 620.0
    section = model(a).sections[0]
    assert [b.label for b in section.bars] == ["startup", "queue wait", "cancel and proof"]
    assert [(m.label, m.at) for m in section.milestones] == [
        ("queue deadline 10 min", 615),
        ("runner acquired", 620),
    ]


def test_a_runner_with_an_execution_to_draw_is_no_milestone():
    drawn = chart(fallback())
    assert drawn is not None
    assert [m.label for m in drawn.sections[1].milestones] == []


def test_an_attempt_with_nothing_that_lasted_a_second_draws_no_section():
    late = attempt(2, dispatched_at=50.0, ended_at=50.2)
    drawn = model(
        attempt(1, dispatched_at=0.0, queued_at=5.0, queue_left_at=50.0, ended_at=50.0), late
    )
    assert [s.title for s in drawn.sections] == ["1 grp / pool1"]


def test_nothing_dispatched_draws_no_chart():
    assert chart(Result()) is None
    assert timeline(Result(attempts=[attempt(1)])) == []


def test_every_time_is_an_epoch_value_in_milliseconds_start_and_end_alike():
    """Mermaid 11 reads an integer start under `dateFormat X` as ms and an end as seconds."""
    lines = timeline(fallback())
    assert lines[0] == "```mermaid"
    assert "    dateFormat x" in lines
    tasks = [match for line in lines if (match := _TASK.match(line))]
    assert len(tasks) == 6  # 5 bars and 1 milestone
    assert tasks[1]["start"] == "15000"
    assert tasks[1]["end"] == "615000"


def test_the_axis_shows_seconds_since_the_epoch_never_a_clock_time():
    """A clock format (%H:%M) is drawn in the viewer's time zone: 05:30 in India."""
    lines = timeline(fallback())
    assert "    axisFormat %s" in lines
    assert "    todayMarker off" in lines
    [tick] = [line for line in lines if line.startswith("    tickInterval ")]
    # d3 counts millisecond intervals from the epoch, hour and minute ones in local time
    assert re.fullmatch(r"    tickInterval [1-9]\d*000millisecond", tick)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (5, "5 s"),
        (60, "1 min"),
        (249, "4 min 9 s"),
        (3600, "1 h"),
        (3903, "1 h 5 min 3 s"),
    ],
)
def test_a_bar_label_carries_its_duration_as_a_person_says_it(seconds, text):
    assert duration(seconds) == text


def test_the_written_chart_says_what_the_model_says():
    result = fallback()
    drawn = chart(result)
    assert drawn is not None
    assert bars_in("\n".join(timeline(result))) == written(drawn)
    assert written(drawn)[1] == (1, "queue wait 10 min", 15, 615)


def written(drawn: Chart) -> list[tuple[int, str, float, float]]:
    """What `bars_in` should read back from the chart of `drawn`: its numbers, and durations."""
    tasks: list[tuple[int, str, float, float]] = []
    for section in drawn.sections:
        number = int(section.title.split()[0])
        tasks += [(number, f"{b.label} {duration(b.length)}", b.start, b.end) for b in section.bars]
        tasks += [(number, m.label, m.at, m.at) for m in section.milestones]
    return tasks


#: Each phase boundary of an attempt, as increments (seconds) after the one before.
_STEPS = st.floats(0.0, 4000.0, allow_nan=False)


@st.composite
def ledgers(draw: st.DrawFn) -> Result:
    """Attempts one after another, each with the phases it reached, in time order."""
    result, now = Result(), draw(_STEPS)
    for number in range(1, draw(st.integers(1, 5)) + 1):
        a = attempt(number, draw(st.sampled_from([1.0, 10.0, 15.0])), dispatched_at=now)
        reached = draw(st.integers(0, 3))  # queued, left the queue, a runner
        names = ["queued_at", "queue_left_at", "allocated_at"][:reached]
        for name in names:
            now += draw(_STEPS)
            setattr(a, name, now)
        now += draw(_STEPS)
        a.ended_at = now
        result.attempts.append(a)
    return result


@settings(max_examples=200)  # a property of a small pure function: the suite's budget
@given(ledgers())
def test_any_ledger_draws_no_zero_length_bar_and_every_milestone_inside_the_span(result):
    drawn = chart(result)
    if drawn is None:  # nothing lasted a second
        return
    for section in drawn.sections:
        assert section.bars
        assert all(b.end > b.start for b in section.bars)
        assert all(drawn.start <= m.at <= drawn.end for m in section.milestones)
        assert all(
            later.start >= earlier.start for earlier, later in itertools.pairwise(section.bars)
        )
    assert (drawn.end - drawn.start) <= drawn.tick * MAX_TICKS or drawn.tick >= 6 * 86400
    assert bars_in("\n".join(mermaid(drawn))) == written(drawn)


def test_the_summary_of_a_fallback_draws_the_coordinators_own_times():
    """Through `cli.main` against the fake GitHub: attempt 1 waits its deadline, 2 runs."""
    s = Scenario().pools(FOREVER, [], [])
    result = s.run()
    assert result.exit_code == 0
    assert bar(result.summary, 1, "queue wait") == (15.0, 615.0)
    assert ("queue deadline 10 min", 615.0) in [(t[1], t[2]) for t in bars_in(result.summary)]
    assert not [
        t for t in bars_in(result.summary) if t[0] == 2 and t[1].startswith("queue deadline")
    ]
