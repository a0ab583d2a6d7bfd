"""Every line the program prints, in every command and format, is escaped (issue 26, item 4), and
outside text never makes a link (issue 15).

Each test feeds outside text (a value holding `::`, line breaks and `##[`, see `PLANT`) through
every outside value one command prints: what GitHub answers (`tests.outside.plant_rule`), the
inputs a dispatcher or a workflow gives, the files `lint` reads, the flags. It then reads the
output as the runner does and asserts that no line is a workflow command the outside text made,
and that no raw line break split a value (`SPLIT`'s tails stay on the line of its head). The
last ones plant a message, a URL or a request id where one line or one link is printed, and
run the coordinator watched (`tests.scenario`, `watched=True`) or the guard through the CLI.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from runner_queue_fallback import cli
from runner_queue_fallback.core.actions_io import escape_json
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import env_name
from runner_queue_fallback.fake_github.history import Exponential, HistorySpec, PoolHistory
from runner_queue_fallback.fake_github.model import WORKER_TOKEN, FakeRun, Timings
from runner_queue_fallback.fake_github.reply import Reply
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    SOURCE_REF,
    TOKEN,
    guard_hook,
    run_coordinator,
    standard_world,
)
from runner_queue_fallback.workflow import model
from tests.outside import (
    MARKER,
    PLANTS,
    Rule,
    Tamper,
    child_run_id,
    commands_from_outside,
    error_reply,
    foreign_links,
    json_body,
    plant_rule,
    watch_stdout,
    with_json,
)
from tests.scenario import FOREVER, cancels, minute_queues
from tests.stats_support import history_world, run_stats
from tests.test_guard import cli_guard, hand_dispatch, hand_world

if TYPE_CHECKING:
    import requests

#: A value whose line breaks would split it: each tail must stay on the line of the head.
SPLIT = (
    f"{MARKER}-head\n::{MARKER}::split-n\r::{MARKER}::split-r\r\n::{MARKER}::split-rn"
    f"\u2028::{MARKER}::split-u ##[{MARKER}]"
)
_TAILS = ("split-n", "split-r", "split-rn", "split-u")
#: Outside text with every command syntax the runner knows, starting with `::` itself.
PLANT = f"::{MARKER}::start {SPLIT}{''.join(PLANTS)}"
CPU16, CPU8 = "linux-amd64-cpu16", "linux-amd64-cpu8"
GROUP = "nv-cpu-general"
#: A value that is a workflow command as it stands.
BARE = f"::{MARKER}::bare"
#: A runner group as the `runners` input may spell it: any text.
PLANTED_GROUP = f"{GROUP}{PLANT}"


def assert_no_outside_command(text: str, *, reached: bool = True) -> None:
    """No line the runner reads is a command made by outside text; no value split by a break.

    With `reached`, the outside text must be in `text` (else the test would prove nothing).
    """
    assert MARKER in text or not reached, "the outside text never reached the output"
    made = commands_from_outside(text)
    assert made == [], made
    for line in re.split(r"\r\n|\r|\n", text):
        for tail in _TAILS:
            if f"::{MARKER}::{tail}" in line:
                assert f"{MARKER}-head" in line, f"a line break split a value: {line!r}"


def capture(
    argv: list[str],
    environ: dict[str, str],
    *,
    clock: FakeClock | None = None,
    session: requests.Session | None = None,
) -> tuple[int, str]:
    """Run `cli.main` and return its exit code and everything it printed (stdout and stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), watch_stdout() as w:
        code = cli.main(argv, environ, clock=clock or FakeClock(), session=session)
    assert w.problems() == [], w.problems()
    return code, out.getvalue() + err.getvalue()


def coordinator_inputs(sha: str, group: str = PLANTED_GROUP) -> dict[str, str]:
    return {
        "workflow": "runner-worker.yml",
        "workflow-ref": "main",
        "source-ref": SOURCE_REF,
        "source-sha": sha,
        "runner-type": "cpu",
        "queue-timeout-minutes": "1",
        "execution-timeout-minutes": "5",
        "runners": json.dumps(
            [{"group": GROUP, "labels": CPU16}, {"group": group, "labels": CPU8}]
        ),
    }


def fail_cancel(number: int) -> Rule:
    """The `number`th cancel request is a 500: `plant_rule` plants its message and request id."""
    seen: list[str] = []

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        del reply, world
        if method != "POST" or not path.endswith("/cancel"):
            return None
        seen.append(path)
        if len(seen) != number:
            return None
        return error_reply(500, "boom", {"X-GitHub-Request-Id": "0400:1"})  # both planted

    return rule


# -- coordinate, cleanup and guard: GitHub's replies and the inputs -------------------------


def test_coordinate_and_its_guards_print_no_outside_command():
    """The main step falls back from a queued pool to a planted group; every string GitHub
    sends carries the plant, and a cancel fails once with a planted message."""
    clock = FakeClock()
    world, sha = standard_world(clock, FakeGitHub(clock))
    world.add_pool(GROUP, CPU16, runners=1, busy=((0.0, 10.0**9),))
    world.add_pool(PLANTED_GROUP, CPU8, runners=1)
    guard_logs: list[str] = []
    world.on_worker_start = guard_hook(world, clock, guard_logs, main=cli.main)
    Tamper(world, [fail_cancel(1), plant_rule(PLANT)]).install()
    with watch_stdout() as watch:
        result = run_coordinator(world, clock, coordinator_inputs(sha), main=cli.main)
    assert watch.problems() == [], watch.problems()
    assert "Cancel requested" in result.log
    assert guard_logs
    assert_no_outside_command(result.log)
    for log in guard_logs:  # the guard prints none of the planted strings when it passes
        assert_no_outside_command(log, reached=False)


def test_cleanup_prints_no_outside_command():
    """The post step cancels a child the signal grace could not confirm; GitHub's strings, the
    saved run URL and its error message carry the plant."""
    clock = FakeClock()
    world, sha = standard_world(clock, FakeGitHub(clock, timings=Timings(cancel_delay=20.0)))
    world.add_pool(GROUP, CPU16, runners=1, busy=((0.0, 10.0**9),))
    Tamper(world, [fail_cancel(2), plant_rule(PLANT)]).install()  # the post step's cancel
    with watch_stdout() as watch:
        result = run_coordinator(
            world, clock, coordinator_inputs(sha, GROUP), main=cli.main, interrupt_at=30.0
        )
    assert watch.problems() == [], watch.problems()
    assert "Cancel requested" in result.post_log
    assert_no_outside_command(result.post_log)


def refuse_the_parent(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
    """Every read of the parent run is a 403 whose message `plant_rule` plants."""
    del method, reply, world
    return (
        error_reply(403, "Forbidden") if path.endswith(f"/actions/runs/{PARENT_RUN_ID}") else None
    )


GUARD_INPUTS = ("request-id", "parent-run-id", "source-ref", "source-sha", "coordinator-workflow")


@pytest.mark.parametrize("planted", [None, *GUARD_INPUTS])
def test_guard_prints_no_outside_command(planted: str | None):
    """The guard of a hand-dispatched child, with one of its inputs planted (or, with none,
    every string GitHub sends)."""
    clock = FakeClock()
    world, sha = standard_world(clock, FakeGitHub(clock))
    inputs = {
        "request-id": f"rqf-{PARENT_RUN_ID}-1-1-0123abcd",
        "parent-run-id": str(PARENT_RUN_ID),
        "parent-run-attempt": "1",
        "source-ref": SOURCE_REF,
        "source-sha": sha,
        "runner": json.dumps({"group": GROUP, "labels": CPU16}),
        "workload": "{}",
    }
    run = world.dispatch("runner-worker.yml", "main", inputs)
    assert isinstance(run, FakeRun), run
    clock.sleep(10)
    guard_inputs = {k: v for k, v in inputs.items() if k not in {"runner", "workload"}}
    guard_inputs["coordinator-workflow"] = "runner-check.yml"
    if planted is None:  # the parent read fails: GitHub's message is printed
        Tamper(world, [refuse_the_parent, plant_rule(PLANT)]).install()
    else:
        guard_inputs[planted] = f"{guard_inputs[planted]}{PLANT}"
    environ = {
        "GITHUB_RUN_ID": str(run.id),
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "GITHUB_SERVER_URL": world.server_url,
        env_name("token"): WORKER_TOKEN,
        **{env_name(k): v for k, v in guard_inputs.items()},
    }
    code, out = capture(["guard"], environ, clock=clock, session=world.session())
    assert code != 0, out  # a planted value is refused (exit 2 for an input)
    assert_no_outside_command(out)


# -- preflight and plan: the inputs, and GitHub's replies --------------------------------


def test_preflight_prints_no_outside_command():
    """Preflight with a planted group, every GitHub string planted, and a refused ref lookup."""
    clock = FakeClock()
    world, sha = standard_world(clock, FakeGitHub(clock))
    world.add_pool(GROUP, CPU16, runners=1)

    def refuse_the_ref(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        del method, reply, world
        return error_reply(404, "Not Found") if "/git/ref" in path else None

    Tamper(world, [refuse_the_ref, plant_rule(PLANT)]).install()
    environ = {env_name(k): v for k, v in coordinator_inputs(sha).items()}
    environ |= {
        env_name("token"): TOKEN,
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "GITHUB_RUN_ID": str(PARENT_RUN_ID),
        "GITHUB_RUN_ATTEMPT": "1",
    }
    code, out = capture(["preflight"], environ, clock=clock, session=world.session())
    assert code == 1, out
    assert_no_outside_command(out)


@pytest.mark.parametrize("fmt", [[], ["--json"]], ids=["text", "json"])
def test_plan_prints_no_outside_command(fmt: list[str]):
    """`plan` prints each candidate's group and labels, which the `runners` input gives.

    Before: the text table printed them raw; a group holding `\\n::error::` was a command.
    """
    runners = [{"group": PLANTED_GROUP, "labels": [CPU16, PLANT]}]
    code, out = capture(
        ["plan", "--runner-type", "cpu", "--runners", json.dumps(runners), *fmt], {}
    )
    assert code == 0, out
    assert_no_outside_command(out)
    if fmt:
        assert json.loads(out)["candidates"][0]["group"] == PLANTED_GROUP  # JSON reads the same


def test_a_bad_flag_value_is_quoted_as_one_line():
    """argparse quotes the command line in its errors: an argument holding a command is text."""
    code, out = capture(["plan", PLANT], {})
    assert code == 2
    assert_no_outside_command(out)


# -- lint: the workflow files ------------------------------------------------------------


def _yaml(value: str) -> str:
    """`value` as a YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(value)


def lint_files(tmp: Path) -> list[Path]:
    """A coordinator whose values hold the plant, its child, and a file that is not YAML."""
    coordinator = tmp / "coordinator.yml"
    coordinator.write_text(
        "on: workflow_dispatch\n"
        "jobs:\n"
        "  run:\n"
        "    runs-on: ubuntu-latest\n"
        "    steps:\n"
        f"      - uses: {_yaml('nvidia/runner-queue-fallback@' + PLANT)}\n"
        "        with:\n"
        f"          workflow: {_yaml('runner-worker.yml' + PLANT)}\n"
        f"          workflow-ref: {_yaml(PLANT)}\n"
        f"          runner-type: {_yaml(PLANT)}\n"
        f"          queue-timeout-minutes: {_yaml(PLANT)}\n"
        f"          {_yaml('unknown' + PLANT)}: x\n"
    )
    broken = tmp / "broken.yml"
    broken.write_text(f"on: [\n{PLANT.replace(chr(10), ' ').replace(chr(13), ' ')}: ]]\n")
    return [coordinator, broken]


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_lint_prints_no_outside_command(tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch):
    """`lint` quotes the workflow's values in findings; a YAML error in a planted file is safe too.

    Before (text): a value holding `\\n::error ...` became a workflow command, and `##[`
    survived. PyYAML's own loader is used: its errors quoted the line (libyaml's do not). Since
    issue 48 a YAML error says its line and column and quotes nothing of the file but one
    character, so the plant need not reach the output there.
    """
    monkeypatch.setattr(model, "_LOADER", yaml.SafeLoader)
    coordinator, broken = lint_files(tmp_path)
    code, out = capture(["lint", "--format", fmt, str(coordinator)], {})
    assert code == 1, out
    assert_no_outside_command(out)
    code, out = capture(["lint", "--format", fmt, str(broken)], {})
    assert code == 1, out
    assert "RQF000" in out
    assert_no_outside_command(out, reached=False)


def test_lint_prints_no_outside_command_from_a_file_name(tmp_path: Path):
    """A path on the command line (a file name may hold a line break) is one line too."""
    missing = tmp_path / f"x{SPLIT}.yml"
    code, out = capture(["lint", str(missing)], {})
    assert code == 2
    assert_no_outside_command(out)


# -- simulate: the flags -----------------------------------------------------------------


@pytest.mark.parametrize("fmt", [[], ["--json"]], ids=["text", "json"])
def test_simulate_prints_no_outside_command(fmt: list[str]):
    """`simulate` with a planted group: the step logs it renders, the pools and the timeline.

    Before: an annotation's `%0A` was decoded into a line of its own, and the pool and timeline
    lines printed the group raw.
    """
    runners = json.dumps([{"group": PLANTED_GROUP, "labels": CPU16}])
    code, out = capture(["simulate", "--runner-type", "cpu", "--runners", runners, *fmt], {})
    assert code == 0, out
    assert_no_outside_command(out)


def test_simulate_errors_print_no_outside_command():
    """A `--busy` naming no pool is quoted in the error, as is the scenario name."""
    code, out = capture(["simulate", "--runner-type", "cpu", "--busy", f"{PLANT}=5m"], {})
    assert code == 2, out
    assert_no_outside_command(out)
    code, out = capture(["simulate", PLANT], {})
    assert code == 2, out
    assert_no_outside_command(out)


@pytest.mark.parametrize("fmt", [[], ["--json"]], ids=["text", "json"])
def test_simulate_waits_prints_no_outside_command(tmp_path: Path, fmt: list[str]):
    """`simulate --waits` prints the labels of the `stats --json` file it replays."""
    curve = {"steps": [[60.0, 0.5]], "horizon_seconds": 600.0, "observations": 10, "events": 5}
    document = {
        "schema": "runner-queue-fallback/stats",
        "version": 1,
        "pools": [{"group": PLANTED_GROUP, "labels": f"{CPU16},{PLANT}", "curve": curve}],
    }
    waits = tmp_path / "stats.json"
    waits.write_text(json.dumps(document))
    runners = json.dumps([{"group": PLANTED_GROUP, "labels": [CPU16, PLANT]}])
    argv = ["simulate", "--waits", str(waits), "--replays", "2", "--runner-type", "cpu"]
    code, out = capture([*argv, "--runners", runners, *fmt], {})
    assert_no_outside_command(out)
    code, out = capture([*argv, *fmt], {})  # the default pools have no waits in the file
    assert code == 2, out
    assert_no_outside_command(out)


# -- stats: the labels and runner groups of past jobs ------------------------------------


@pytest.fixture(scope="module")
def planted_history() -> HistorySpec:
    """A past whose pools have planted labels and groups: all of `PLANT`, and a bare command
    (no line break or `##[` that would make `escape_data` escape it as a log line)."""
    return HistorySpec(
        pools=(
            PoolHistory(PLANTED_GROUP, PLANT, Exponential(mean=120.0)),
            PoolHistory(GROUP, BARE, Exponential(mean=60.0)),
        ),
        orders=(((0, 10.0), (1, 10.0)), ((1, 10.0), (0, 10.0))),
        sequences=30,
        seed=3,
    )


@pytest.mark.parametrize("fmt", [[], ["--json"], ["--markdown"]], ids=["text", "json", "markdown"])
def test_stats_prints_no_outside_command(planted_history: HistorySpec, capsys, fmt: list[str]):
    """`stats` prints each pool's labels (the dispatcher chose them) and its runner group.

    Before (text): each pool line started with the labels, escaped only as a command's message:
    `::` at the start stayed a command.
    """
    world, clock = history_world(planted_history)
    runners = json.dumps([{"group": PLANTED_GROUP, "labels": CPU16}])
    code = run_stats(world, clock, "--runner-type", "cpu", "--runners", runners, *fmt)
    captured = capsys.readouterr()
    out = captured.out + captured.err
    assert code == 0, out
    assert_no_outside_command(out)
    if fmt == ["--json"]:  # the JSON still says what GitHub said
        pools = json.loads(captured.out)["pools"]
        assert {tuple(pool["labels"]) for pool in pools} == {(BARE,), (PLANT,)}


def test_stats_quotes_githubs_error_message_as_one_line(planted_history, capsys):
    """A failed read ends `stats` with GitHub's message, which is outside text too."""
    world, clock = history_world(planted_history)

    def refuse(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        del method, reply, world
        return error_reply(403, f"Forbidden{PLANT}") if "/runs" in path else None

    Tamper(world, [refuse]).install()
    code = run_stats(world, clock)
    captured = capsys.readouterr()
    assert code == 1, captured
    assert_no_outside_command(captured.out + captured.err)


# -- the JSON escape itself --------------------------------------------------------------


def test_escaped_json_reads_back_the_same():
    """`escape_json` changes how `##[` and raw separators are written, never what JSON says."""
    document = {"a": PLANT, PLANT: [PLANT, "\\##[x"], "b": "\u2028\x85"}
    for ensure_ascii in (True, False):
        text = escape_json(json.dumps(document, indent=2, ensure_ascii=ensure_ascii))
        assert json.loads(text) == document
        assert "##[" not in text
        assert commands_from_outside(text) == []


def test_helpers_see_what_they_look_for():
    """The checks of this file fail on raw outside text (so a passing test means something)."""
    with pytest.raises(AssertionError):
        assert_no_outside_command(f"ok\n{PLANT}")
    with pytest.raises(AssertionError, match="split a value"):
        assert_no_outside_command(f"{MARKER}-head\nx ::{MARKER}::split-n")
    with pytest.raises(AssertionError, match="never reached"):
        assert_no_outside_command("nothing planted")


# -- a message, a URL or a request id where one line or one link is printed ---------------------


COMMAND_TEXT = f"boom\n::warning::{MARKER} %0A::error::{MARKER} ##[warning]{MARKER}"


@pytest.mark.found_by("review", issue=15)
def test_error_message_with_command_syntax_is_not_a_command():
    """GitHub's `message` (`\\n::warning`, `%0A`, `##[`) in a cancellation check's log line.

    Before: "Cancellation check failed: ... 500: boom" was printed as is: the message started its
    own line with `::warning::` and carried `##[warning]`. After: one escaped line.
    """
    fired: list[float] = []

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        if method == "GET" and child_run_id(path, world) and cancels(world) and len(fired) < 3:
            fired.append(world.now())
            return error_reply(500, COMMAND_TEXT)
        return None

    w = minute_queues(watched=True).pools(FOREVER, ())
    w.tamper.rules.append(rule)
    result = w.run()  # checks that no command came from outside text
    assert len(fired) == 3
    assert "Cancellation check failed" in result.log
    assert MARKER in result.log
    assert result.exit_code == 0, result.log


@pytest.mark.found_by("review", issue=15)
def test_html_url_with_a_parenthesis_does_not_make_links_in_the_summary():
    """The dispatch reply's `html_url` closed the Markdown link and added a link and an image.

    Before: pasted raw into `[id](url)`. After: a URL off the server's https host is code.
    """

    def rule(method: str, path: str, reply: Reply, world: FakeGitHub) -> Reply | None:
        body = json_body(reply)
        if method == "POST" and path.endswith("/dispatches") and isinstance(body, dict):
            body["html_url"] += (
                f") ![{MARKER}](https://evil.test/x.png) [{MARKER}](https://evil.test"
            )
            return with_json(reply, body)
        return None

    w = minute_queues(watched=True).pools((), ())
    w.tamper.rules.append(rule)
    result = w.run()
    assert result.exit_code == 0, result.log
    assert MARKER in result.summary
    assert foreign_links(result.summary, w.world.server_url) == []
    assert "](<https://github.test/" in result.summary  # the artifacts link of the real run


@pytest.mark.found_by("review", issue=15)
def test_dispatcher_chosen_request_id_cannot_make_a_link_in_the_guard_summary(tmp_path):
    """`escape_markdown` left `[text](url)` and `![](url)` working in the guard's summary."""
    clock = FakeClock()
    world, sha = hand_world(clock)
    request_id = (
        f"[{MARKER}](https://evil.test/x) ![i](https://evil.test/i.png) ##[warning]{MARKER}"
    )
    run_id = hand_dispatch(world, sha, request_id, PARENT_RUN_ID)
    clock.sleep(10)
    summary = tmp_path / "summary.md"
    code, log = cli_guard(world, clock, run_id, summary=str(summary))
    assert code == 1
    text = summary.read_text()
    assert MARKER in text
    assert foreign_links(text, world.server_url) == []
    assert commands_from_outside(log) == []
