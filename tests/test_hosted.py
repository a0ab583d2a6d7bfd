"""A GitHub-hosted runner as the last resort, by explicit choice (issue 33, a departure).

Each test states one rule: the hosted candidate comes only after every self-hosted deadline and
never once a self-hosted runner was seen; it is refused as an input error (naming the input, no
request) anywhere but last, for a GPU type, for another architecture, and as the opt-in beside an
explicit `runners`; its own queue deadline holds; `lint` checks the child it would run.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from pathlib import Path

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.core import timing
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.hosted import hosted_candidate
from runner_queue_fallback.core.profiles import Candidate
from runner_queue_fallback.fake_github.model import FakeRun, Workload
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.lint import lint_files
from runner_queue_fallback.tools.simulate.steps import run_coordinator
from runner_queue_fallback.tools.stats.recommend import PoolData, recommend
from runner_queue_fallback.tools.stats.survival import Observation, kaplan_meier
from runner_queue_fallback.workflow.model import Finding
from tests.invariants import children, dispatch_posts
from tests.test_coordinator import CPU, FOREVER, Scenario, attempts
from tests.test_sim_support import child_inputs, make_world

HOSTED = "ubuntu-24.04"
HOSTED_RUNNER = json.dumps({"labels": HOSTED}, separators=(",", ":"))
SELF_HOSTED_BUSY = (FOREVER, FOREVER, FOREVER)


def hosted_scenario(*busy: list[tuple[float, float]], concurrency: int = 5, **kwargs) -> Scenario:
    """Three CPU pools (busy as given) and hosted `ubuntu-24.04` runners with a concurrency limit."""
    s = Scenario(**kwargs).pools(*busy)
    s.world.add_hosted_pool(HOSTED, concurrency=concurrency)
    return s


# -- taken only after every self-hosted deadline ------------------------------------------------


def test_the_hosted_last_resort_is_dispatched_only_after_every_self_hosted_deadline():
    """All three pools stay busy: three children cancelled at their deadline, then the hosted one."""
    s = hosted_scenario(*SELF_HOSTED_BUSY)
    s.inputs["hosted-last-resort"] = HOSTED
    result = s.run()
    assert result.exit_code == 0, result.log
    kids = children(s.world)
    assert [k.pool for k in kids] == [("nv-cpu-general", (label,)) for label in CPU] + [
        ("", (HOSTED,))
    ]
    for earlier, hosted in itertools.pairwise(kids):
        assert earlier.allocated_at is None, "no self-hosted runner ever took a child"
        assert earlier.completed_at is not None
        assert earlier.completed_at <= hosted.dispatched_at
    assert kids[3].runner == "GitHub Actions 1"
    assert [a["outcome"] for a in attempts(result)][:3] == [
        "cancelled before a runner (queue timeout)"
    ] * 3
    assert result.outputs["runner"] == HOSTED_RUNNER
    assert json.loads(s.world.runs[kids[3].run_id].inputs["runner"]) == {"labels": HOSTED}


def test_the_summary_and_attempts_json_mark_the_hosted_attempt():
    s = hosted_scenario(*SELF_HOSTED_BUSY)
    s.inputs["hosted-last-resort"] = HOSTED
    result = s.run()
    entries = attempts(result)
    assert [e["hosted"] for e in entries] == [False, False, False, True]
    assert entries[3]["group"] is None
    assert entries[3]["labels"] == HOSTED
    assert f"| 4 | GitHub-hosted / {HOSTED} |" in result.summary
    assert "**GitHub-hosted:** candidate 4" in result.summary
    assert "billed" in result.summary
    assert "Note: candidate 4 (GitHub-hosted / ubuntu-24.04" in result.log


def test_a_hosted_candidate_in_runners_gets_its_own_deadline_and_goes_last():
    """`{"hosted": ..., "queue-timeout-minutes": 30}` after one busy pool: dispatched last."""
    s = hosted_scenario(FOREVER)
    s.inputs["runners"] = json.dumps(
        [
            {"group": "nv-cpu-general", "labels": CPU[0], "queue-timeout-minutes": 3},
            {"hosted": HOSTED, "queue-timeout-minutes": 30},
        ]
    )
    result = s.run()
    assert result.exit_code == 0, result.log
    first, hosted = children(s.world)
    assert hosted.pool == ("", (HOSTED,))
    assert first.completed_at is not None
    assert first.completed_at <= hosted.dispatched_at
    assert result.outputs["runner"] == HOSTED_RUNNER


def test_no_hosted_dispatch_once_a_self_hosted_runner_was_seen():
    """CPU8 gets a runner and the workload fails: the sequence ends; no fallback to hosted."""
    s = hosted_scenario(FOREVER, [], [], workload=Workload(outcome="failure", duration=60.0))
    s.inputs["hosted-last-resort"] = HOSTED
    result = s.run()
    assert result.exit_code == 1
    assert len(dispatch_posts(s.world)) == 2
    assert all(k.pool != ("", (HOSTED,)) for k in children(s.world))
    assert json.loads(result.outputs["runner"])["labels"] == CPU[1]


def test_the_hosted_queue_deadline_is_enforced_when_the_hosted_concurrency_is_used_up():
    """Hosted jobs queue past the plan's concurrency too: the hosted child is cancelled at its
    own deadline and the sequence fails with every queue exhausted."""
    s = Scenario().pools(FOREVER)
    s.world.add_hosted_pool(HOSTED, concurrency=1, busy=FOREVER)
    s.inputs["runners"] = json.dumps(
        [
            {"group": "nv-cpu-general", "labels": CPU[0], "queue-timeout-minutes": 2},
            {"hosted": HOSTED, "queue-timeout-minutes": 3},
        ]
    )
    result = s.run()
    assert result.exit_code == 1
    _first, hosted = children(s.world)
    assert hosted.pool == ("", (HOSTED,))
    assert hosted.allocated_at is None
    [_, cancel] = s.cancels()
    deadline = hosted.job_queued_at + 3 * 60
    assert deadline <= cancel <= deadline + timing.QUEUE_POLL_NEAR_SECONDS
    assert "exhausted" in result.log


def test_the_fake_queues_hosted_jobs_past_the_concurrency_limit():
    """Two hosted children, concurrency 1: the second gets a runner only when the first ends."""
    clock = FakeClock()
    world = make_world(clock, workload=Workload(duration=300.0))
    world.add_hosted_pool(HOSTED, concurrency=1)
    first = world.dispatch(
        "runner-worker.yml", "main", {**child_inputs("a"), "runner": HOSTED_RUNNER}
    )
    second = world.dispatch(
        "runner-worker.yml", "main", {**child_inputs("b"), "runner": HOSTED_RUNNER}
    )
    assert isinstance(first, FakeRun)
    assert isinstance(second, FakeRun)
    a, b = world.history[first.id], world.history[second.id]
    clock.advance(120.0)
    assert a.allocated_at is not None
    assert b.allocated_at is None
    clock.advance(900.0)
    assert a.completed_at is not None
    assert b.allocated_at is not None
    assert b.allocated_at >= a.completed_at
    job = world.runs[first.id].job
    assert job is not None
    assert job.runner_name == "GitHub Actions 1"
    assert job.runner_group_name == "GitHub Actions"


# -- refused as input errors, naming the input, before any request -------------------------------


def refused(inputs: dict[str, str]) -> tuple[int, str, FakeGitHub]:
    """Run `coordinate` with `inputs`; the exit code, the log and the fake (to count requests)."""
    s = Scenario()
    s.world.add_hosted_pool(HOSTED)
    s.inputs.update(inputs)
    result = run_coordinator(s.world, s.clock, s.inputs, main=cli.main, post_step=False)
    return result.exit_code, result.log, s.world


TWO_POOLS = [{"group": "nv-cpu-general", "labels": CPU[0]}]
REFUSALS = [
    pytest.param(
        {"runners": json.dumps([{"hosted": HOSTED}, *TWO_POOLS])},
        "runners",
        "allowed only as the last one",
        id="not-last",
    ),
    pytest.param(
        {
            "runner-type": "gpu",
            "runners": json.dumps(
                [
                    {"group": "nv-gpu-general", "labels": "linux-amd64-gpu-l4-latest-1"},
                    {"hosted": HOSTED},
                ]
            ),
        },
        "runners",
        "only for the CPU runner types",
        id="gpu-type-in-runners",
    ),
    pytest.param(
        {"runner-type": "gpu", "hosted-last-resort": HOSTED},
        "hosted-last-resort",
        "only for the CPU runner types",
        id="gpu-type-opt-in",
    ),
    pytest.param(
        {"runner-type": "cpu-arm64", "hosted-last-resort": HOSTED},
        "hosted-last-resort",
        "needs arm64",
        id="amd64-label-for-arm64",
    ),
    pytest.param(
        {"runners": json.dumps([*TWO_POOLS, {"hosted": "ubuntu-24.04-arm"}])},
        "runners",
        "needs amd64",
        id="arm-label-for-amd64",
    ),
    pytest.param(
        {"hosted-last-resort": "windows-2025"},
        "hosted-last-resort",
        "need Linux",
        id="not-linux",
    ),
    pytest.param(
        {"runners": json.dumps(TWO_POOLS), "hosted-last-resort": HOSTED},
        "hosted-last-resort",
        "cannot be combined with an explicit `runners`",
        id="opt-in-beside-runners",
    ),
    pytest.param(
        {"runners": json.dumps([*TWO_POOLS, {"hosted": "linux-amd64-cpu8"}])},
        "runners",
        "a self-hosted label",
        id="self-hosted-label-as-hosted",
    ),
    pytest.param(
        {"runners": json.dumps([*TWO_POOLS, {"hosted": HOSTED, "group": "x"}])},
        "runners",
        "takes only 'hosted' and 'queue-timeout-minutes'",
        id="hosted-with-a-group",
    ),
    pytest.param(
        {"runners": json.dumps([*TWO_POOLS * 7, {"hosted": HOSTED}])},
        "runners",
        "1 to 7 candidates",
        id="counts-toward-the-limit",
    ),
]


@pytest.mark.parametrize(("inputs", "name", "problem"), REFUSALS)
def test_a_misplaced_or_unfitting_hosted_candidate_is_an_input_error_before_any_request(
    inputs: dict[str, str], name: str, problem: str
):
    code, log, world = refused(inputs)
    assert code == 2
    [line] = [line for line in log.splitlines() if f"input '{name}'" in line]
    assert problem in line
    assert "allowed:" in line
    assert world.ledger == [], "no request reached GitHub"


def test_final_in_the_repeated_pool_rule_means_final_among_the_self_hosted_candidates():
    """A repeated CPU32 with its own deadline, then the hosted candidate: accepted."""
    s = hosted_scenario(FOREVER, FOREVER, FOREVER)
    s.inputs["runners"] = json.dumps(
        [
            {"group": "nv-cpu-general", "labels": CPU[2], "queue-timeout-minutes": 2},
            {"group": "nv-cpu-general", "labels": CPU[2], "queue-timeout-minutes": 3},
            {"hosted": HOSTED, "queue-timeout-minutes": 5},
        ]
    )
    result = s.run()
    assert result.exit_code == 0, result.log
    assert len(dispatch_posts(s.world)) == 3


def test_the_repeated_pool_is_still_refused_before_the_last_self_hosted_candidate():
    """A repeat followed by another self-hosted pool stays an error, hosted candidate or not."""
    repeat = {"group": "nv-cpu-general", "labels": CPU[0], "queue-timeout-minutes": 3}
    runners = [repeat, repeat, {"group": "nv-cpu-general", "labels": CPU[1]}, {"hosted": HOSTED}]
    code, log, world = refused({"runners": json.dumps(runners)})
    assert code == 2
    assert "a repeat is allowed only as the final candidate" in log
    assert world.ledger == []


def test_a_larger_runner_name_is_accepted_with_a_warning():
    """A label the program cannot classify is taken as a larger runner's name, with a warning."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(
            ["plan", "--runner-type", "cpu", "--hosted-last-resort", "org-linux-16core"], {}
        )
    assert code == 0
    assert (
        "warning: hosted label 'org-linux-16core' is not a standard image label" in out.getvalue()
    )


# -- lint: the child a hosted candidate may run ---------------------------------------------------

GOOD = Path(__file__).parent / "data" / "lint" / "good"
GUARD_USES = (
    "      - uses: acme/runner-queue-fallback/guard@0123456789abcdef0123456789abcdef01234567\n"
)
OPT_IN = (
    "          execution-timeout-minutes: '15'\n",
    "          execution-timeout-minutes: '15'\n          hosted-last-resort: ubuntu-24.04\n",
)
ROOM = ("timeout-minutes: 250", "timeout-minutes: 270")  # plan's need with a fifth candidate


def lint_pair(tmp_path: Path, coordinator=(), child=()) -> list[Finding]:
    """Lint the good pair after replacing each (old, new) in the coordinator and the child."""
    for name, edits in (("runner-check.yml", coordinator), ("runner-worker.yml", child)):
        text = (GOOD / name).read_text(encoding="utf-8")
        for old, new in edits:
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return lint_files(tmp_path / "runner-check.yml").findings


def hosted_findings(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.level, f.message) for f in findings if f.rule == "RQF307"]


def test_lint_warns_that_a_guarded_child_runs_billed_and_lists_its_unconditioned_steps(tmp_path):
    findings = lint_pair(tmp_path, coordinator=[OPT_IN, ROOM])
    [(level, message)] = hosted_findings(findings)
    assert level == "warning"
    assert "candidate 5, ubuntu-24.04" in message
    assert "billed" in message
    assert "private network" in message
    assert "step 2 (actions/checkout), step 3 (Workload)" in message
    assert "step 1" not in message, "the guard is not listed"
    assert [f for f in findings if f.level == "error"] == []


def test_lint_does_not_list_a_step_whose_if_asks_about_the_runner(tmp_path):
    condition = "      - name: Workload\n        if: runner.environment == 'self-hosted'\n"
    findings = lint_pair(
        tmp_path, coordinator=[OPT_IN, ROOM], child=[("      - name: Workload\n", condition)]
    )
    [(_, message)] = hosted_findings(findings)
    assert "step 2 (actions/checkout)" in message
    assert "Workload" not in message


def test_lint_fails_a_hosted_child_without_the_guard_first(tmp_path):
    """Outside the runner groups' restriction, the guard is all that stops a foreign dispatch."""
    text = (GOOD / "runner-worker.yml").read_text(encoding="utf-8")
    guard = text[text.index(GUARD_USES) : text.index("      - uses: actions/checkout")]
    findings = lint_pair(tmp_path, coordinator=[OPT_IN, ROOM], child=[(guard, "")])
    errors = [m for level, m in hosted_findings(findings) if level == "error"]
    assert len(errors) == 1
    assert "'selected workflows' restriction" in errors[0]
    assert "RQF112" in {f.rule for f in findings}


def test_lint_accepts_the_docker_guard_first_on_a_hosted_child(tmp_path):
    docker = GUARD_USES.replace("/guard@", "/guard/docker@")
    findings = lint_pair(tmp_path, coordinator=[OPT_IN, ROOM], child=[(GUARD_USES, docker)])
    assert [level for level, _ in hosted_findings(findings)] == ["warning"]


def test_lint_fails_an_execution_budget_over_the_hosted_job_limit(tmp_path):
    findings = lint_pair(
        tmp_path,
        coordinator=[
            OPT_IN,
            ("execution-timeout-minutes: '15'", "execution-timeout-minutes: '400'"),
        ],
        child=[("    timeout-minutes: 15\n", "    timeout-minutes: 400\n")],
    )
    errors = [m for level, m in hosted_findings(findings) if level == "error"]
    assert len(errors) == 1
    assert "after 360 minutes" in errors[0]
    assert "400 minutes of execution" in errors[0]


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(
            (
                "          runner-type: cpu\n",
                "          runner-type: cpu\n          runners: ${{ vars.RUNNERS }}\n",
            ),
            id="runners",
        ),
        pytest.param(
            (
                "          runner-type: cpu\n",
                "          runner-type: cpu\n          hosted-last-resort: ${{ vars.HOSTED }}\n",
            ),
            id="hosted-last-resort",
        ),
    ],
)
def test_lint_says_it_could_not_check_the_hosted_rules_of_an_expression(tmp_path, edit):
    findings = lint_pair(tmp_path, coordinator=[edit])
    [(level, message)] = hosted_findings(findings)
    assert level == "notice"
    assert "the coordinator applies them at run time, before any dispatch" in message


def test_lint_says_nothing_hosted_without_a_hosted_candidate():
    assert hosted_findings(lint_files(GOOD / "runner-check.yml").findings) == []


# -- plan and simulate say it --------------------------------------------------------------------


def cli_output(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv, {})
    return code, out.getvalue()


def test_plan_prints_the_hosted_candidate_with_its_deadline_and_that_it_is_billed():
    code, text = cli_output(
        [
            "plan",
            "--runner-type",
            "cpu",
            "--queue-timeout-minutes",
            "7",
            "--hosted-last-resort",
            HOSTED,
        ]
    )
    assert code == 0
    assert "4  hosted  (GitHub-hosted)  ubuntu-24.04" in text
    assert "note: candidate 4 (GitHub-hosted / ubuntu-24.04, 7 min queue deadline)" in text
    assert "billed" in text
    code, data = cli_output(
        ["plan", "--runner-type", "cpu", "--hosted-last-resort", HOSTED, "--json"]
    )
    plan = json.loads(data)
    assert plan["candidates"][-1] == {
        "order": 4,
        "pool": "hosted",
        "labels": HOSTED,
        "hosted": True,
        "queue-timeout-minutes": 10,
    }
    assert "group" not in plan["candidates"][-1]


def test_simulate_hosted_last_resort_ends_as_the_catalogue_states():
    code, text = cli_output(["simulate", "hosted-last-resort"])
    assert code == 0, text
    assert "as expected: exit 0, 4 attempts, runner from ubuntu-24.04" in text
    assert "GitHub-hosted / ubuntu-24.04: 20 runners" in text


# -- stats: a hosted candidate is recommended only as `{"hosted": ...}`, only last ----------------


def test_stats_recommends_a_hosted_candidate_only_in_its_form_and_only_last():
    """The hosted pool is the fastest by far, yet every order keeps it last, as `{"hosted"}`."""

    def measured(labels: str, waits: list[float]) -> PoolData:
        curve = kaplan_meier([Observation(w, event=True) for w in waits])
        return PoolData("GitHub Actions" if labels == HOSTED else "g", labels, curve, 40, 40)

    current = [
        Candidate("g", CPU[0], 10),
        Candidate("g", CPU[1], 10),
        hosted_candidate(HOSTED, 10),
    ]
    pools = {
        CPU[0]: measured(CPU[0], [300.0] * 40),
        CPU[1]: measured(CPU[1], [60.0] * 40),
        HOSTED: measured(HOSTED, [5.0] * 40),
    }
    rec = recommend(current, pools)
    assert rec.best
    for evaluation in rec.best:
        *self_hosted, last = evaluation.steps
        assert last.labels == HOSTED
        assert last.hosted
        assert not any(s.hosted for s in self_hosted)
        runners = json.loads(evaluation.runners_json())
        assert set(runners[-1]) == {"hosted", "queue-timeout-minutes"}
        assert all("group" in item for item in runners[:-1])
    assert rec.best[0].steps[0].labels == CPU[1], "the self-hosted order is still optimised"


# -- labels compared as GitHub compares them: letter case ignored (issue 44, finding 5) ----------


@pytest.mark.parametrize(
    ("label", "fragment"),
    [
        ("LINUX-AMD64-GPU-H100-LATEST-1", "a self-hosted label"),
        ("SELF-HOSTED", "a self-hosted label"),
        ("Ubuntu-24.04-ARM", "an arm64 runner"),
        ("Windows-Latest", "a windows runner"),
    ],
)
def test_a_hosted_label_in_capitals_is_refused_as_in_lower_case(label, fragment, capsys):
    """GitHub matches labels regardless of case: `plan` exits 2 naming the input, no warning."""
    code = cli.main(["plan"], {"INPUT_RUNNER-TYPE": "cpu-amd64", "INPUT_HOSTED-LAST-RESORT": label})
    out = capsys.readouterr().out
    assert code == 2, out
    assert "input 'hosted-last-resort'" in out
    assert fragment in out
    code = cli.main(
        ["plan"],
        {
            "INPUT_RUNNER-TYPE": "cpu-amd64",
            "INPUT_RUNNERS": json.dumps(
                [{"group": "nv-cpu-general", "labels": "linux-amd64-cpu16"}, {"hosted": label}]
            ),
        },
    )
    out = capsys.readouterr().out
    assert code == 2, out
    assert fragment in out


def test_a_standard_image_in_capitals_is_classified_without_a_warning(capsys):
    code = cli.main(
        ["plan"], {"INPUT_RUNNER-TYPE": "cpu-amd64", "INPUT_HOSTED-LAST-RESORT": "Ubuntu-24.04"}
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "not a standard image label" not in out
