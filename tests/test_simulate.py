"""The simulate command and its scenario catalogue: every scenario ends as it states."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import time
from pathlib import Path

import pytest

from runner_queue_fallback import cli
from runner_queue_fallback.fake_github.model import TOKEN_LENGTH, WORKER_TOKEN
from runner_queue_fallback.fake_github.runner_groups import STAND_IN_TOKEN
from runner_queue_fallback.tools.simulate.own_job import advised_timeout
from runner_queue_fallback.tools.simulate.run import parse_busy
from runner_queue_fallback.tools.simulate.scenarios import (
    CATALOGUE_DIR,
    DEFAULT_SCENARIO,
    CatalogueEntry,
    CatalogueError,
    Expectation,
    Observed,
    load_catalogue,
    load_entry,
)
from runner_queue_fallback.tools.simulate.steps import (
    TOKEN,
    Simulated,
    SimulationRun,
    simulate_entry,
)
from tests.invariants import check_invariants

CATALOGUE = load_catalogue()
PILOT_CASES = {
    "primary success",
    "queue fallback",
    "exhaustion",
    "product failure without retry",
    "parent cancellation",
    "queue/start race",
}
H100 = "linux-amd64-gpu-h100-latest-1"
RTXPRO = "linux-amd64-gpu-rtxpro6000-latest-1"
STAMPED = re.compile(r"^\[\d\d:\d\d:\d\d\] ")


@pytest.fixture(autouse=True)
def _no_real_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """Invariant 6: nothing sleeps for real."""

    def refuse(seconds: float) -> None:
        raise AssertionError(f"real sleep of {seconds}s")

    monkeypatch.setattr(time, "sleep", refuse)


def simulate(*argv: str) -> tuple[int, str]:
    """Run the command as a person would; the environment's INPUT_* must not leak in."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["simulate", *argv], {"INPUT_RUNNER-TYPE": "gpu"})
    return code, out.getvalue()


def section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(f"== {title} ==") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("== ")), len(lines))
    return [line for line in lines[start:end] if line]


class _CoordinatorView:
    """One coordinator's share of a shared world: its children and its own requests."""

    def __init__(self, sim: Simulated, run: SimulationRun, client: int) -> None:
        mine = {h.run_id for h in sim.children(run)}
        self.history = {k: v for k, v in sim.world.history.items() if k in mine}
        self.ledger = [e for e in sim.world.ledger if e.client == client]


def _client_of(sim: Simulated, run: SimulationRun) -> int:
    """The fake numbers tokens by first request: coordinator n sends first in turn n (run_all)."""
    return sim.runs.index(run)


# -- the catalogue -------------------------------------------------------------------------


def test_the_catalogue_covers_the_six_pilot_cases_and_the_extra_scenarios():
    """Every pilot case of the spec's rollout validation has a scenario, plus the extra ones."""
    assert {e.pilot for e in CATALOGUE.values() if e.pilot} == PILOT_CASES
    assert {
        "cancel-window-expired",
        "rate-limited-while-queued",
        "source-moved",
        "gpu-extended-rewait",
        "parallel-coordinators",
        "requeue-visible",
        "requeue-invisible",
        "zombie-run",
        "unheeded-cancel",
    } <= set(CATALOGUE)
    assert next(iter(CATALOGUE)) == DEFAULT_SCENARIO
    for entry in CATALOGUE.values():
        assert entry.description
        assert all(c.expect is not None for c in entry.coordinators), entry.name


def test_the_catalogue_ships_inside_the_package():
    """The YAML files live in the package directory, which the wheel and the image copy whole."""
    assert CATALOGUE_DIR.parents[2].name == "runner_queue_fallback"  # tools/simulate/scenarios
    assert len(list(CATALOGUE_DIR.glob("*.yaml"))) == len(CATALOGUE) >= 11


@pytest.fixture(scope="module")
def catalogue_runs() -> dict[str, Simulated]:
    """The whole catalogue, run once; its real duration is measured and printed, not asserted."""
    started = time.perf_counter()
    runs = {name: simulate_entry(entry, main=cli.main) for name, entry in CATALOGUE.items()}
    wall = time.perf_counter() - started
    print(f"\ncatalogue: {len(runs)} scenarios in {wall:.2f} s of real time")
    return runs


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_every_scenario_ends_as_it_states(name: str, catalogue_runs: dict[str, Simulated]):
    """Exit code, attempts, serving pool, outcomes and log fragments match the file's `expect`."""
    sim, entry = catalogue_runs[name], CATALOGUE[name]
    for run, spec in zip(sim.runs, entry.coordinators, strict=True):
        assert spec.expect is not None
        assert sim.observed(run).problems(spec.expect) == [], run.log + run.post_log
    assert sim.world.hook_errors == []


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_every_scenario_keeps_the_invariants(name: str, catalogue_runs: dict[str, Simulated]):
    """Invariants 1-5 and 7 hold for every coordinator, on its own share of the repository."""
    sim = catalogue_runs[name]
    for run in sim.runs:
        candidates = max(7, len(json.loads(run.outputs.get("attempts-json") or "[]")))
        world = (
            sim.world if len(sim.runs) == 1 else _CoordinatorView(sim, run, _client_of(sim, run))
        )
        check_invariants(world, run, candidates=candidates)  # type: ignore[arg-type]  # a view


def test_parallel_coordinators_share_one_quota_and_take_turns(catalogue_runs):
    """Two coordinators, two tokens, one ledger; each child names its own parent."""
    sim = catalogue_runs["parallel-coordinators"]
    assert {e.client for e in sim.world.ledger if e.path.endswith("/dispatches")} == {0, 1}
    parents = [r.parent_run_id for r in sim.runs]
    assert len(set(parents)) == 2
    first, second = (sim.children(r) for r in sim.runs)
    assert (
        first[0].dispatched_at == second[0].dispatched_at == 0.0
    )  # at once, not one after another


def test_the_guard_runs_in_every_child_that_gets_a_runner(catalogue_runs):
    """The real guard step ran (and passed) wherever a runner started a step."""
    sim = catalogue_runs[DEFAULT_SCENARIO]
    started = [h.run_id for h in sim.world.history.values() if h.started_at is not None]
    assert [g.run_id for g in sim.guards] == started
    assert all(g.passed for g in sim.guards)


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_no_scenario_warns_of_a_runner_that_is_not_there(
    name: str, catalogue_runs: dict[str, Simulated]
):
    """Each coordinator reads its own job's timeout, as on a runner: no set-up warning.

    Before (issue 48 item 4): every run said "The coordinator job's timeout-minutes could not be
    read: GITHUB_WORKFLOW_REF is not set (not on a runner?)". The simulator gives the job the
    timeout `plan` advises; on a runner without GITHUB_WORKFLOW_REF the coordinator still warns
    (tests/test_job_time.py, `unset`).
    """
    sim = catalogue_runs[name]
    advised = max(advised_timeout(c.inputs) or 0 for c in CATALOGUE[name].coordinators)
    assert sim.job_timeout_minutes == advised
    for run in sim.runs:
        assert "could not be read" not in run.log
        said = f"The coordinator job ends in {advised} min (timeout-minutes {advised} of job"
        assert said in run.log


def test_the_header_says_which_timeout_the_simulated_job_has():
    """Once, under the expectation: the job's timeout-minutes, and that it is `plan`'s advice."""
    code, text = simulate("--runner-type", "cpu", "--execution-timeout-minutes", "20")
    assert code == 0, text
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli.main(
            ["plan", "--json", "--runner-type", "cpu", "--execution-timeout-minutes", "20"], {}
        )
    plan = json.loads(out.getvalue())
    advised = plan["timeout-minutes"] + math.ceil(plan["quota-extra-minutes"])
    header = text.splitlines()[2]
    assert header.startswith(f"Coordinator job: timeout-minutes {advised}, as `plan` advises")
    assert text.count("Coordinator job: timeout-minutes") == 1
    assert "GITHUB_WORKFLOW_REF" not in text


def test_a_broken_scenario_file_names_the_file(tmp_path: Path):
    bad = tmp_path / "broken.yaml"
    bad.write_text("description: x\nworld: {pools: [{group: g}]}\ninputs: {runner-type: cpu}\n")
    with pytest.raises(CatalogueError, match=r"broken\.yaml"):
        load_entry(bad)


def test_inputs_in_yaml_may_be_numbers():
    entry = CatalogueEntry.model_validate(
        {"name": "n", "description": "d", "world": {}, "inputs": {"queue-timeout-minutes": 10}}
    )
    assert entry.coordinators[0].inputs == {"queue-timeout-minutes": "10"}


# -- the command ---------------------------------------------------------------------------


def test_default_simulation_shows_a_fallback_with_every_section():
    """No scenario: the default fallback; log stamped with virtual time, summary, outputs, timeline."""
    code, text = simulate()
    assert code == 0
    log = section(text, "Main step log")
    assert log
    assert all(STAMPED.match(line) or line.startswith(" ") for line in log)
    assert any(line.startswith("[00:10:15]") and "Cancel requested" in line for line in log)
    assert any("notice (Candidate 2)" in line for line in log)
    assert not any("::" in line.split("] ", 1)[1][:3] for line in log)  # commands are rendered
    assert "> Candidate 1/3: nv-cpu-general / linux-amd64-cpu16" in text
    summary = section(text, "Step summary")
    assert summary[0] == "success: the worker succeeded on nv-cpu-general / linux-amd64-cpu8"
    assert any("cancelled before a runner (queue timeout)" in line for line in summary)
    assert not any("](" in line or "| ---" in line for line in summary)
    outputs = dict(line.split(": ", 1) for line in section(text, "Outputs"))
    assert outputs["attempts"] == "2"
    assert json.loads(outputs["runner"])["labels"] == "linux-amd64-cpu8"
    timeline = section(text, "Timeline (virtual time)")
    assert timeline[0].startswith("candidate 1: nv-cpu-general / linux-amd64-cpu16")
    assert "  [00:10:18] concluded: cancelled (no runner, no step)" in timeline
    assert any("guard passed, workload started" in line for line in timeline)
    assert "concluded: success" in timeline[-1]
    assert section(text, "Child run 9000000002: guard step log")
    assert "as expected: exit 0, 2 attempts, runner from linux-amd64-cpu8" in text


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_the_token_never_appears_in_the_output(name: str):
    """Neither the coordinator's nor the worker's token, in text or JSON."""
    for argv in ((name,), (name, "--json")):
        code, text = simulate(*argv)
        assert code == 0, text
        assert TOKEN not in text
        assert "ghs_worker_token" not in text
        assert "add-mask" not in text


@pytest.mark.parametrize("name", list(CATALOGUE))
def test_the_saved_state_and_summary_never_hold_a_token(name: str, catalogue_runs):
    """The 2026 format (520 characters with `.`, `_`, `-`): never in the post step's state."""
    assert len(TOKEN) == TOKEN_LENGTH
    for run in catalogue_runs[name].runs:
        kept = "\n".join([*run.state.keys(), *run.state.values(), run.summary])
        assert TOKEN not in kept
        assert WORKER_TOKEN not in kept


def test_list_shows_names_descriptions_and_expected_outcomes():
    code, text = simulate("--list")
    assert code == 0
    for name, entry in CATALOGUE.items():
        assert name in text
        assert entry.description in text
        assert f"expected: {entry.expected}" in text
    assert "(default)" in text


def test_json_has_attempts_outputs_and_the_ledger_summary():
    code, text = simulate("--json")
    assert code == 0
    data = json.loads(text)
    assert data["scenario"] == DEFAULT_SCENARIO
    [coordinator] = data["coordinators"]
    assert [a["labels"] for a in coordinator["attempts"]] == [
        "linux-amd64-cpu16",
        "linux-amd64-cpu8",
    ]
    assert coordinator["outputs"]["attempts"] == "2"
    assert coordinator["exit-code"] == 0
    assert coordinator["as-expected"] is True
    ledger = data["ledger"]
    assert ledger["sent"] == sum(ledger["by-path"].values())
    assert 0 < ledger["counted"] < ledger["sent"]
    assert ledger["not-modified"] > 0
    assert ledger["by-path"]["POST /actions/workflows/runner-worker.yml/dispatches"] == 2
    assert "GET /actions/runs/{n}" in ledger["by-path"]


def test_busy_h100_for_40_minutes_falls_back_past_it():
    """GPU standard, 10-minute deadlines: H100 full for 40 minutes is skipped; H200 serves."""
    common = ("--runner-type", "gpu", "--busy", f"{RTXPRO}=always", "--json")
    _, busy = simulate(*common, "--busy", f"{H100}=40m")
    _, brief = simulate(*common, "--busy", f"{H100}=5m")
    assert json.loads(busy)["coordinators"][0]["served-by"] == "linux-amd64-gpu-h200-latest-1"
    assert json.loads(brief)["coordinators"][0]["served-by"] == H100
    assert [
        a["queue-timeout-minutes"] for a in json.loads(busy)["coordinators"][0]["attempts"]
    ] == [
        10,
        10,
        10,
    ]


def test_flags_build_one_free_pool_per_candidate():
    code, text = simulate("--runner-type", "cpu", "--execution-timeout-minutes", "30")
    assert code == 0
    pools = section(text, "Pools")
    assert [p.split(":")[0] for p in pools] == [
        "nv-cpu-general / linux-amd64-cpu16",
        "nv-cpu-general / linux-amd64-cpu8",
        "nv-cpu-general / linux-amd64-cpu32",
    ]
    assert all(p.endswith("free") for p in pools)
    assert "Expected: exit 0, 1 attempt, runner from linux-amd64-cpu16" in text
    assert "  as expected: exit 0, 1 attempt" in text


def test_workload_flags_change_the_outcome():
    code, text = simulate(
        "--runner-type",
        "cpu",
        "--workload-outcome",
        "failure",
        "--workload-minutes",
        "20",
        "--json",
    )
    assert code == 0  # the simulation ran; the coordinator's own exit code is in the JSON
    [coordinator] = json.loads(text)["coordinators"]
    assert coordinator["exit-code"] == 1
    assert len(coordinator["attempts"]) == 1


def test_busy_on_a_catalogue_scenario_recomputes_its_story_and_expectation():
    """--busy on the default scenario: CPU8 busy too, so CPU32 serves, and that is now expected."""
    code, text = simulate("--busy", "linux-amd64-cpu8=1h", "--json")
    assert code == 0
    [coordinator] = json.loads(text)["coordinators"]
    assert coordinator["served-by"] == "linux-amd64-cpu32"
    assert coordinator["as-expected"] is True
    assert coordinator["expected"] == "exit 0, 3 attempts, runner from linux-amd64-cpu32"
    code, text = simulate("primary-success", "--busy", "linux-amd64-cpu16=always")
    assert code == 0
    header = text.splitlines()[0]
    assert header.startswith(
        "Scenario primary-success: changed by --busy: linux-amd64-cpu16 never has a free runner"
    )
    assert "The first pool (CPU16) has a free runner" not in text
    assert "  as expected: exit 0, 2 attempts, runner from linux-amd64-cpu8" in text


def test_pool_flags_on_a_catalogue_scenario_are_refused():
    """primary-success --runner-type gpu: its CPU story cannot hold; refused, nothing simulated."""
    code, text = simulate("primary-success", "--runner-type", "gpu")
    assert code == 2
    assert "scenario 'primary-success' is written for its own pools; --runner-type" in text
    assert "== " not in text


def test_a_scenario_with_several_coordinators_refuses_flags():
    """parallel-coordinators cannot be recomputed: refused with a message."""
    code, text = simulate("parallel-coordinators", "--workload-outcome", "failure")
    assert code == 2
    assert "cannot be recomputed with --workload-outcome" in text


def test_a_scenario_with_runner_groups_gives_the_coordinator_the_stand_in_runners_token(
    catalogue_runs: dict[str, Simulated],
):
    """Its organisation's groups are read with the fake's stand-in token (masked, never shown);
    a scenario without runner groups gives the coordinator none."""
    [run] = catalogue_runs["group-not-admitted"].runs
    assert f"::add-mask::{STAND_IN_TOKEN}" in run.log
    assert STAND_IN_TOKEN not in run.log.replace(f"::add-mask::{STAND_IN_TOKEN}", "")
    [plain] = catalogue_runs[DEFAULT_SCENARIO].runs
    assert STAND_IN_TOKEN not in plain.log
    code, text = simulate("group-not-admitted")
    assert code == 0, text
    assert STAND_IN_TOKEN not in text


def test_a_scenario_with_runner_groups_refuses_flags_it_cannot_predict():
    """Which pools take the child is the groups' to decide: no expectation is recomputed."""
    code, text = simulate("group-not-admitted", "--workload-outcome", "failure")
    assert code == 2
    assert "its world has runner groups" in text


def test_an_outcome_too_close_to_call_runs_without_an_expectation():
    """A pool freed right at its deadline: no honest expectation, so none is stated; it runs
    (tests/test_simulate_story.py: and says which way it went)."""
    code, text = simulate("--runner-type", "cpu", "--busy", "linux-amd64-cpu16=10m")
    assert code == 0
    assert "Expected: cannot be stated in advance, the outcome depends on the timing" in text
    assert "  the timing decided: " in text


def test_the_expectation_line_is_always_printed_with_its_verdict():
    """Custom inputs too: `Expected:` at the top and the verdict in the result."""
    code, text = simulate("--runner-type", "cpu", "--workload-outcome", "failure")
    assert code == 0  # a failure that was expected
    assert "Expected: exit 1, 1 attempt, runner from linux-amd64-cpu16" in text
    assert "  as expected: exit 1, 1 attempt" in text


def test_an_unexpected_simulated_failure_exits_non_zero(monkeypatch: pytest.MonkeyPatch):
    """When the run does not end as expected, simulate exits 1 and says NOT AS EXPECTED."""
    from runner_queue_fallback.tools.simulate import run as simulate_module  # noqa: PLC0415
    from runner_queue_fallback.tools.simulate.scenarios import predict as predict_module  # noqa: PLC0415

    real = predict_module.predict

    def wrong(*args, **kwargs):
        found = real(*args, **kwargs)
        return predict_module.Prediction(found.expect.model_copy(update={"exit_code": 0}), "x")

    monkeypatch.setattr(simulate_module, "predict", wrong)
    code, text = simulate("--runner-type", "cpu", "--workload-outcome", "failure")
    assert code == 1
    assert "NOT AS EXPECTED: exit_code: expected 0, got 1" in text


def test_list_json_prints_json():
    """--list --json: one object per scenario."""
    code, text = simulate("--list", "--json")
    assert code == 0
    listing = json.loads(text)
    names = [item["name"] for item in listing]
    assert names[0] == "fallback"
    assert "primary-success" in names
    assert all({"description", "expected", "pilot", "default"} <= set(item) for item in listing)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--runner-type", "tpu"), "input 'runner-type'"),
        (
            ("--runner-type", "cpu", "--queue-timeout-minutes", "99"),
            "input 'queue-timeout-minutes'",
        ),
        (("--busy", "linux-amd64-cpu8"), "--busy expects POOL=DURATION"),
        (("--busy", "linux-amd64-cpu8=soon"), "--busy 'linux-amd64-cpu8=soon'"),
        (("--busy", "nope=40m"), "--busy 'nope': no pool has these labels"),
        (("--workload-minutes", "-3"), "--workload-minutes"),
        (("no-such-scenario",), "unknown scenario 'no-such-scenario'"),
    ],
)
def test_bad_flags_give_one_clear_error_and_exit_2(argv: tuple[str, ...], message: str):
    code, text = simulate(*argv)
    assert code == 2
    assert message in text
    assert "Traceback" not in text
    assert "== " not in text  # nothing was simulated


def test_argparse_errors_exit_2_without_a_traceback(capsys):
    code, _ = simulate("--workload-minutes", "ten")
    assert code == 2
    assert "--workload-minutes" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("p=40m", 2400.0),
        ("p=90s", 90.0),
        ("p=1.5h", 5400.0),
        ("p=40", 2400.0),
        ("p=always", float("inf")),
    ],
)
def test_busy_durations(text: str, seconds: float):
    assert parse_busy(text) == ("p", seconds)


def test_scenarios_are_deterministic():
    """Same scenario, same virtual story (request ids aside)."""
    first, second = (simulate_entry(CATALOGUE["exhaustion"], main=cli.main) for _ in range(2))
    assert [(e.time, e.method, e.status) for e in first.world.ledger] == [
        (e.time, e.method, e.status) for e in second.world.ledger
    ]
    assert first.virtual_seconds == second.virtual_seconds


def test_demo_script_runs_simulate():
    """The demo installs the runtime dependencies only, then runs `simulate` from the checkout."""
    demo = (Path(__file__).resolve().parent.parent / "scripts" / "demo").read_text()
    assert "scripts/bootstrap runtime\n" in demo
    assert "python -m runner_queue_fallback simulate" in demo


# -- a pool is its labels as a set (issue 43) ---------------------------------------------------

README_RUNNERS = json.dumps(
    [
        {"group": "ci-linux", "labels": ["self-hosted", "linux-amd64-cpu16"]},
        {"group": "ci-linux", "labels": ["self-hosted", "linux-amd64-cpu8"]},
    ]
)


@pytest.mark.parametrize(
    "labels",
    [
        ["self-hosted", "linux-amd64-cpu16"],
        ["LINUX-AMD64-CPU16", "Self-Hosted"],
        ["x64", "self-hosted", "LINUX"],
    ],
)
def test_simulate_is_as_expected_for_any_label_order_or_case(labels):
    """The fake serves `runs-on` as a set; the expectation compares the pool the same way."""
    runners = json.dumps([{"group": "ci", "labels": labels}])
    code, text = simulate("--runner-type", "cpu", "--runners", runners)
    assert code == 0, text
    assert "  as expected: exit 0, 1 attempt" in text
    assert "NOT AS EXPECTED" not in text


def test_simulate_is_as_expected_for_the_readme_runners_example():
    code, text = simulate("--runner-type", "cpu", "--runners", README_RUNNERS)
    assert code == 0, text
    assert "  as expected: exit 0, 1 attempt, runner from self-hosted,linux-amd64-cpu16" in text


def test_a_group_alone_is_named_by_its_group_and_served():
    runners = json.dumps([{"group": "arc-set", "os": "linux", "arch": "amd64"}])
    code, text = simulate("--runner-type", "cpu", "--runners", runners)
    assert code == 0, text
    assert "as expected: exit 0, 1 attempt, runner from arc-set" in text


def test_busy_names_a_pool_in_any_order_or_case_or_by_its_group():
    runners = json.dumps(
        [
            {"labels": ["self-hosted", "Linux", "X64", "big"]},
            {"group": "arc-set", "os": "linux", "arch": "amd64"},
        ]
    )
    code, text = simulate(
        "--runner-type", "cpu", "--runners", runners, "--busy", "BIG,x64,linux,self-hosted=90m"
    )
    assert code == 0, text
    assert "as expected: exit 0, 2 attempts, runner from arc-set" in text
    code, text = simulate("--runner-type", "cpu", "--runners", runners, "--busy", "arc-set=90m")
    assert code == 0, text
    assert "runner from self-hosted,Linux,X64,big" in text


def test_an_expectation_compares_the_serving_pool_as_a_set():
    expect = Expectation(exit_code=0, attempts=1, served_by="self-hosted,Linux,X64")

    def observed(served_by: str | None) -> Observed:
        return Observed(
            exit_code=0, attempts=1, served_by=served_by, outcomes=(), log="", post_exit_code=0
        )

    assert observed("x64,linux,SELF-HOSTED").problems(expect) == []
    assert observed("self-hosted,linux").problems(expect) != []
    assert observed(None).problems(expect) != []
