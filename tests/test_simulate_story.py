"""What `simulate` prints agrees with what happened: each scenario's story against its own record.

The record is the fake GitHub's history of every child run (`RunHistory`) and each coordinator's
outputs; the story is the text `simulate` prints from them. Every claim the story makes about a
pool, a child, the signal or the result is checked against the record here, so a renderer that
says `queued` of a cancelled child, or a busy span other than the one given, fails.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.fake_github.model import RunHistory
from runner_queue_fallback.tools.simulate import output
from runner_queue_fallback.tools.simulate.scenarios import CatalogueEntry, load_catalogue
from runner_queue_fallback.tools.simulate.steps import Simulated, SimulationRun, simulate_entry

CATALOGUE = load_catalogue()
#: The runner's grace between its cancel signal and killing the step (SIGINT, 7.5 s, SIGTERM).
GRACE = 7.5
_EVENT = re.compile(r"^  \[(?P<at>\d\d:\d\d:\d\d)\] (?P<what>.*)$")
_CHILD = re.compile(r"^candidate (?P<n>\d+): (?P<pool>.*), child run (?P<id>\d+)$")
_POOL = re.compile(r"^(?P<pool>.+): (?P<n>\d+) runners?, (?P<busy>.*)$")
_SPAN = re.compile(r"(?P<start>\d\d:\d\d:\d\d) to (?P<end>the end|\d\d:\d\d:\d\d)")
_LOG = re.compile(r"^\[(?P<at>\d\d:\d\d:\d\d)\] (?P<text>.*)$")
#: An attempt's outcome while its child may still run: wrong once the child is over.
_IN_FLIGHT = {"dispatched", "queued", "runner allocated"}


def stamp(seconds: float) -> str:
    """Virtual seconds as the story writes them (whole seconds, HH:MM:SS)."""
    return output.stamp(seconds)[1:-1]


def seconds(text: str) -> int:
    hours, minutes, secs = (int(part) for part in text.split(":"))
    return hours * 3600 + minutes * 60 + secs


@dataclass
class Story:
    """The printed report, cut into its sections."""

    lines: list[str]

    def section(self, title: str) -> list[str]:
        """The non-empty lines of `== title ==` (the first one whose title ends so)."""
        start = next(
            i for i, line in enumerate(self.lines) if re.fullmatch(rf"== .*{title} ==", line)
        )
        end = next(
            (i for i in range(start + 1, len(self.lines)) if self.lines[i].startswith("== ")),
            len(self.lines),
        )
        return [line for line in self.lines[start + 1 : end] if line]

    def sections(self, title: str) -> list[list[str]]:
        """Every section whose title ends with `title`, in order (one per coordinator)."""
        found = []
        for index, line in enumerate(self.lines):
            if re.fullmatch(rf"== .*{title} ==", line):
                end = next(
                    (
                        i
                        for i in range(index + 1, len(self.lines))
                        if self.lines[i].startswith("== ")
                    ),
                    len(self.lines),
                )
                found.append([x for x in self.lines[index + 1 : end] if x])
        return found


def told(sim: Simulated, entry: CatalogueEntry) -> Story:
    """The text report `simulate` prints for this run (as stated: the entry's expectation)."""
    problems = [
        sim.observed(r).problems(c.expect) if c.expect else []
        for r, c in zip(sim.runs, entry.coordinators, strict=True)
    ]
    return Story(output.render(sim, entry, problems, stated=True, wall=0.0))


# -- the checks: one per kind of claim ------------------------------------------------------------


def check_pools(story: Story, sim: Simulated, entry: CatalogueEntry) -> None:
    """Each pool line names its busy spans as given, and no child got a runner inside one."""
    lines = story.section("Pools")
    assert len(lines) == len(entry.world.pools)
    for line, pool in zip(lines, entry.world.pools, strict=True):
        match = _POOL.match(line)
        assert match, line
        labels = pool.labels if isinstance(pool.labels, str) else ",".join(pool.labels)
        assert match["pool"] == f"{pool.group} / {labels}"
        assert int(match["n"]) == pool.runners
        spans = [
            (seconds(m["start"]), math.inf if m["end"] == "the end" else seconds(m["end"]))
            for m in _SPAN.finditer(match["busy"])
        ]
        assert spans == [(int(a), b if math.isinf(b) else int(b)) for a, b in pool.busy], line
        assert (match["busy"] == "free") == (not pool.busy), line
        for child in sim.world.history.values():
            if child.pool == (pool.group, _labels(pool.labels)) and child.allocated_at is not None:
                inside = [s for s in pool.busy if s[0] <= child.allocated_at < s[1]]
                assert not inside or pool.runners > 1, (
                    f"{line}: yet child {child.run_id} got a runner at {child.allocated_at}"
                )


def _labels(labels: str | tuple[str, ...]) -> tuple[str, ...]:
    return (labels,) if isinstance(labels, str) else tuple(labels)


def check_timeline(lines: list[str], children: list[RunHistory]) -> None:
    """Every child event printed happened at its printed second; every recorded one is printed."""
    printed: dict[int, list[tuple[str, str]]] = {}
    current: int | None = None
    for line in lines:
        if (child := _CHILD.match(line)) is not None:
            current = int(child["id"])
            printed[current] = []
        elif (event := _EVENT.match(line)) is not None:
            assert current is not None, line
            printed[current].append((event["at"], event["what"]))
    assert list(printed) == [c.run_id for c in children], "every child, in dispatch order"
    for history in children:
        events = printed[history.run_id]
        for at, what in events:
            assert at == _expected_at(history, what), f"child {history.run_id}: [{at}] {what}"
        kinds = {what.split(":")[0].split(" (")[0] for _, what in events}
        assert "dispatched" in kinds
        if history.cancel_requested_at is not None:
            assert "cancel requested" in kinds
        if history.allocated_at is not None:
            assert "runner allocated" in kinds
        if history.completed_at is not None:
            assert "concluded" in kinds, f"child {history.run_id} ended: the story must say so"


def _expected_at(h: RunHistory, what: str) -> str:
    """The second the record gives for a printed event (and its wording checked against it)."""
    plain = {
        "dispatched": h.dispatched_at,
        "worker job queued": h.job_queued_at,
        "cancel requested": h.cancel_requested_at,
        "guard passed, workload started": h.workload_started_at,
        "GitHub never creates its worker job": h.dispatched_at
        if math.isinf(h.job_queued_at)
        else None,
        "still running when the simulation ended": h.dispatched_at
        if h.completed_at is None
        else None,
        "guard refused: the workload never starts": h.completed_at
        if h.guard_passed is False
        else None,
    }
    if what in plain:
        at = plain[what]
    elif what.startswith("runner allocated: "):
        assert what == f"runner allocated: {h.runner}"
        at = h.allocated_at
    elif what.startswith("guard step started"):
        at = h.started_at
    elif what.startswith("concluded: "):
        runnerless = " (no runner, no step)" if h.allocated_at is None else ""
        assert what == f"concluded: {h.conclusion}{runnerless}"
        at = h.completed_at
    else:
        raise AssertionError(f"an event the record does not know: {what}")
    assert at is not None, f"printed {what!r}, which the record of child {h.run_id} does not hold"
    return stamp(at)


def check_attempts(run: SimulationRun, children: list[RunHistory]) -> None:
    """A child over before the main step ended is not listed as waiting or running."""
    ended = run.log_lines[-1][0] if run.log_lines else 0.0
    by_id = {c.run_id: c for c in children}
    for attempt in json.loads(run.outputs.get("attempts-json") or "[]"):
        child = by_id.get(attempt.get("run-id"))
        if child is None or child.completed_at is None or child.completed_at > ended:
            continue
        said = (
            f"cleanup confirmed: child run {child.run_id} is completed",
            f"Polling finished: child {child.run_id} ",
            f"Confirmed: child {child.run_id} ended",
        )
        if any(text in run.log for text in said):  # the main step saw it over
            assert attempt["outcome"] not in _IN_FLIGHT, (
                f"child {child.run_id} concluded {child.conclusion} at {child.completed_at}, "
                f"listed {attempt['outcome']!r}"
            )


def check_signal(story: Story, run: SimulationRun, entry: CatalogueEntry, sim: Simulated) -> None:
    """The SIGTERM is shown at its second, and the main step's cleanup came within the grace."""
    at = entry.interrupt_at
    if at is None:
        return
    assert f"[{stamp(at)}] runner: SIGTERM to the coordinator's main step" in story.lines
    for child in sim.children(run):
        if child.cancel_requested_at is not None:
            assert at <= child.cancel_requested_at <= at + GRACE, "cancelled within the grace"
    stamped = [
        (seconds(m["at"]), m["text"]) for m in map(_LOG.match, story.section("Main step log")) if m
    ]
    confirmed = [t for t, text in stamped if text.startswith("cleanup confirmed")]
    signal = [t for t, text in stamped if "received SIGTERM" in text]
    assert signal, "the main step says it received the signal"
    assert all(at <= t <= at + GRACE for t in signal + confirmed), stamped


def check_result(story: Story, sim: Simulated, entry: CatalogueEntry) -> None:
    """Expected line, exit codes, verdict and outputs as the runs had them."""
    assert story.lines[0] == f"Scenario {entry.name}: {entry.description}"
    assert f"Expected: {entry.expected}" in story.lines
    result = story.section("Result")
    many = len(sim.runs) > 1
    for index, (run, spec) in enumerate(zip(sim.runs, entry.coordinators, strict=True)):
        who = f"coordinator {index + 1}: " if many else ""
        assert f"{who}exit code {run.exit_code}, post step exit code {run.post_exit_code}" in result
        assert spec.expect is not None
        verdict = f"  as expected: {spec.expect.describe()}"
        assert (verdict in result) == (not sim.observed(run).problems(spec.expect))
    for run, outputs in zip(sim.runs, story.sections("utputs"), strict=True):
        assert outputs == [f"{k}: {v}" for k, v in run.outputs.items()]


def check_story(sim: Simulated, entry: CatalogueEntry) -> None:
    """Every claim of the printed report, against the record."""
    story = told(sim, entry)
    check_pools(story, sim, entry)
    timelines = story.sections(r"imeline \(virtual time\)")
    for run, timeline in zip(sim.runs, timelines, strict=True):
        check_timeline(timeline, sim.children(run))
        check_attempts(run, sim.children(run))
        check_signal(story, run, entry, sim)
    check_result(story, sim, entry)


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_every_scenarios_printed_story_agrees_with_its_event_record(name: str):
    entry = CATALOGUE[name]
    check_story(simulate_entry(entry, main=cli.main), entry)


# -- the signal: at its own second, the cleanup within the runner's grace -------------------------


def test_parent_cancelled_shows_the_cancel_within_the_grace_of_the_signal():
    """SIGTERM at 135 s lands in a 200 s poll sleep: the cancel follows at once, not at 215 s."""
    entry = CATALOGUE["parent-cancelled"]
    assert entry.interrupt_at == 135
    sim = simulate_entry(entry, main=cli.main)
    [child] = sim.children(sim.runs[0])
    assert child.cancel_requested_at is not None
    assert 135 <= child.cancel_requested_at <= 135 + GRACE
    assert child.completed_at is not None
    assert child.completed_at <= 135 + GRACE
    assert child.conclusion == "cancelled"
    [attempt] = json.loads(sim.runs[0].outputs["attempts-json"])
    assert attempt["outcome"] == "run cancelled, worker cancelled"


# -- stories recomputed from flags: as given, and as it went ---------------------------------------


def _custom(*flags: str) -> tuple[int, str]:
    """`simulate` with only flags, as a person would run it."""
    import contextlib  # noqa: PLC0415  # only here
    import io  # noqa: PLC0415  # only here

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["simulate", "--runner-type", "cpu", *flags], {})
    return code, out.getvalue()


def test_a_busy_duration_is_told_as_given_not_as_the_queue_deadline():
    """--busy cpu16=40m: busy until 40 min (past its 10 min deadline), and so it went."""
    code, text = _custom("--busy", "linux-amd64-cpu16=40m", "--json")
    assert code == 0
    document = json.loads(text)
    story = document["description"]
    assert "linux-amd64-cpu16 has no free runner until 40 min into the run" in story
    assert "after its 10 min queue deadline" in story
    assert "for 10 min" not in story
    [coordinator] = document["coordinators"]
    assert coordinator["served-by"] == "linux-amd64-cpu8"
    code, text = _custom("--busy", "linux-amd64-cpu16=40m")
    assert "nv-cpu-general / linux-amd64-cpu16: 1 runner, no free runner 00:00:00 to 00:40:00" in (
        text.splitlines()
    )


def test_a_pool_never_free_is_told_so():
    code, text = _custom("--busy", "linux-amd64-cpu16=always")
    assert code == 0
    assert "linux-amd64-cpu16 never has a free runner, so its 10 min queue deadline passes" in text


@pytest.mark.parametrize(
    ("busy", "went"),
    [
        ("9.5m", "linux-amd64-cpu16 freed its runner before its queue deadline"),
        ("11m", "the queue deadline came first: linux-amd64-cpu16's child was cancelled"),
    ],
)
def test_a_near_deadline_busy_runs_and_says_which_way_it_went(busy: str, went: str):
    """Too close to call is no refusal: it runs, says the timing decides, and how it decided."""
    code, text = _custom("--busy", f"linux-amd64-cpu16={busy}")
    assert code == 0
    assert "cannot be stated in advance" not in text.splitlines()[0]
    assert "depends on the timing" in text.splitlines()[0]
    assert "Expected: cannot be stated in advance, the outcome depends on the timing" in text
    [decided] = [line for line in text.splitlines() if line.startswith("  the timing decided: ")]
    assert went in decided
    code, document = _custom("--busy", f"linux-amd64-cpu16={busy}", "--json")
    [coordinator] = json.loads(document)["coordinators"]
    assert coordinator["expected"] is None
    assert went in coordinator["timing"]["went"]
    served = "linux-amd64-cpu16" if "before" in went else "linux-amd64-cpu8"
    assert coordinator["served-by"] == served, "which way it went is what happened"
