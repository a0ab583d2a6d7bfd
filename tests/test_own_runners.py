"""Any team's pools (issue 42): `runners` as a team's labels already are, the family check kept.

Each test states one rule of core/overrides.py on the facts of core/machine.py: a team's own
labels with a declaration, GitHub's default labels, the original's scheme in any case; group-only
and labels-only candidates; each refusal named with the candidate as written and no request; the
declaration never reaching the child.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from runner_queue_fallback import cli
from runner_queue_fallback.commands.flags import input_help
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import InputErrors, read_pool_settings
from runner_queue_fallback.core.profiles import describe_runner_types, load_profiles
from tests.test_coordinator import Scenario, attempts

PROFILES = load_profiles()
ROOT = Path(__file__).resolve().parent.parent


def settings(runner_type: str, *items: Mapping[str, object]):
    environ = {"INPUT_RUNNER-TYPE": runner_type, "INPUT_RUNNERS": json.dumps(list(items))}
    return read_pool_settings(environ, PROFILES)


def refusal(runner_type: str, *items: Mapping[str, object]) -> str:
    with pytest.raises(InputErrors) as info:
        settings(runner_type, *items)
    (error,) = info.value.errors
    assert error.name == "runners"
    return str(error)


# -- accepted as written -----------------------------------------------------------------------


def test_a_teams_own_labels_work_with_a_declaration():
    found = settings(
        "gpu",
        {"group": "ci-gpu", "labels": ["self-hosted", "nvidia", "a6000"], "gpus": 1, "os": "linux"}
        | {"arch": "amd64"},
    )
    (candidate,) = found.candidates
    assert (candidate.group, candidate.labels) == ("ci-gpu", ("self-hosted", "nvidia", "a6000"))
    assert candidate.machine is not None
    assert candidate.machine.gpus == 1


def test_githubs_default_labels_work_for_a_cpu_type_with_no_declaration():
    found = settings(
        "cpu-arm64",
        {"labels": ["self-hosted", "Linux", "ARM64", "16core"]},
        {"group": "arm-big", "labels": ["self-hosted", "linux", "arm64", "32core"]},
    )
    assert [c.label_text for c in found.candidates] == [
        "self-hosted,Linux,ARM64,16core",
        "self-hosted,linux,arm64,32core",
    ]


def test_a_scheme_label_in_capitals_is_the_scheme():
    (candidate,) = settings("cpu", {"group": "g", "labels": "LINUX-AMD64-CPU16"}).candidates
    assert candidate.labels == "LINUX-AMD64-CPU16", "written as given, to the child too"
    message = refusal("cpu", {"group": "g", "labels": "LINUX-AMD64-GPU-L4-LATEST-1"})
    assert "family, architecture and GPU count must be kept" in message
    message = refusal("cpu", {"group": "g", "labels": "LINUX-AMD64-CPU16M"})
    assert "nv-cpu-memory" in message


def test_self_hosted_with_an_ubuntu_name_stays_self_hosted():
    """`[self-hosted, ubuntu-22.04]` is a common self-hosted labelling."""
    (candidate,) = settings(
        "cpu", {"labels": ["self-hosted", "ubuntu-22.04"], "os": "linux", "arch": "amd64"}
    ).candidates
    assert not candidate.hosted


def test_a_group_alone_and_labels_alone_are_candidates():
    found = settings(
        "gpu-amd64-4gpu",
        {"group": "quad-gpu", "os": "linux", "arch": "amd64", "gpus": 4},
        {"labels": ["self-hosted", "Linux", "X64", "quad"], "gpus": 4},
    )
    assert [json.loads(c.runner_json()) for c in found.candidates] == [
        {"group": "quad-gpu"},
        {"labels": ["self-hosted", "Linux", "X64", "quad"]},
    ]
    assert [c.pool_text for c in found.candidates] == [
        "quad-gpu / any labels in the group",
        "any group / self-hosted,Linux,X64,quad",
    ]


def test_the_declaration_is_policy_and_never_in_the_childs_runner():
    found = settings(
        "gpu-arm64-8gpu",
        {"group": "g", "labels": ["big"], "os": "linux", "arch": "arm64", "gpus": 8},
    )
    assert json.loads(found.candidates[0].runner_json()) == {"group": "g", "labels": ["big"]}


# -- refused, naming the candidate as written and both ways to give a fact ----------------------


def test_a_missing_gpu_count_is_named_with_the_candidate_as_written():
    message = refusal(
        "gpu",
        {"group": "ci", "labels": "linux-amd64-gpu-l4-latest-1"},
        {
            "group": "ci",
            "labels": ["self-hosted", "nvidia", "a6000"],
            "os": "linux",
            "arch": "amd64",
        },
    )
    assert message.startswith(
        "input 'runners' candidate 2 (group ci, labels [self-hosted, nvidia, a6000]): GPU count "
        'unknown; add "gpus": 1 to it, or a label such as linux-amd64-gpu-a6000-latest-1'
    )


@pytest.mark.parametrize(
    ("runner_type", "items", "fragment"),
    [
        ("cpu", [{"group": "g", "labels": ["Linux", "X64", "gpu-box"], "gpus": 1}], "gpu/amd64/1"),
        ("gpu-amd64-2gpu", [{"labels": ["self-hosted", "Linux", "X64"], "gpus": 1}], "needs gpu/"),
        ("cpu", [{"labels": ["self-hosted", "Linux", "ARM64"]}], "cpu/arm64/0"),
        (
            "cpu",
            [
                {"labels": ["self-hosted", "Linux", "X64"]},
                {"labels": ["self-hosted", "Windows", "X64"]},
            ],
            "runs on OS 'windows' but the first candidate on 'linux'",
        ),
        ("cpu-arm64", [{"labels": ["self-hosted", "Linux", "ARM"]}], "32-bit ARM"),
        ("cpu", [{"labels": ["self-hosted", "Linux", "X64"], "os": "macos"}], "differs"),
        ("cpu", [{"group": "ci", "labels": ["big"]}], "OS and architecture unknown"),
        ("gpu", [{"labels": ["Ubuntu-Latest"]}], "a GitHub-hosted image"),
        ("cpu", [{"labels": ["windows-latest"]}], '{"hosted": "windows-latest"}'),
        ("cpu", [{"labels": ["self-hosted", "Linux", "X64"], "cores": 8}], "unknown key"),
    ],
    ids=[
        "mixed-family",
        "fewer-gpus",
        "other-architecture",
        "other-os",
        "arm",
        "disagreement",
        "missing-facts",
        "hosted-image",
        "hosted-image-points-to-hosted",
        "unknown-key",
    ],
)
def test_each_refusal_is_an_input_error(runner_type, items, fragment):
    assert fragment in refusal(runner_type, *items)


def test_a_repeat_is_read_on_label_sets():
    """A repeat with its labels reordered, in another case, or holding more, is still a repeat."""
    first = {"labels": ["self-hosted", "Linux", "X64"]}
    again = {"labels": ["x64", "LINUX", "self-hosted", "big"]}
    other = {"group": "g", "labels": "linux-amd64-cpu8"}
    assert "only as the final candidate" in refusal("cpu", first, again, other)
    assert "own queue-timeout-minutes" in refusal("cpu", first, again)
    found = settings("cpu", first, {**again, "queue-timeout-minutes": 30})
    assert len(found.candidates) == 2


def test_candidates_without_scheme_labels_are_not_repeats_of_each_other():
    """Today every candidate without a scheme label compared as 'no label': a repeat of the first."""
    found = settings(
        "gpu",
        {"group": "a6000", "labels": ["self-hosted", "a6000"], "gpus": 1, "os": "linux"}
        | {"arch": "amd64"},
        {"group": "l40s", "labels": ["self-hosted", "l40s"], "gpus": 1, "os": "linux"}
        | {"arch": "amd64"},
        {"group": "h100", "os": "linux", "arch": "amd64", "gpus": 1},
    )
    assert len(found.candidates) == 3


def test_groups_alone_repeat_only_when_they_are_one_group():
    declared = {"os": "linux", "arch": "amd64"}
    message = refusal("cpu", {"group": "a", **declared}, {"group": "a", **declared}, {"group": "b"})
    assert "only as the final candidate" in message


def test_a_type_without_default_pools_requires_runners():
    with pytest.raises(InputErrors) as info:
        read_pool_settings({"INPUT_RUNNER-TYPE": "gpu-amd64-6gpu"}, PROFILES)
    (error,) = info.value.errors
    assert error.name == "runners"
    assert "is required for runner-type 'gpu-amd64-6gpu', which has no default pools" in str(error)


def test_a_refused_candidate_stops_coordinate_before_any_request(no_network, capsys):
    session, _ = no_network
    environ = {
        "INPUT_WORKFLOW": "runner-worker.yml",
        "INPUT_WORKFLOW-REF": "main",
        "INPUT_SOURCE-REF": "refs/heads/main",
        "INPUT_SOURCE-SHA": "0" * 40,
        "INPUT_RUNNER-TYPE": "gpu",
        "INPUT_RUNNERS": json.dumps([{"group": "ci", "labels": ["self-hosted", "a6000"]}]),
        "INPUT_TOKEN": "x" * 40,
        "GITHUB_REPOSITORY": "octo-org/octo-repo",
        "GITHUB_RUN_ID": "42",
        "GITHUB_RUN_ATTEMPT": "1",
    }
    assert cli.main(["coordinate"], environ, clock=FakeClock(), session=session) == 2
    assert "GPU count unknown" in capsys.readouterr().out


# -- through the coordinator and `plan` --------------------------------------------------------


def team_scenario() -> Scenario:
    """A team's CPU pools: GitHub's default labels with no group, then a group alone."""
    s = Scenario()
    s.world.add_pool("", ["self-hosted", "linux", "x64"], runners=1, busy=[(0.0, 10.0**9)])
    s.world.add_pool("team-ci", ["self-hosted", "big"], runners=1)
    s.inputs["runners"] = json.dumps(
        [
            {"labels": ["self-hosted", "Linux", "X64"], "queue-timeout-minutes": 5},
            {"group": "team-ci", "os": "linux", "arch": "amd64"},
        ]
    )
    return s


def test_a_teams_pools_run_through_the_coordinator_as_written():
    s = team_scenario()
    result = s.run()
    assert result.exit_code == 0, result.log
    sent = [json.loads(run.inputs["runner"]) for run in s.world.runs.values() if run.inputs]
    assert sent == [{"labels": ["self-hosted", "Linux", "X64"]}, {"group": "team-ci"}]
    entries = attempts(result)
    assert [(e["group"], e["labels"]) for e in entries] == [
        (None, ["self-hosted", "Linux", "X64"]),
        ("team-ci", None),
    ]
    assert "| 1 | any group / self-hosted,Linux,X64 |" in result.summary
    assert "| 2 | team-ci / any labels in the group |" in result.summary


def test_plan_says_any_group_and_any_labels(capsys):
    environ = {
        "INPUT_RUNNER-TYPE": "cpu",
        "INPUT_RUNNERS": json.dumps(
            [
                {"labels": ["self-hosted", "Linux", "X64"]},
                {"group": "ci", "os": "linux"} | {"arch": "amd64"},
            ]
        ),
    }
    assert cli.main(["plan"], environ) == 0
    out = capsys.readouterr().out
    assert "any group" in out
    assert "any labels in the group" in out
    assert cli.main(["plan", "--json"], environ) == 0
    candidates = json.loads(capsys.readouterr().out)["candidates"]
    assert [(c["group"], c["labels"]) for c in candidates] == [
        (None, ["self-hosted", "Linux", "X64"]),
        ("ci", None),
    ]


def test_plan_warns_which_guard_runs_on_another_os(capsys):
    environ = {
        "INPUT_RUNNER-TYPE": "cpu",
        "INPUT_RUNNERS": json.dumps([{"labels": ["self-hosted", "Windows", "X64"]}]),
    }
    assert cli.main(["plan"], environ) == 0
    out = capsys.readouterr().out
    assert "Windows" in out
    assert "guard/docker" in out


# -- every place that lists runner types reads the profiles ------------------------------------


def test_action_yml_and_the_help_list_every_runner_type():
    listed = describe_runner_types(PROFILES)
    assert "gpu-amd64-<N>gpu and gpu-arm64-<N>gpu for N GPUs on one worker, N from 2 to 8" in listed
    manifest = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert listed in manifest["inputs"]["runner-type"]["description"]
    assert listed in input_help("runner-type")
