"""docs/troubleshooting.md, and the README's five most common failures, quote what the program prints.

Each quoted message (a ```text block after `<!-- message: NAME -->`) is produced here by running
the program through `cli.main` against the fake GitHub; `...` in a quote stands for any text.
"""

from __future__ import annotations

import contextlib
import io
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import CHILD_INPUTS
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import PARENT_RUN_ID, SOURCE_REF, run_coordinator
from tests.test_guard import cli_environ, dispatch_child, make_world

ROOT = Path(__file__).resolve().parent.parent
_QUOTE = re.compile(r"<!-- message: ([\w-]+) -->\n```text\n(.*?)\n```", re.DOTALL)


#: The README's section of the failures a user meets first (the rest: docs/troubleshooting.md).
README_SECTION = "## The five most common failures"


def _quotes() -> dict[str, str]:
    """Every quote of docs/troubleshooting.md, by name."""
    text = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
    return dict(_QUOTE.findall(text))


def _readme_quotes() -> dict[str, str]:
    """The quotes of the README's five most common failures, by name."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(README_SECTION, 1)[1].split("\n## ", 1)[0]
    return dict(_QUOTE.findall(section))


def _coordinate(
    *,
    child: dict[str, object] | None = None,
    inputs: dict[str, str] | None = None,
    fault: Fault | None = None,
    spend: int = 0,
) -> str:
    clock = FakeClock()
    github = FakeGitHub(clock)
    if child is not None:
        github.add_workflow("runner-worker.yml", "main", **child)  # type: ignore[arg-type]
    sha = github.add_ref(SOURCE_REF.removeprefix("refs/"))
    github.add_parent_run(PARENT_RUN_ID)
    github.add_pool("nv-cpu-general", "linux-amd64-cpu16", runners=1)
    if fault is not None:
        github.inject(fault)
    github.spend_quota(spend)
    given = {
        "workflow": "runner-worker.yml",
        "workflow-ref": "main",
        "source-ref": SOURCE_REF,
        "source-sha": sha,
        "runner-type": "cpu",
        "runners": '[{"group":"nv-cpu-general","labels":"linux-amd64-cpu16"}]',
        "execution-timeout-minutes": "15",
        **(inputs or {}),
    }
    result = run_coordinator(github, clock, given, main=cli.main)
    return result.log


def _guard(*, request_id: str | None = None, fault: Fault | None = None) -> str:
    clock = FakeClock()
    world = make_world(clock)
    run_id = dispatch_child(world)
    with tempfile.TemporaryDirectory() as tmp:
        environ = cli_environ(world, run_id, Path(tmp))
        if request_id is not None:
            environ["INPUT_REQUEST-ID"] = request_id
        if fault is not None:
            world.inject(fault)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(["guard"], environ, clock=clock, session=world.session()) == 1
    return out.getvalue()


def _simulate(scenario: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(["simulate", scenario])
    return out.getvalue()


DEFAULT_CHILD: dict[str, object] = {}

#: How each quoted message is produced.
PRODUCERS: dict[str, Callable[[], str]] = {
    "coordinator-403": lambda: _coordinate(child=DEFAULT_CHILD, fault=Fault(kind="forbidden")),
    "coordinator-401": lambda: _coordinate(child=DEFAULT_CHILD, fault=Fault(kind="unauthorized")),
    "child-not-on-ref": lambda: _coordinate(child=None),
    "wrong-file-name": lambda: _coordinate(
        child=DEFAULT_CHILD, inputs={"workflow": "runner-wroker.yml"}
    ),
    "workflow-ref-missing": lambda: _coordinate(
        child=DEFAULT_CHILD, inputs={"workflow-ref": "mian"}
    ),
    "child-inputs": lambda: _coordinate(child={"inputs": [*CHILD_INPUTS, "extra"]}),
    "no-workflow-dispatch": lambda: _coordinate(child={"dispatchable": False}),
    "dispatch-422": lambda: _coordinate(
        child=DEFAULT_CHILD,
        fault=Fault(kind="status", status=422, method="POST", path=r"/dispatches$"),
    ),
    "queues-exhausted": lambda: _coordinate(
        child=DEFAULT_CHILD,
        inputs={"runners": '[{"group":"nv-cpu-general","labels":"linux-amd64-cpu8"}]'},
    ),
    "quota-warning": lambda: _coordinate(child=DEFAULT_CHILD, spend=960),
    "quota-refused": lambda: _coordinate(
        child=DEFAULT_CHILD, spend=960, inputs={"admission-timeout-minutes": "0"}
    ),
    "secondary-limit-warning": lambda: _coordinate(
        child=DEFAULT_CHILD,
        fault=Fault(kind="secondary_rate_limit", method="POST", path=r"/dispatches$", count=1),
    ),
    "parent-cancelled": lambda: _simulate("parent-cancelled"),
    "guard-refused": lambda: _guard(request_id="hello"),
    "guard-403": lambda: _guard(fault=Fault(kind="forbidden")),
    "guard-quota": lambda: _guard(fault=Fault(kind="primary_rate_limit", retry_after=1800)),
}


def _pattern(quote: str) -> re.Pattern[str]:
    pieces = [re.escape(piece) for piece in " ".join(quote.split()).split("...")]
    return re.compile(".*?".join(pieces))


def test_troubleshooting_covers_every_listed_failure():
    """Each failure the guide promises to explain has a quoted message, and no quote is untested."""
    assert set(_quotes()) == set(PRODUCERS)


def test_the_readme_quotes_five_of_them():
    """The README's five most common failures are quotes the guide has too, word for word."""
    quotes = _readme_quotes()
    assert len(quotes) == 5, sorted(quotes)
    full = _quotes()
    assert {name: full.get(name) for name in quotes} == quotes


@pytest.mark.parametrize("name", sorted(_readme_quotes()))
def test_the_readmes_quote_is_what_the_program_prints(name: str):
    quote = _readme_quotes()[name]
    printed = [" ".join(line.split()) for line in PRODUCERS[name]().splitlines()]
    assert any(_pattern(quote).search(line) for line in printed), (quote, printed)


@pytest.mark.parametrize("name", sorted(PRODUCERS))
def test_the_quoted_message_is_what_the_program_prints(name: str):
    """The guide's quote matches a line the program really printed (`...`: any text)."""
    quote = _quotes()[name]
    printed = [" ".join(line.split()) for line in PRODUCERS[name]().splitlines()]
    pattern = _pattern(quote)
    assert any(pattern.search(line) for line in printed), (quote, printed)
