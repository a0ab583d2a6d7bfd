"""Every input rule of the spec: valid inputs resolve, bad ones fail naming the input, with no request."""

from __future__ import annotations

import json

import pytest

from runner_queue_fallback.cli import main
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.errors import InputError
from runner_queue_fallback.core.inputs import (
    InputErrors,
    env_name,
    read_coordinator_inputs,
    read_guard_inputs,
    read_pool_settings,
    read_run_context,
)
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.fake_github.model import fake_token
from tests.conftest import SHA

PROFILES = load_profiles()
#: A token in GitHub's 2026 format: 520 characters with `.`, `_` and `-`.
SECRET = fake_token("secretvalue")

VALID = {
    "INPUT_WORKFLOW": "runner-worker.yml",
    "INPUT_WORKFLOW-REF": "main",
    "INPUT_SOURCE-REF": "refs/pull/123/merge",
    "INPUT_SOURCE-SHA": SHA,
    "INPUT_RUNNER-TYPE": "cpu",
    "INPUT_TOKEN": SECRET,
}


def cpu(
    labels: str, *, group: str = "nv-cpu-general", deadline: object = None, **extra: object
) -> dict[str, object]:
    """A candidate object; `deadline` becomes its queue-timeout-minutes."""
    item: dict[str, object] = {"group": group, "labels": labels, **extra}
    if deadline is not None:
        item["queue-timeout-minutes"] = deadline
    return item


def runners(*items: object) -> str:
    return json.dumps(list(items))


# (id, changes to VALID, the input the error must name, a fragment of the message)
BAD_INPUTS = [
    ("runner-type-missing", {"INPUT_RUNNER-TYPE": None}, "runner-type", "required"),
    ("runner-type-blank", {"INPUT_RUNNER-TYPE": "   "}, "runner-type", "required"),
    ("runner-type-unknown", {"INPUT_RUNNER-TYPE": "tpu"}, "runner-type", "gpu-amd64-2gpu"),
    ("runner-type-case", {"INPUT_RUNNER-TYPE": "CPU"}, "runner-type", "allowed"),
    (
        "runner-type-missing-with-runners",
        {"INPUT_RUNNER-TYPE": None, "INPUT_RUNNERS": runners(cpu("linux-amd64-cpu16"))},
        "runner-type",
        "required",
    ),
    ("queue-policy-unknown", {"INPUT_QUEUE-POLICY": "fast"}, "queue-policy", "standard, extended"),
    (
        "queue-timeout-zero",
        {"INPUT_QUEUE-TIMEOUT-MINUTES": "0"},
        "queue-timeout-minutes",
        "1 to 60",
    ),
    ("queue-timeout-61", {"INPUT_QUEUE-TIMEOUT-MINUTES": "61"}, "queue-timeout-minutes", "1 to 60"),
    (
        "queue-timeout-text",
        {"INPUT_QUEUE-TIMEOUT-MINUTES": "ten"},
        "queue-timeout-minutes",
        "1 to 60",
    ),
    (
        "queue-timeout-nan",
        {"INPUT_QUEUE-TIMEOUT-MINUTES": "nan"},
        "queue-timeout-minutes",
        "1 to 60",
    ),
    (
        "queue-timeout-underscore",
        {"INPUT_QUEUE-TIMEOUT-MINUTES": "1_0"},
        "queue-timeout-minutes",
        "1 to 60",
    ),
    (
        "queue-timeout-full-width",
        {"INPUT_QUEUE-TIMEOUT-MINUTES": "\uff11\uff10"},
        "queue-timeout-minutes",
        "1 to 60",
    ),
    (
        "workflow-ref-sha",
        {"INPUT_WORKFLOW-REF": "0123456789abcdef0123456789abcdef01234567"},
        "workflow-ref",
        "branch or tag",
    ),
    (
        "workflow-ref-remote",
        {"INPUT_WORKFLOW-REF": "refs/remotes/origin/main"},
        "workflow-ref",
        "branch or tag",
    ),
    (
        "execution-timeout-text",
        {"INPUT_EXECUTION-TIMEOUT-MINUTES": "3h"},
        "execution-timeout-minutes",
        "1 to",
    ),
    (
        "execution-timeout-zero",
        {"INPUT_EXECUTION-TIMEOUT-MINUTES": "0"},
        "execution-timeout-minutes",
        "1 to",
    ),
    ("source-sha-short", {"INPUT_SOURCE-SHA": "abc123"}, "source-sha", "40 hexadecimal"),
    ("source-sha-not-hex", {"INPUT_SOURCE-SHA": "g" * 40}, "source-sha", "40 hexadecimal"),
    ("source-sha-missing", {"INPUT_SOURCE-SHA": None}, "source-sha", "required"),
    ("source-ref-short", {"INPUT_SOURCE-REF": "main"}, "source-ref", "refs/heads/"),
    (
        "source-ref-pull-other",
        {"INPUT_SOURCE-REF": "refs/pull/12/files"},
        "source-ref",
        "refs/pull/<n>/merge",
    ),
    (
        "source-policy-unknown",
        {"INPUT_SOURCE-POLICY": "pinned"},
        "source-policy",
        "pinned-after-start",
    ),
    (
        "source-policy-expression",
        {"INPUT_SOURCE-POLICY": "${{ inputs.p }}"},
        "source-policy",
        "current",
    ),
    ("workflow-missing", {"INPUT_WORKFLOW": None}, "workflow", "required"),
    ("workflow-not-yaml", {"INPUT_WORKFLOW": "runner-worker"}, "workflow", "file name"),
    (
        "workflow-ref-pull",
        {"INPUT_WORKFLOW-REF": "refs/pull/1/merge"},
        "workflow-ref",
        "branch or tag",
    ),
    ("token-missing", {"INPUT_TOKEN": None}, "token", "required"),
    ("workload-not-json", {"INPUT_WORKLOAD": "{shard: 1}"}, "workload", "JSON"),
    ("workload-array", {"INPUT_WORKLOAD": "[1, 2]"}, "workload", "JSON object"),
    (
        "workload-too-long",
        {"INPUT_WORKLOAD": json.dumps({"x": "y" * 70_000})},
        "workload",
        "65,535",
    ),
    ("runners-malformed", {"INPUT_RUNNERS": "[{group: x}]"}, "runners", "not valid JSON"),
    (
        "runners-object",
        {"INPUT_RUNNERS": json.dumps(cpu("linux-amd64-cpu16"))},
        "runners",
        "1 to 7",
    ),
    ("runners-empty", {"INPUT_RUNNERS": "[]"}, "runners", "1 to 7"),
    (
        "runners-eight",
        {"INPUT_RUNNERS": runners(*[cpu(f"linux-amd64-cpu{n}") for n in range(1, 9)])},
        "runners",
        "1 to 7",
    ),
    (
        "runners-neither-group-nor-labels",
        {"INPUT_RUNNERS": runners({"queue-timeout-minutes": 5})},
        "runners",
        "needs 'group', 'labels' or both",
    ),
    (
        "runners-blank-group",
        {"INPUT_RUNNERS": runners({"group": " ", "labels": "linux-amd64-cpu16"})},
        "runners",
        "'group' that is not a non-empty string",
    ),
    (
        "runners-empty-labels",
        {"INPUT_RUNNERS": runners({"group": "nv-cpu-general", "labels": []})},
        "runners",
        "'labels' that is not a non-empty string or array",
    ),
    (
        "runners-unknown-key",
        {"INPUT_RUNNERS": runners(cpu("linux-amd64-cpu16", timeout=5))},
        "runners",
        "unknown key",
    ),
    (
        "runners-gpu-for-cpu",
        {"INPUT_RUNNERS": runners(cpu("linux-amd64-gpu-l4-latest-1"))},
        "runners",
        "family",
    ),
    (
        "runners-wrong-arch",
        {"INPUT_RUNNERS": runners(cpu("linux-arm64-cpu16"))},
        "runners",
        "architecture",
    ),
    (
        "runners-gpu-count",
        {
            "INPUT_RUNNER-TYPE": "gpu",
            "INPUT_RUNNERS": runners(cpu("linux-amd64-gpu-l4-latest-2", group="nv-gpu-general")),
        },
        "runners",
        "GPU count",
    ),
    (
        "runners-unknown-label",
        {"INPUT_RUNNERS": runners(cpu("ubuntu-latest"))},
        "runners",
        "OS and architecture unknown",
    ),
    (
        "runners-mixed-os",
        {"INPUT_RUNNERS": runners(cpu("linux-amd64-cpu16"), cpu("windows-amd64-cpu16"))},
        "runners",
        "one OS",
    ),
    (
        "runners-memory-group",
        {"INPUT_RUNNERS": runners(cpu("linux-amd64-cpu16m"))},
        "runners",
        "nv-cpu-memory",
    ),
    (
        "runners-duplicate-not-last",
        {
            "INPUT_RUNNERS": runners(
                cpu("linux-amd64-cpu16"),
                cpu("linux-amd64-cpu16", deadline=5),
                cpu("linux-amd64-cpu8"),
            )
        },
        "runners",
        "only as the final",
    ),
    (
        "runners-duplicate-hidden-by-extra-label",
        {
            "INPUT_RUNNERS": runners(
                cpu("linux-amd64-cpu32"),
                {"group": "nv-cpu-general", "labels": ["linux-amd64-cpu32", "self-hosted"]},
                cpu("linux-amd64-cpu8"),
            )
        },
        "runners",
        "only as the final",
    ),
    (
        "runners-duplicate-no-deadline",
        {"INPUT_RUNNERS": runners(cpu("linux-amd64-cpu16"), cpu("linux-amd64-cpu16"))},
        "runners",
        "own queue-timeout-minutes",
    ),
    (
        "runners-duplicate-other-group",
        {
            "INPUT_RUNNERS": runners(
                cpu("linux-amd64-cpu16"),
                cpu("linux-amd64-cpu16", group="nv-cpu-other", deadline=60),
            )
        },
        "runners",
        "another group",
    ),
    (
        "runners-deadline-61",
        {"INPUT_RUNNERS": runners(cpu("linux-amd64-cpu16", deadline=61))},
        "runners",
        "1 to 60",
    ),
    (
        "runners-deadline-string",
        {"INPUT_RUNNERS": runners(cpu("linux-amd64-cpu16", deadline="10"))},
        "runners",
        "1 to 60",
    ),
    (
        "runners-deadline-bool",
        {"INPUT_RUNNERS": runners(cpu("linux-amd64-cpu16", deadline=True))},
        "runners",
        "1 to 60",
    ),
]


def env_with(changes: dict[str, str | None]) -> dict[str, str]:
    env = dict(VALID)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@pytest.mark.parametrize(
    ("changes", "name", "fragment"),
    [case[1:] for case in BAD_INPUTS],
    ids=[c[0] for c in BAD_INPUTS],
)
def test_bad_input_names_the_input(changes: dict[str, str | None], name: str, fragment: str):
    """Each bad input fails with a message naming it as spelled in action.yml and what is allowed."""
    with pytest.raises(InputErrors) as info:
        read_coordinator_inputs(env_with(changes), PROFILES)
    named = [e for e in info.value.errors if e.name == name]
    assert named, info.value
    assert f"input '{name}'" in str(named[0])
    assert fragment in str(named[0])


def test_at_least_25_distinct_bad_input_cases():
    assert len({case[0] for case in BAD_INPUTS}) >= 25


def test_every_problem_is_reported_at_once():
    """A user fixes all bad inputs in one round."""
    with pytest.raises(InputErrors) as info:
        read_coordinator_inputs(
            env_with({"INPUT_SOURCE-SHA": "x", "INPUT_QUEUE-POLICY": "y"}), PROFILES
        )
    assert {e.name for e in info.value.errors} == {"source-sha", "queue-policy"}


def test_the_token_is_never_shown():
    """A bad token is refused without echoing it."""
    with pytest.raises(InputErrors) as info:
        read_coordinator_inputs(env_with({"INPUT_TOKEN": "ghs_secret with space"}), PROFILES)
    assert "ghs_secret" not in str(info.value)


def test_valid_inputs_resolve_with_defaults():
    """Omitted inputs take the spec's defaults."""
    inputs = read_coordinator_inputs(VALID, PROFILES)
    assert inputs.pools.runner_type == "cpu-amd64"
    assert inputs.pools.queue_policy == "standard"
    assert inputs.pools.execution_timeout_minutes == 180
    assert inputs.source_policy == "current"
    assert inputs.workload == "{}"
    assert inputs.token.get_secret_value() == SECRET  # 520 characters with `.`, `_`, `-`
    assert SECRET not in repr(inputs)


def test_blank_means_omitted():
    """A blank optional input is the same as leaving it out."""
    env = env_with({"INPUT_RUNNERS": "  ", "INPUT_QUEUE-POLICY": "", "INPUT_WORKLOAD": " "})
    inputs = read_coordinator_inputs(env, PROFILES)
    assert not inputs.pools.overridden
    assert len(inputs.pools.candidates) == 3


def test_underscore_spelling_is_a_fallback():
    env = {k.replace("-", "_"): v for k, v in VALID.items()}
    assert read_coordinator_inputs(env, PROFILES).source_ref == "refs/pull/123/merge"


def test_workload_is_forwarded_unchanged():
    raw = '{"artifact": "build-7", "run-id": 123,  "shard": 2}'
    assert read_coordinator_inputs(env_with({"INPUT_WORKLOAD": raw}), PROFILES).workload == raw


def test_pinned_after_start_is_accepted_literally():
    env = env_with({"INPUT_SOURCE-POLICY": "pinned-after-start"})
    assert read_coordinator_inputs(env, PROFILES).source_policy == "pinned-after-start"


def test_deadline_precedence_candidate_over_action_over_policy():
    """Per-candidate deadline > action-level > policy default."""
    env = env_with(
        {
            "INPUT_QUEUE-TIMEOUT-MINUTES": "7",
            "INPUT_RUNNERS": runners(
                cpu("linux-amd64-cpu16"), cpu("linux-amd64-cpu32", deadline=20)
            ),
        }
    )
    assert [c.queue_minutes for c in read_pool_settings(env, PROFILES).candidates] == [7, 20]
    env.pop("INPUT_QUEUE-TIMEOUT-MINUTES")
    assert [c.queue_minutes for c in read_pool_settings(env, PROFILES).candidates] == [10, 20]


def test_spec_override_example_with_final_duplicate():
    """The spec's example: CPU16, CPU32, then CPU32 again with 60 minutes."""
    env = env_with(
        {
            "INPUT_RUNNER-TYPE": "cpu-amd64",
            "INPUT_QUEUE-TIMEOUT-MINUTES": "10",
            "INPUT_RUNNERS": runners(
                cpu("linux-amd64-cpu16"),
                cpu("linux-amd64-cpu32"),
                cpu("linux-amd64-cpu32", deadline=60),
            ),
        }
    )
    candidates = read_pool_settings(env, PROFILES).candidates
    assert [(c.labels, c.queue_minutes) for c in candidates] == [
        ("linux-amd64-cpu16", 10),
        ("linux-amd64-cpu32", 10),
        ("linux-amd64-cpu32", 60),
    ]
    assert candidates[2].runner_json() == '{"group":"nv-cpu-general","labels":"linux-amd64-cpu32"}'


def test_override_replaces_the_list_and_appends_no_default():
    """An explicit list is the whole list, even under the extended policy."""
    env = env_with(
        {
            "INPUT_RUNNER-TYPE": "gpu",
            "INPUT_QUEUE-POLICY": "extended",
            "INPUT_RUNNERS": runners(cpu("linux-amd64-gpu-l4-latest-1", group="nv-gpu-general")),
        }
    )
    candidates = read_pool_settings(env, PROFILES).candidates
    assert [(c.group, c.labels, c.queue_minutes) for c in candidates] == [
        ("nv-gpu-general", "linux-amd64-gpu-l4-latest-1", 15)
    ]


def test_cpu_core_counts_may_differ_and_other_os_or_driver_track_allowed():
    env = env_with({"INPUT_RUNNERS": runners(cpu("linux-amd64-cpu64"), cpu("linux-amd64-cpu4"))})
    assert len(read_pool_settings(env, PROFILES).candidates) == 2
    gpu = env_with(
        {
            "INPUT_RUNNER-TYPE": "gpu",
            "INPUT_RUNNERS": runners(cpu("linux-amd64-gpu-h100-r570-1", group="nv-gpu-h100")),
        }
    )
    assert read_pool_settings(gpu, PROFILES).candidates[0].labels == "linux-amd64-gpu-h100-r570-1"


def test_memory_optimised_label_in_memory_group_is_accepted():
    env = env_with({"INPUT_RUNNERS": runners(cpu("linux-amd64-cpu16m", group="nv-cpu-memory"))})
    assert read_pool_settings(env, PROFILES).candidates[0].group == "nv-cpu-memory"


def test_runner_json_carries_group_and_labels_only():
    """The deadline is coordinator policy: the child's runner input has just group and labels."""
    env = env_with({"INPUT_RUNNERS": runners(cpu("linux-amd64-cpu8", deadline=3))})
    candidate = read_pool_settings(env, PROFILES).candidates[0]
    assert json.loads(candidate.runner_json()) == {
        "group": "nv-cpu-general",
        "labels": "linux-amd64-cpu8",
    }


@pytest.mark.parametrize(
    ("changes", "name"),
    [
        ({"INPUT_REQUEST-ID": None}, "request-id"),
        ({"INPUT_PARENT-RUN-ID": "abc"}, "parent-run-id"),
        ({"INPUT_PARENT-RUN-ATTEMPT": "0"}, "parent-run-attempt"),
        ({"INPUT_SOURCE-SHA": "123"}, "source-sha"),
        ({"INPUT_SOURCE-REF": "feature"}, "source-ref"),
        ({"INPUT_TOKEN": ""}, "token"),
    ],
)
def test_bad_guard_inputs(changes: dict[str, str | None], name: str):
    env = {
        "INPUT_REQUEST-ID": "rqf-1",
        "INPUT_PARENT-RUN-ID": "42",
        "INPUT_PARENT-RUN-ATTEMPT": "1",
        "INPUT_SOURCE-REF": "refs/heads/main",
        "INPUT_SOURCE-SHA": SHA,
        "INPUT_TOKEN": "t",
    }
    assert read_guard_inputs(env).parent_run_id == 42
    for key, value in changes.items():
        if value is None:
            env.pop(key)
        else:
            env[key] = value
    with pytest.raises(InputErrors) as info:
        read_guard_inputs(env)
    assert [e.name for e in info.value.errors] == [name]


def test_run_context_needs_the_runner_variables():
    with pytest.raises(InputErrors) as info:
        read_run_context({"GITHUB_REPOSITORY": "o/r"})
    assert {e.name for e in info.value.errors} == {"GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT"}
    ctx = read_run_context(
        {"GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "5", "GITHUB_RUN_ATTEMPT": "2"}
    )
    assert (ctx.run_id, ctx.run_attempt, ctx.api_url) == (5, 2, "https://api.github.com")


def test_input_error_shortens_huge_values():
    error = InputError("runners", "is bad", given="x" * 500)
    assert len(str(error)) < 200


@pytest.mark.parametrize(
    ("changes", "name", "fragment"),
    [case[1:] for case in BAD_INPUTS],
    ids=[c[0] for c in BAD_INPUTS],
)
def test_bad_input_stops_the_coordinate_step_before_any_request(
    changes: dict[str, str | None], name: str, fragment: str, no_network, capsys
):
    """Through the composition root: exit 2, an ::error naming the input, and no API request."""
    session, adapter = no_network
    environ = {
        **env_with(changes),
        "GITHUB_REPOSITORY": "octo-org/octo-repo",
        "GITHUB_RUN_ID": "42",
        "GITHUB_RUN_ATTEMPT": "1",
    }
    code = main(["coordinate"], environ, clock=FakeClock(), session=session)
    out = capsys.readouterr().out
    assert code == 2
    assert adapter.sent == []
    errors = [line for line in out.splitlines() if line.startswith("::error")]
    assert any(f"input '{name}'" in line and fragment in line for line in errors), out
    assert SECRET not in out


def test_execution_timeout_minutes_go_up_to_three_days():
    """The documented range, 1 to 4320 minutes: its last value is accepted, the next refused."""
    settings = read_pool_settings(
        env_with({env_name("execution-timeout-minutes"): "4320"}), PROFILES
    )
    assert settings.execution_timeout_minutes == 4320
    with pytest.raises(InputErrors) as info:
        read_coordinator_inputs(env_with({env_name("execution-timeout-minutes"): "4321"}), PROFILES)
    assert "1 to 4320" in str(info.value)
