"""The step summary's timeline drawn by real Mermaid in a real browser (scripts/render-check runs it).

For each simulator scenario it takes the step summary the coordinator wrote, and the chart model
(`runner_queue_fallback.action.timeline.chart`) of the same run, caught on its way into the summary.
Each pinned mermaid-cli under scripts/render/mermaid-*/ renders the summary's ```mermaid blocks
to SVG through Debian's headless Chromium, once under TZ=UTC and once under TZ=Asia/Kolkata.
From each SVG it reads every task's rectangle and the axis, and asserts:

- each bar's start and length, and each milestone's place, as a fraction of the axis span, within
  1 % of the model's numbers;
- each axis label (seconds since the first dispatch) sits where its number says, within 1 %;
- the axis labels are the same under both time zones.

It prints the bundled Mermaid version (node_modules/mermaid/package.json: a pinned mermaid-cli
alone does not pin Mermaid) and one line per scenario; exit 1 when anything disagrees.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner_queue_fallback import cli  # noqa: E402  # after the checkout is on the path
from runner_queue_fallback.action import summary  # noqa: E402  # after the checkout is on the path
from runner_queue_fallback.action.timeline import Chart, chart  # noqa: E402  # same
from runner_queue_fallback.tools.simulate.scenarios import load_catalogue  # noqa: E402  # same
from runner_queue_fallback.tools.simulate.steps import simulate_entry  # noqa: E402  # same

RENDER = ROOT / "scripts" / "render"
CHROMIUM = json.loads((RENDER / "puppeteer.json").read_text())["executablePath"]
SCENARIOS = ("fallback", "gpu-extended-rewait", "exhaustion", "queue-start-race")
ZONES = ("UTC", "Asia/Kolkata")
TOLERANCE = 0.01
SVG = "{http://www.w3.org/2000/svg}"
_BLOCK = re.compile(r"^```mermaid\n(.*?)^```$", re.DOTALL | re.MULTILINE)
_TRANSLATE = re.compile(r"translate\(\s*([-\d.]+)")
_DOMAIN = re.compile(r"^M([-\d.]+),[-\d.]+V[-\d.]+H([-\d.]+)")
_TASK_ID = re.compile(r"task(\d+)$")


@dataclass(frozen=True)
class Drawn:
    """What one SVG shows: each task's left edge and width, and the axis, in pixels."""

    tasks: dict[int, tuple[float, float, bool]]  # task number -> (x, width, is a milestone)
    left: float  # where the axis begins
    width: float  # the axis span
    ticks: list[tuple[float, str]]  # each axis label's place and text


@dataclass(frozen=True)
class Expected:
    """The model's numbers for one task, as fractions of the axis span."""

    name: str
    start: float
    length: float
    milestone: bool


def scenario_chart(name: str) -> tuple[str, Chart]:
    """Run one catalogue scenario; its summary's Mermaid block and the model it was written from."""
    with mock.patch.object(summary, "timeline", wraps=summary.timeline) as spy:
        simulated = simulate_entry(load_catalogue()[name], main=cli.main)
    if spy.call_count != 1:
        raise SystemExit(f"{name}: the summary was written {spy.call_count} times, not once")
    model = chart(spy.call_args.args[0])
    blocks = _BLOCK.findall(simulated.runs[0].summary)
    if model is None or len(blocks) != 1:
        raise SystemExit(f"{name}: expected one chart in the summary, found {len(blocks)}")
    return blocks[0], model


def expected(model: Chart) -> list[Expected]:
    """Every task in the order the chart writes them (bars, then milestones, per section)."""
    origin, span = model.start, model.end - model.start
    tasks = []
    for section in model.sections:
        tasks += [
            Expected(
                f"{section.title}: {b.label}",
                (b.start - origin) / span,
                b.length / span,
                milestone=False,
            )
            for b in section.bars
        ]
        tasks += [
            Expected(f"{section.title}: {m.label}", (m.at - origin) / span, 0.0, milestone=True)
            for m in section.milestones
        ]
    return tasks


def read_svg(path: Path) -> Drawn:
    """The tasks' rectangles and the time axis (`g.grid`: its domain path and ticks) of a gantt SVG."""
    root = ET.parse(path).getroot()  # noqa: S314  # our own renderer's output, not outside input
    tasks = {}
    for rect in root.iter(f"{SVG}rect"):
        classes = rect.get("class", "").split()
        number = _TASK_ID.search(rect.get("id", ""))
        if "task" in classes and number:
            x, width = float(rect.get("x", "nan")), float(rect.get("width", "nan"))
            tasks[int(number[1])] = (x, width, "milestone" in classes)
    grid = next(g for g in root.iter(f"{SVG}g") if "grid" in g.get("class", "").split())
    shift = _translate(grid)
    domain = next(p for p in grid.iter(f"{SVG}path") if p.get("class") == "domain")
    match = _DOMAIN.match(domain.get("d", ""))
    if match is None:
        raise ValueError(f"{path.name}: unexpected axis path {domain.get('d')!r}")
    begin, end = float(match[1]), float(match[2])
    ticks = [
        (_translate(tick) - begin, "".join(tick.itertext()).strip())
        for tick in grid.iter(f"{SVG}g")
        if tick.get("class") == "tick"
    ]
    return Drawn(tasks, shift, end - begin, ticks)


def _translate(element: ET.Element) -> float:
    match = _TRANSLATE.search(element.get("transform", ""))
    return float(match[1]) if match else 0.0


def compare(drawn: Drawn, model: Chart) -> list[str]:
    """Where the SVG disagrees with the model by more than TOLERANCE of the axis span."""
    problems = []
    wanted = expected(model)
    if sorted(drawn.tasks) != list(range(1, len(wanted) + 1)):
        return [f"{len(drawn.tasks)} tasks drawn, {len(wanted)} in the chart"]
    for number, task in enumerate(wanted, start=1):
        x, width, milestone = drawn.tasks[number]
        if milestone != task.milestone:
            problems.append(f"{task.name}: drawn as {'a milestone' if milestone else 'a bar'}")
            continue
        start = (x + width / 2 if milestone else x) - drawn.left
        pairs = [("start", start / drawn.width, task.start)]
        if not milestone:
            pairs.append(("length", width / drawn.width, task.length))
        problems += [
            f"{task.name}: {what} at {got:.1%} of the axis, the chart says {want:.1%}"
            for what, got, want in pairs
            if abs(got - want) > TOLERANCE
        ]
    span = model.end - model.start
    words = [label for _, label in drawn.ticks if not label.isdigit()]
    if words:
        problems.append(f"axis labels that are no number of seconds: {' '.join(words)}")
    problems += [
        f"axis label {label} s drawn at {place / drawn.width:.1%} of the axis"
        for place, label in drawn.ticks
        if label.isdigit()
        and abs(place / drawn.width - (int(label) - model.start) / span) > TOLERANCE
    ]
    return problems


def render(mmdc: Path, charts: list[str], zone: str, work: Path) -> list[Path]:
    """Render each chart (one Markdown file, one browser) under time zone `zone`; the SVG paths."""
    folder = work / f"{mmdc.parents[2].name}-{zone.replace('/', '-')}"
    folder.mkdir()
    source = folder / "summaries.md"
    source.write_text("".join(f"```mermaid\n{text}```\n\n" for text in charts), encoding="utf-8")
    config = RENDER / "puppeteer.json"
    args = [str(mmdc), "-q", "-i", str(source), "-o", str(folder / "out.md"), "-p", str(config)]
    done = subprocess.run(  # noqa: S603  # the pinned mmdc, our own arguments
        args, env={**os.environ, "TZ": zone}, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{mmdc} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return [folder / f"out-{n}.svg" for n in range(1, len(charts) + 1)]


def check_version(
    folder: Path, names: list[str], charts: list[tuple[str, Chart]], work: Path
) -> bool:
    """Render every chart with one mermaid-cli under both zones; print and return the verdict."""
    modules = folder / "node_modules"
    mermaid = json.loads((modules / "mermaid" / "package.json").read_text())["version"]
    cli_version = json.loads((modules / "@mermaid-js" / "mermaid-cli" / "package.json").read_text())
    print(f"Mermaid {mermaid} (mermaid-cli {cli_version['version']}, {folder.name})")
    mmdc = modules / ".bin" / "mmdc"
    svgs = {zone: render(mmdc, [text for text, _ in charts], zone, work) for zone in ZONES}
    ok = True
    for index, (name, (_, model)) in enumerate(zip(names, charts, strict=True)):
        drawn = {zone: read_svg(svgs[zone][index]) for zone in ZONES}
        problems = [f"{zone}: {p}" for zone in ZONES for p in compare(drawn[zone], model)]
        labels = [" ".join(label for _, label in drawn[zone].ticks) for zone in ZONES]
        same = len(set(labels)) == 1
        if not same:
            problems += [
                f"{zone}: axis labels {text}" for zone, text in zip(ZONES, labels, strict=True)
            ]
        bars = sum(len(s.bars) for s in model.sections)
        marks = sum(len(s.milestones) for s in model.sections)
        axis = (
            f"axis {labels[0]} (the same under {' and '.join(ZONES)})" if same else "axis differs"
        )
        verdict = "ok" if not problems else "FAILED"
        print(f"  {name}: {bars} bars, {marks} milestones, {axis}: {verdict}")
        for problem in problems:
            print(f"    {problem}")
        ok = ok and not problems
    return ok


def main(argv: list[str] | None = None) -> int:
    """Check every pinned renderer against every scenario's chart."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=list(SCENARIOS), help="catalogue names")
    parser.add_argument("--keep", type=Path, help="keep the SVGs in this (new) folder")
    args = parser.parse_args(argv)
    charts = [scenario_chart(name) for name in args.scenarios]
    browser = subprocess.run(  # noqa: S603  # the browser puppeteer.json names
        [CHROMIUM, "--version"], capture_output=True, text=True, check=True
    )
    print(browser.stdout.strip())
    folders = sorted(RENDER.glob("mermaid-*/"), key=lambda p: int(p.name.split("-")[1]))
    if not folders:
        raise SystemExit(f"no renderer under {RENDER}")
    with tempfile.TemporaryDirectory(prefix="rqf-render-") as temp:
        work = args.keep or Path(temp)
        work.mkdir(parents=True, exist_ok=True)
        results = [check_version(folder, args.scenarios, charts, work) for folder in folders]
    print("render check: " + ("passed" if all(results) else "FAILED"))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
