"""What a user reads: the round lines and links of the log, the step summary with its timeline,
the summary of an input error, the `attempts` output, and each command's `--help`.

Every behaviour is driven through `cli.main` against the fake GitHub on a fake clock.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import yaml

from runner_queue_fallback import cli
from runner_queue_fallback.action.attempts import Attempt, Result
from runner_queue_fallback.action.summary import RUN_LINK_ONLY, WORKER_LINK, timeline
from runner_queue_fallback.commands.flags import INPUT_HELP
from runner_queue_fallback.core.actions_io import escape_mermaid
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import COORDINATOR_INPUTS, GUARD_INPUTS, env_name
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.fake_github.faults import Fault
from runner_queue_fallback.fake_github.model import Timings, Workload
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import (
    SOURCE_REF,
    SimulationRun,
    run_coordinator,
    standard_world,
)
from tests.invariants import children
from tests.outside import Tamper
from tests.scenario import Scenario, attempts, minute_queues
from tests.test_execution import jobs_rule

ROOT = Path(__file__).resolve().parent.parent
GROUP = "nv-cpu-general"
CPU16, CPU8, CPU32 = "linux-amd64-cpu16", "linux-amd64-cpu8", "linux-amd64-cpu32"
FOREVER = ((0.0, 10.0**9),)
EM_DASH = "\u2014"


class World:
    """Three CPU pools with one runner each; the test says which are busy."""

    def __init__(self, *busy: tuple[tuple[float, float], ...], workload: float = 60.0) -> None:
        self.clock = FakeClock()
        fake = FakeGitHub(self.clock, workload=Workload(duration=workload))
        self.github, sha = standard_world(self.clock, fake)
        for labels, intervals in zip((CPU16, CPU8, CPU32), (*busy, (), (), ()), strict=False):
            self.github.add_pool(GROUP, labels, runners=1, busy=intervals)
        self.inputs = {
            "workflow": "runner-worker.yml",
            "workflow-ref": "main",
            "source-ref": SOURCE_REF,
            "source-sha": sha,
            "runner-type": "cpu",
            "queue-timeout-minutes": "10",
            "execution-timeout-minutes": "15",
            "runners": json.dumps([{"group": GROUP, "labels": x} for x in (CPU16, CPU8, CPU32)]),
        }

    def run(self) -> SimulationRun:
        return run_coordinator(self.github, self.clock, self.inputs, main=cli.main)


def _rounds(log: str, kind: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith(f"{kind} round")]


# -- 2. logs ------------------------------------------------------------------------------------


def test_waiting_rounds_name_candidate_pool_state_waited_left_and_next_check():
    """Each waiting round: candidate k/n and pool, the child once, its state, time waited since
    dispatch, time left to the queue deadline and the next check; the time left shrinks."""
    result = World(FOREVER).run()
    assert result.exit_code == 0
    rounds = _rounds(result.log, "Waiting")
    first = [line for line in rounds if "candidate 1/3" in line]
    assert first, result.log
    pattern = re.compile(
        r"^Waiting round (\d+), candidate 1/3 \(nv-cpu-general / linux-amd64-cpu16\): child "
        r"(\d+) run queued/-; job worker queued/-, runner none, 0 step\(s\) started; waited "
        r"(\d+)s since dispatch, (\d+)s left to the queue deadline; next check in (\d+)s$"
    )
    parsed = [pattern.match(line) for line in first]
    assert all(parsed), first
    numbers = [int(m[1]) for m in parsed if m]
    waited = [int(m[3]) for m in parsed if m]
    left = [int(m[4]) for m in parsed if m]
    nexts = [int(m[5]) for m in parsed if m]
    assert numbers == list(range(1, len(first) + 1))
    assert waited == sorted(waited)
    assert left == sorted(left, reverse=True)
    assert all(n <= rest for n, rest in zip(nexts, left, strict=True))  # never past the deadline
    # waited + left is the same deadline each round: dispatch-to-queued plus 10 minutes
    assert len({w + rest for w, rest in zip(waited, left, strict=True)}) == 1
    assert waited[0] + left[0] == 15 + 600
    child = parsed[0][2] if parsed[0] else ""
    assert f"child {child} run {child}" not in result.log  # no repeated id


def test_executing_rounds_name_candidate_and_time_left_to_the_execution_timeout():
    """While executing, each round names candidate k/n, its pool and the time left."""
    result = World(workload=200.0).run()
    assert result.exit_code == 0
    rounds = _rounds(result.log, "Executing")
    assert rounds, result.log
    for line in rounds:
        assert "candidate 1/3 (nv-cpu-general / linux-amd64-cpu16): child " in line
        assert re.search(r"\d+s since dispatch, \d+s left to the execution timeout;", line), line
        assert re.search(r"next check in \d+s$", line), line


@pytest.mark.parametrize("busy", [(), (FOREVER, FOREVER, FOREVER)], ids=["success", "exhaustion"])
def test_every_link_in_the_log_follows_a_separator(busy: tuple[tuple[tuple[float, float]], ...]):
    """'View worker job logs here' never runs on from the sentence before it."""
    result = World(*busy).run()
    lines = [
        line
        for line in (result.log + result.post_log).splitlines()
        if "View worker job logs here" in line
    ]
    assert lines
    for line in lines:
        assert f" {EM_DASH} View worker job logs here" in line, line


@pytest.mark.found_by("review", issue=15)
def test_waiting_round_and_cancellation_log_lines_show_both_states_and_the_runner():
    """The spec's log lines: each waiting round and each cancellation check."""
    w = minute_queues(watched=True).pools(FOREVER, ())
    result = w.run()
    kid = children(w.world)[0].run_id
    assert (
        f"Waiting round 1, candidate 1/2 (nv-cpu-general / linux-amd64-cpu16): child {kid} "
        "run queued/-; job worker queued/-, runner none"
    ) in result.log
    assert f"child {kid} run {kid}" not in result.log  # the id is named once
    assert "since dispatch," in result.log
    assert "left to the queue deadline; next check in" in result.log
    assert (
        f"Cancellation check: run {kid} completed/cancelled; job worker completed/cancelled, "
        "runner none, 0 step(s) started"
    ) in result.log


# -- 3. summary ---------------------------------------------------------------------------------


def test_summary_lists_every_candidate_and_marks_the_untried():
    """The first pool gives a runner: the plan's two other candidates are listed, not tried."""
    result = World().run()
    assert result.exit_code == 0
    rows = [line for line in result.summary.splitlines() if re.match(r"^\| \d ", line)]
    assert [row.split(" | ")[1] for row in rows] == [
        f"{GROUP} / {CPU16}",
        f"{GROUP} / {CPU8}",
        f"{GROUP} / {CPU32}",
    ]
    assert rows[0].endswith("| run success, worker success |")
    assert rows[1].endswith("| - | - | not tried |")
    assert rows[2].endswith("| - | - | not tried |")
    assert "View worker job logs here](<" in result.summary
    assert "never had a runner" not in result.summary


def test_after_exhaustion_the_worker_link_says_it_never_had_a_runner():
    """Every queue exhausted: the spec's link is kept, labelled 'never had a runner'."""
    result = World(FOREVER, FOREVER, FOREVER).run()
    assert result.exit_code == 1
    assert "[View worker job logs here (never had a runner)](<https://" in result.summary
    assert "View worker job logs here (never had a runner): https://" in result.log


def test_the_summary_draws_a_gantt_timeline_of_every_attempt():
    """One section per attempt with its phases, in milliseconds since the first dispatch (the
    chart's own rules: tests/test_timeline.py; what real Mermaid draws: scripts/render-check)."""
    result = World(FOREVER).run()
    assert result.exit_code == 0
    block = result.summary.split("```mermaid\n", 1)[1].split("```", 1)[0]
    lines = block.splitlines()
    assert lines[:4] == [
        "gantt",
        "    title Attempts (seconds since the first dispatch)",
        "    dateFormat x",
        "    axisFormat %s",
    ]
    assert "    section 1 nv-cpu-general / linux-amd64-cpu16" in lines
    assert "    section 2 nv-cpu-general / linux-amd64-cpu8" in lines
    assert "    section 3 nv-cpu-general / linux-amd64-cpu32" not in lines  # never dispatched
    assert "    startup 15 s :0, 15000" in lines
    assert "    queue wait 10 min :15000, 615000" in lines
    assert "    queue deadline 10 min :milestone, 615000, 615000" in lines
    cancel = [line for line in lines if line.startswith("    cancel and proof 5 s :615000, ")]
    assert len(cancel) == 1
    execution = [line for line in lines if line.startswith("    execution ")]
    assert len(execution) == 1  # only the second child had a runner
    task = re.compile(r"^    [A-Za-z0-9 ._/()+=@-]+ :(milestone, )?\d+, \d+$")
    assert all(task.match(line) for line in lines[6:] if not line.startswith("    section ")), lines


def test_timeline_labels_go_through_the_mermaid_escaper():
    """A hostile pool name cannot end its label, its line or the code block."""
    hostile = "grp:x;y#z%%\n```\nclick a call evil()`<b>"
    result = Result()
    attempt = Attempt(1, Candidate(hostile, "lab:el", 1.0, "pool"), "rqf-1-1-1-deadbeef")
    attempt.dispatched_at, attempt.queued_at, attempt.queue_left_at = 10.0, 20.0, 80.0
    attempt.ended_at = 90.0
    result.attempts.append(attempt)
    text = "\n".join(timeline(result))
    sections = [line for line in text.splitlines() if line.startswith("    section ")]
    assert sections == [f"    section 1 {escape_mermaid(f'{hostile} / lab:el')}"]
    body = text.split("```mermaid\n", 1)[1].rsplit("```", 1)[0]
    for forbidden in (":x", ";", "#", "%%", "`", "<b>", "\nclick"):
        tasks = re.sub(r" :(milestone, )?\d+, \d+$", "", body, flags=re.MULTILINE)
        assert forbidden not in tasks, forbidden


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("nv-cpu-general / linux-amd64-cpu16", "nv-cpu-general / linux-amd64-cpu16"),
        ("a:b;c#d%e", "a_b_c_d_e"),
        ("line\nbreak\r", "line break"),
        ("```mermaid", "___mermaid"),
        ('<img src="x">', "_img src=_x__"),
        ("", "_"),
        ("x" * 200, "x" * 77 + "..."),
    ],
)
def test_escape_mermaid_keeps_only_a_whitelist(text: str, escaped: str):
    """Mermaid's own syntax, HTML, backticks and line breaks never survive; long labels are cut."""
    assert escape_mermaid(text) == escaped


def test_input_errors_write_a_short_summary_and_send_no_request(tmp_path: Path):
    """A coordinator stopped by its inputs says so in the step summary too; no request is made."""

    class NoNetwork:
        def __getattr__(self, name: str) -> object:
            raise AssertionError(f"a request was attempted: {name}")

    summary = tmp_path / "summary.md"
    environ = {
        env_name("runner-type"): "tpu",
        env_name("workflow"): "runner-worker.yml",
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["coordinate"], environ, clock=FakeClock(), session=NoNetwork())  # type: ignore[arg-type]
    assert code == 2
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## error: invalid input (runner-queue-fallback coordinate)\n")
    assert "- input 'runner-type' is not one of the allowed values; got 'tpu'" in text
    assert "- input 'workflow-ref' is required and was not supplied" in text
    assert "No request was sent to GitHub." in text
    assert "::error title=error%3A Invalid input::input 'runner-type'" in out.getvalue()


def test_input_error_summary_escapes_the_values_given(tmp_path: Path):
    """A value the caller chose is plain text in the summary, never a link or structure."""
    summary = tmp_path / "summary.md"
    environ = {
        env_name("runner-type"): "[x](https://evil.example)",
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    with contextlib.redirect_stdout(io.StringIO()):
        assert cli.main(["plan"], environ, clock=FakeClock()) == 2
    text = summary.read_text(encoding="utf-8")
    assert "](https://evil.example)" not in text
    assert "`https://evil.example)`" in text or "\\[x\\]" in text


def test_attempts_counts_dispatches_sent_a_refused_one_is_not():
    """A 422 dispatch created no run: `attempts` is 0 and attempts-json is empty."""
    world = World()
    world.github.inject(Fault(kind="status", status=422, method="POST", path=r"/dispatches$"))
    result = world.run()
    assert result.exit_code == 1
    assert result.outputs["attempts"] == "0"
    assert json.loads(result.outputs["attempts-json"]) == []
    assert "| 1 | nv-cpu-general / linux-amd64-cpu16 | 10 min | - | - | dispatch refused |" in (
        result.summary
    )


def test_attempts_counts_an_ambiguous_dispatch():
    """A dispatch whose reply was lost may have made a run: it counts."""
    world = World()
    world.github.inject(Fault(kind="lost_reply", method="POST", path=r"/dispatches$"))
    result = world.run()
    assert result.exit_code == 1
    assert result.outputs["attempts"] == "1"


@pytest.mark.found_by("mutation", issue=35)
def test_a_job_without_a_link_of_its_own_is_linked_by_its_runs_url_and_job_id():
    """GitHub's job schema allows a null `html_url`: the worker link is then built from the
    run's URL and the job id, still a job link (not the run-only fallback)."""

    def no_link(job):
        return {**job, "html_url": None}

    s = Scenario(workload=Workload(duration=120.0)).pools([], [], [])
    Tamper(s.world, [jobs_rule(no_link)]).install()
    result = s.run()
    assert result.exit_code == 0, result.log
    [kid] = children(s.world)
    job = s.world.runs[kid.run_id].job
    assert job is not None
    [entry] = attempts(result)
    job_link = f"{entry['run-url']}/job/{job.id}"
    assert f"{WORKER_LINK}: {job_link}" in result.log
    assert job_link in result.summary
    assert RUN_LINK_ONLY not in result.summary


@pytest.mark.found_by("review", issue=15)
def test_run_link_label_in_the_summary_when_no_job_was_seen():
    """No job ever listed: the summary links the run, labelled as the fallback."""
    w = minute_queues(watched=True, timings=Timings(jobs_delay=10_000.0)).pools((), ())
    result = w.run()
    assert result.exit_code == 1
    assert "View worker job logs here \\(run link: the job link is not available" not in (
        result.summary
    )
    assert (
        "View worker job logs here (run link: the job link is not available; never had a runner)"
    ) in result.summary


# -- 4. CLI help --------------------------------------------------------------------------------


def _help(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main([*argv, "--help"]) == 0
    return out.getvalue()


def _env_listed(text: str) -> list[str]:
    tail = text.split("environment variables read:", 1)[1]
    return [line.strip() for line in tail.splitlines() if line.strip()]


def test_coordinate_and_guard_help_list_every_input_variable_they_read():
    """The INPUT_* lists match the inputs the program reads, and the runner's GITHUB_* too."""
    coordinate = _env_listed(_help("coordinate"))
    guard = _env_listed(_help("guard"))
    assert [n for n in coordinate if n.startswith("INPUT_")] == [
        env_name(n) for n in COORDINATOR_INPUTS
    ]
    assert [n for n in guard if n.startswith("INPUT_")] == [env_name(n) for n in GUARD_INPUTS]
    for listed in (coordinate, guard):
        for name in ("GITHUB_REPOSITORY", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_API_URL"):
            assert name in listed
        assert "GITHUB_STEP_SUMMARY" in listed


def test_cleanup_help_lists_the_state_it_reads():
    """The post step names the saved state and the inputs it reads."""
    listed = _env_listed(_help("cleanup"))
    for name in ("STATE_request-id", "STATE_child-run-id", "INPUT_TOKEN", "INPUT_WORKFLOW"):
        assert name in listed


@pytest.mark.parametrize("command", list(cli.SUBCOMMANDS))
def test_every_command_help_says_what_environment_it_reads(command: str):
    """Each `--help` ends with the environment variables it reads (or 'none')."""
    assert "environment variables read:" in _help(command)


@pytest.mark.parametrize("command", list(cli.SUBCOMMANDS))
def test_every_flag_has_help_text(command: str):
    """No flag of any command is listed without an explanation."""
    parser = cli._build_parser(command)  # the parser the command line gets
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for action in sub.choices[command]._actions:
        assert action.help, (command, action.option_strings or action.dest)


def test_input_flag_help_states_the_defaults_of_action_yml():
    """Each input flag's help says the default action.yml gives it."""
    manifest = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    for name, text in INPUT_HELP.items():
        default = manifest["inputs"][name].get("default")
        assert "default" in text, name
        if default not in (None, ""):
            assert f"default: {default})" in text, name
    assert set(INPUT_HELP) == set(COORDINATOR_INPUTS) - {
        "token",
        "runners-token",
        "app-private-key",
    }  # no flag takes a credential


def test_lint_with_nothing_to_check_says_so_and_exits_two(tmp_path: Path):
    """An empty directory is not a passing lint."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["lint", "--dir", str(tmp_path)])
    assert code == 2
    assert "nothing to check" in out.getvalue()
