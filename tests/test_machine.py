"""core/machine.py: a candidate's OS, architecture and GPU count, from each source and merged."""

from __future__ import annotations

import pytest

from runner_queue_fallback.core.machine import (
    Machine,
    MachineProblem,
    RunnerNeeds,
    other_os_note,
    parse_label,
    read_machine,
)

CPU = RunnerNeeds("cpu-amd64", "cpu", "amd64", 0)
CPU_ARM = RunnerNeeds("cpu-arm64", "cpu", "arm64", 0)
GPU1 = RunnerNeeds("gpu-amd64", "gpu", "amd64", 1)
GPU4 = RunnerNeeds("gpu-amd64-4gpu", "gpu", "amd64", 4)


# -- each source alone -------------------------------------------------------------------------


def test_a_declaration_alone_says_the_machine():
    declared = {"os": "linux", "arch": "amd64", "gpus": 4}
    assert read_machine(declared, (), GPU4) == Machine("linux", "amd64", 4)


def test_githubs_default_labels_say_os_and_architecture_in_any_case():
    assert read_machine({}, ("self-hosted", "Linux", "X64"), CPU) == Machine("linux", "amd64", 0)
    assert read_machine({}, ("SELF-HOSTED", "linux", "arm64"), CPU_ARM).arch == "arm64"
    assert read_machine({}, ("self-hosted", "macOS", "ARM64"), CPU_ARM).os == "macos"
    assert read_machine({}, ("self-hosted", "WINDOWS", "x64"), CPU).os == "windows"


def test_a_scheme_label_in_capitals_says_everything():
    """Today's regression: the scheme was read in lower case only, so this gave no fact."""
    assert parse_label("LINUX-ARM64-CPU16") is not None
    assert read_machine({}, ("LINUX-ARM64-CPU16",), CPU_ARM) == Machine("linux", "arm64", 0)
    gpu = read_machine({}, ("Linux-AMD64-GPU-H100-Latest-1",), GPU1)
    assert gpu == Machine("linux", "amd64", 1)


def test_a_memory_optimised_scheme_label_is_marked_in_any_case():
    assert read_machine({}, ("linux-amd64-cpu16M",), CPU).memory_optimised


# -- merged ------------------------------------------------------------------------------------


def test_sources_that_agree_merge():
    labels = ("self-hosted", "Linux", "X64", "linux-amd64-gpu-a6000-latest-1")
    assert read_machine({"gpus": 1, "arch": "amd64"}, labels, GPU1) == Machine("linux", "amd64", 1)


@pytest.mark.parametrize(
    ("declared", "labels", "needs", "first", "second"),
    [
        ({"os": "windows"}, ("self-hosted", "Linux", "X64"), CPU, '"os": "windows"', "'Linux'"),
        ({"arch": "arm64"}, ("linux-amd64-cpu16",), CPU, '"arch": "arm64"', "'linux-amd64-cpu16'"),
        ({}, ("X64", "ARM64", "Linux"), CPU, "'X64'", "'ARM64'"),
        ({"gpus": 2}, ("linux-amd64-gpu-l4-latest-1",), GPU1, '"gpus": 2', "latest-1'"),
    ],
    ids=["os", "arch-declared", "arch-labels", "gpus"],
)
def test_a_disagreement_names_both_sources(declared, labels, needs, first, second):
    with pytest.raises(MachineProblem) as info:
        read_machine(declared, labels, needs)
    message = str(info.value)
    assert "differs" in message
    assert first in message
    assert second in message


def test_githubs_32_bit_arm_label_has_no_supported_architecture():
    with pytest.raises(MachineProblem, match="32-bit ARM label: no supported architecture"):
        read_machine({}, ("self-hosted", "Linux", "ARM"), CPU_ARM)


@pytest.mark.parametrize(
    "declared",
    [{"os": "solaris"}, {"arch": "x64"}, {"gpus": 9}, {"gpus": -1}, {"gpus": True}, {"gpus": "1"}],
)
def test_a_declared_value_outside_the_allowed_is_named(declared):
    key = next(iter(declared))
    with pytest.raises(MachineProblem, match=f'"{key}" must be'):
        read_machine({"os": "linux", "arch": "amd64", **declared}, (), GPU1)


# -- missing facts -----------------------------------------------------------------------------


def test_a_gpu_count_is_never_guessed_from_a_name():
    """`l40s-4gpu` and `h100.8` look like counts; a wrong guess would drop GPUs."""
    with pytest.raises(MachineProblem, match="GPU count unknown"):
        read_machine({}, ("self-hosted", "Linux", "X64", "l40s-4gpu", "h100.8"), GPU4)


def test_a_missing_gpu_count_names_both_ways_to_give_it():
    with pytest.raises(MachineProblem) as info:
        read_machine({"os": "linux", "arch": "amd64"}, ("self-hosted", "nvidia", "a6000"), GPU1)
    assert str(info.value) == (
        'GPU count unknown; add "gpus": 1 to it, or a label such as linux-amd64-gpu-a6000-latest-1'
    )


def test_missing_os_and_architecture_name_the_declaration_and_the_labels():
    with pytest.raises(MachineProblem) as info:
        read_machine({}, ("arc-runner-set",), CPU_ARM)
    assert str(info.value) == (
        'OS and architecture unknown; add "os": "linux" and "arch": "arm64" to it, or a label '
        "such as linux-arm64-cpu16 (or GitHub's default labels Linux and ARM64)"
    )


def test_a_cpu_type_candidate_with_no_gpu_fact_is_a_cpu_machine():
    assert read_machine({}, ("self-hosted", "Linux", "X64"), CPU).gpus == 0


def test_only_linux_has_no_guard_note():
    assert other_os_note("linux") is None
    note = other_os_note("windows")
    assert note is not None
    assert "guard/docker" in note
    assert "Windows" in note
    assert "not been tried" in note
