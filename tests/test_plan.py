"""The `plan` command: candidate tables, budgets, and the spec's worked examples."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from runner_queue_fallback.cli import main
from runner_queue_fallback.core.inputs import env_name, read_pool_settings
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.workflow.plan import SKIPS_UNUSABLE_POOLS, make_plan

ALL_TYPES = ["cpu-amd64", "cpu-arm64", "gpu-amd64", "gpu-arm64", "gpu-amd64-2gpu", "gpu-arm64-2gpu"]


def plan_json(*flags: str, environ: dict[str, str] | None = None) -> dict[str, object]:
    out = io.StringIO()
    code = _run(out, ["plan", "--json", *flags], environ or {})
    assert code == 0, out.getvalue()
    return json.loads(out.getvalue())  # type: ignore[no-any-return]  # JSON object by construction


def _run(out: io.StringIO, argv: list[str], environ: dict[str, str]) -> int:
    with contextlib.redirect_stdout(out):
        return main(argv, environ)


def test_cpu_example_needs_at_most_135_minutes():
    """Spec: the CPU example (extended, 10 minutes, 15-minute execution) allows 135 for 90 of queueing."""
    plan = plan_json(
        "--runner-type",
        "cpu",
        "--queue-policy",
        "extended",
        "--queue-timeout-minutes",
        "10",
        "--execution-timeout-minutes",
        "15",
    )
    assert plan["queue-budget-minutes"] == 90
    assert plan["timeout-minutes"] <= 135  # type: ignore[operator]  # int from JSON
    assert plan["timeout-minutes"] == 90 + 15 + 4 * 4 + 2


def test_gpu_extended_example_needs_195_minutes():
    """Spec: six 15-minute queues plus a final 60 = 150 minutes; a 15-minute worker needs 195."""
    plan = plan_json(
        "--runner-type", "gpu", "--queue-policy", "extended", "--execution-timeout-minutes", "15"
    )
    assert plan["queue-budget-minutes"] == 150
    assert plan["timeout-minutes"] == 195


@pytest.mark.parametrize("runner_type", ALL_TYPES)
@pytest.mark.parametrize("policy", ["standard", "extended"])
def test_budget_formula_for_every_type_and_policy(runner_type: str, policy: str):
    """timeout = queue budget + execution + 4 min per candidate + 2 min parent grace."""
    plan = plan_json("--runner-type", runner_type, "--queue-policy", policy)
    candidates = plan["candidates"]
    assert isinstance(candidates, list)
    queue = sum(c["queue-timeout-minutes"] for c in candidates)
    assert plan["queue-budget-minutes"] == queue
    assert plan["timeout-minutes"] == queue + 180 + 4 * len(candidates) + 2


def test_inputs_can_come_from_the_environment():
    plan = plan_json(environ={"INPUT_RUNNER-TYPE": "gpu-arm64-2gpu"})
    candidates = plan["candidates"]
    assert isinstance(candidates, list)
    assert [c["labels"] for c in candidates] == ["linux-arm64-gpu-l4-latest-2"]


def test_flag_wins_over_environment():
    plan = plan_json("--runner-type", "cpu-arm64", environ={"INPUT_RUNNER-TYPE": "gpu"})
    assert plan["runner-type"] == "cpu-arm64"


def test_text_plan_shows_table_and_timeout(capsys: pytest.CaptureFixture[str]):
    assert (
        main(
            [
                "plan",
                "--runner-type",
                "gpu",
                "--queue-policy",
                "extended",
                "--execution-timeout-minutes",
                "15",
            ],
            {},
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "linux-amd64-gpu-l40g-latest-1" in text
    assert "timeout-minutes >= 195" in text


def test_invalid_input_prints_only_the_error(capsys: pytest.CaptureFixture[str], no_network):
    """Bad input: the error, a non-zero exit, nothing else, and no request."""
    session, adapter = no_network
    code = main(["plan", "--runner-type", "tpu"], {}, session=session)
    out = capsys.readouterr().out
    assert code != 0
    assert out.startswith("::error")
    assert "input 'runner-type'" in out
    assert len(out.strip().splitlines()) == 1
    assert adapter.sent == []


def test_a_budget_over_the_hosted_job_limit_is_pointed_out(capsys: pytest.CaptureFixture[str]):
    """GitHub ends a hosted job after 360 minutes: plan says so when the budget is larger."""
    flags = ["--runner-type", "gpu", "--queue-policy", "extended"]
    assert plan_json(*flags)["timeout-minutes"] == 360
    assert plan_json(*flags)["fits-hosted-runner"] is True
    over = plan_json(*flags, "--execution-timeout-minutes", "181")
    assert (over["timeout-minutes"], over["fits-hosted-runner"]) == (361, False)
    main(["plan", *flags, "--execution-timeout-minutes", "181"], {})
    assert "360-minute limit" in capsys.readouterr().out


def test_the_quota_extra_time_is_shown_on_its_own_line_outside_the_timeout():
    """Admission and one quota reset may add time; the minimum timeout stays the spec's figure."""
    base = plan_json("--runner-type", "cpu", "--execution-timeout-minutes", "15")
    longer = plan_json(
        "--runner-type",
        "cpu",
        "--execution-timeout-minutes",
        "15",
        "--admission-timeout-minutes",
        "30",
    )
    assert base["timeout-minutes"] == longer["timeout-minutes"]
    assert base["quota-extra-minutes"] == 60 + 5 + 60
    assert longer["quota-extra-minutes"] == 30 + 5 + 60
    out = io.StringIO()
    assert _run(out, ["plan", "--runner-type", "cpu", "--admission-timeout-minutes", "0"], {}) == 0
    [line] = [ln for ln in out.getvalue().splitlines() if ln.startswith("possible extra:")]
    assert "up to 60 min" in line
    assert "not included above" in line


def test_the_possible_extra_names_what_it_leaves_out_as_departure_1_states_it():
    """README, departure 1: one request may wait up to 5 resets (4 after refusals, one before
    it is sent), each believed up to 61 min away; plan's figure counts one, and says so."""
    out = io.StringIO()
    assert _run(out, ["plan", "--runner-type", "cpu"], {}) == 0
    lines = out.getvalue().splitlines()
    extra = next(n for n, ln in enumerate(lines) if ln.startswith("possible extra:"))
    assert "one quota reset of 60 min" in lines[extra]
    left_out = lines[extra + 1]
    assert left_out.lstrip().startswith("left out: a quota spent again at every reset")
    assert "up to 5 resets (305 min) before its error is reported" in left_out
    assert plan_json("--runner-type", "cpu")["request-quota-wait-max-minutes"] == 5 * 61


@pytest.mark.parametrize("runner_type", ALL_TYPES)
def test_each_candidate_adds_its_two_windows_and_the_run_one_parent_grace(runner_type: str):
    """4 minutes a candidate (2-minute startup and cancellation windows), 2 for the parent grace:
    exactly, before the job's timeout is rounded up to whole minutes."""
    settings = read_pool_settings({env_name("runner-type"): runner_type}, load_profiles())
    plan = make_plan(settings)
    assert plan.overhead_minutes == 4 * len(settings.candidates) + 2


# -- a queue deadline under 2 minutes is allowed but warned of (issue 28) ----------------------


def test_plan_warns_of_a_queue_deadline_under_two_minutes_and_says_why():
    """1 minute stays valid (the spec's minimum); plan names the candidates and the two delays."""
    out = io.StringIO()
    assert _run(out, ["plan", "--runner-type", "cpu", "--queue-timeout-minutes", "1"], {}) == 0
    (line,) = [ln for ln in out.getvalue().splitlines() if ln.startswith("warning:")]
    assert "queue deadline under 2 min for candidate 1 (nv-cpu-general / linux-amd64-cpu16" in line
    assert "allowed (the minimum is 1)" in line
    assert "broker offers a queued job to idle self-hosted runners only after about 60 s" in line
    assert "re-queues a job whose assigned runner does not pick it up within 60 s" in line
    warnings = plan_json("--runner-type", "cpu", "--queue-timeout-minutes", "1.5")["warnings"]
    assert isinstance(warnings, list)
    assert len(warnings) == 1
    assert "candidate 3 (nv-cpu-general / linux-amd64-cpu32, 1.5 min)" in warnings[0]


def test_plan_gives_no_warning_from_two_minutes_on():
    out = io.StringIO()
    assert _run(out, ["plan", "--runner-type", "cpu", "--queue-timeout-minutes", "2"], {}) == 0
    assert "warning:" not in out.getvalue()
    assert plan_json("--runner-type", "cpu", "--queue-timeout-minutes", "2")["warnings"] == []


#: A team's own pools (issue 48 item 6): labels alone, a group and labels, a group alone.
TEAM_RUNNERS = [
    {"labels": ["self-hosted", "Linux", "X64"]},
    {"group": "team-ci", "labels": ["self-hosted", "linux-amd64-cpu8"]},
    {"group": "team-big", "os": "linux", "arch": "amd64"},
    {"labels": "linux-amd64-cpu4"},
]


def test_text_plan_names_each_pool_of_a_runners_list_as_written():
    """Group and labels as the child receives them: a list of labels as a list, not joined.

    A runner type's pools keep their names (CPU16) in the pool column; a `runners` list's have
    none, and no column of `-`. Before: `-` for every candidate, and `self-hosted,Linux,X64`.
    """
    out = io.StringIO()
    assert (
        _run(out, ["plan", "--runner-type", "cpu", "--runners", json.dumps(TEAM_RUNNERS)], {}) == 0
    )
    header, *rows = out.getvalue().split("\n\n")[0].splitlines()
    assert header.split() == ["#", "group", "labels", "queue", "deadline"]
    cells = [[cell.strip() for cell in row.split("  ") if cell.strip()] for row in rows]
    assert cells == [
        ["1", "any group", '["self-hosted", "Linux", "X64"]', "10 min"],
        ["2", "team-ci", '["self-hosted", "linux-amd64-cpu8"]', "10 min"],
        ["3", "team-big", "any labels in the group", "10 min"],
        ["4", "any group", "linux-amd64-cpu4", "10 min"],
    ]
    out = io.StringIO()
    assert _run(out, ["plan", "--runner-type", "cpu"], {}) == 0
    header, first, *_ = out.getvalue().splitlines()
    assert header.split()[:3] == ["#", "pool", "group"]
    assert first.split() == ["1", "CPU16", "nv-cpu-general", "linux-amd64-cpu16", "10", "min"]


def _notes(environ: dict[str, str]) -> list[str]:
    notes = plan_json("--runner-type", "cpu", environ=environ)["notes"]
    assert isinstance(notes, list)
    return notes


def test_with_runners_token_the_plan_says_unusable_pools_are_skipped():
    """One note when `runners-token` is given (never the token); none when blank or absent."""
    token = "ghs_runnersreadonly0123456789abcdef"
    given = {env_name("runners-token"): token}
    out = io.StringIO()
    assert _run(out, ["plan", "--runner-type", "cpu"], given) == 0
    text = out.getvalue()
    notes = [line for line in text.splitlines() if line.startswith("note: runners-token is set")]
    assert len(notes) == 1, text
    assert "skips at once a pool proven unable to serve this workflow" in notes[0]
    assert token not in text
    assert SKIPS_UNUSABLE_POOLS in _notes(given)
    for environ in ({}, {env_name("runners-token"): "  "}):
        out = io.StringIO()
        assert _run(out, ["plan", "--runner-type", "cpu"], environ) == 0
        assert "runners-token" not in out.getvalue()
        assert SKIPS_UNUSABLE_POOLS not in _notes(environ)
    timeouts = [
        plan_json("--runner-type", "cpu", environ=environ)["timeout-minutes"]
        for environ in ({}, given)
    ]
    assert timeouts[0] == timeouts[1]
