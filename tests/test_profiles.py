"""The shipped profile data files and the candidate lists they produce."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner_queue_fallback.core.errors import ProfileError
from runner_queue_fallback.core.machine import parse_label
from runner_queue_fallback.core.profiles import default_profiles_dir, load_profiles

SHIPPED = sorted(default_profiles_dir().glob("*.toml"))

# The spec's table, pool by pool: (runner type, standard order, extended final re-wait or None).
SPEC_TABLE = {
    "cpu-amd64": (
        ["linux-amd64-cpu16", "linux-amd64-cpu8", "linux-amd64-cpu32"],
        "linux-amd64-cpu32",
    ),
    "cpu-arm64": (
        ["linux-arm64-cpu16", "linux-arm64-cpu8", "linux-arm64-cpu32"],
        "linux-arm64-cpu32",
    ),
    "gpu-amd64": (
        [
            f"linux-amd64-gpu-{m}-latest-1"
            for m in ("rtxpro6000", "h100", "h200", "a100", "l40g", "l4")
        ],
        "linux-amd64-gpu-rtxpro6000-latest-1",
    ),
    "gpu-arm64": (
        [f"linux-arm64-gpu-{m}-latest-1" for m in ("gb300", "gh200", "a100", "l4")],
        None,
    ),
    "gpu-amd64-2gpu": (
        [f"linux-amd64-gpu-{m}-latest-2" for m in ("rtxpro6000", "h100", "h200")],
        "linux-amd64-gpu-rtxpro6000-latest-2",
    ),
    "gpu-arm64-2gpu": (["linux-arm64-gpu-l4-latest-2"], None),
}
#: Runner types for 3 to 8 GPUs on one worker: no catalogue pools, so `runners` is required.
WIDE_TYPES = [f"gpu-{arch}-{n}gpu" for arch in ("amd64", "arm64") for n in range(3, 9)]


def test_every_runner_type_of_the_spec_is_shipped():
    """One data file per runner type, and nothing else."""
    assert sorted(p.stem for p in SHIPPED) == sorted([*SPEC_TABLE, *WIDE_TYPES])


@pytest.mark.parametrize("runner_type", WIDE_TYPES)
def test_wide_gpu_types_have_no_pools_and_the_gpu_deadlines(runner_type: str):
    """3 to 8 GPUs: the type's machine, 10 minutes standard, 15 extended, no final re-wait."""
    profile = load_profiles()[runner_type]
    arch, count = runner_type.split("-")[1], int(runner_type.split("-")[2].removesuffix("gpu"))
    assert (profile.family, profile.arch, profile.gpus) == ("gpu", arch, count)
    assert profile.pools == ()
    assert profile.candidates("standard", None) == ()
    assert profile.candidates("extended", None) == ()
    assert profile.default_queue_minutes("standard") == 10
    assert profile.default_queue_minutes("extended") == 15


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_each_shipped_profile_loads_alone(path: Path, tmp_path: Path):
    """Every shipped file is valid on its own."""
    (tmp_path / path.name).write_text(path.read_text())
    assert path.stem in load_profiles(tmp_path)


def test_aliases_cpu_and_gpu():
    """cpu means cpu-amd64; gpu means gpu-amd64."""
    profiles = load_profiles()
    assert profiles["cpu"] is profiles["cpu-amd64"]
    assert profiles["gpu"] is profiles["gpu-amd64"]


@pytest.mark.parametrize("runner_type", sorted(SPEC_TABLE))
def test_standard_policy_keeps_the_order_with_ten_minutes(runner_type: str):
    """Standard: the table's order, 10-minute deadlines, no re-wait."""
    order, _ = SPEC_TABLE[runner_type]
    candidates = load_profiles()[runner_type].candidates("standard", None)
    assert [c.labels for c in candidates] == order
    assert {c.queue_minutes for c in candidates} == {10}


@pytest.mark.parametrize("runner_type", sorted(SPEC_TABLE))
def test_extended_policy_deadlines_and_final_rewait(runner_type: str):
    """Extended: CPU 10, GPU 15 minutes, plus the profile's 60-minute final re-wait where it has one."""
    order, final = SPEC_TABLE[runner_type]
    candidates = load_profiles()[runner_type].candidates("extended", None)
    normal = 10 if runner_type.startswith("cpu") else 15
    expected = [(label, normal) for label in order] + ([(final, 60)] if final else [])
    assert [(c.labels, c.queue_minutes) for c in candidates] == expected


def test_final_rewait_keeps_its_sixty_minutes_under_an_action_level_deadline():
    """queue-timeout-minutes replaces the normal deadlines, not the explicit final re-wait."""
    candidates = load_profiles()["cpu"].candidates("extended", 10)
    assert [c.queue_minutes for c in candidates] == [10, 10, 10, 60]


def test_gpu_pools_keep_their_group_next_to_the_label():
    """GPU pools live in GPU-specific groups; L4 in the general GPU group."""
    groups = {c.labels: c.group for c in load_profiles()["gpu"].candidates("standard", None)}
    assert groups["linux-amd64-gpu-l4-latest-1"] == "nv-gpu-general"
    assert groups["linux-amd64-gpu-h100-latest-1"] != "nv-gpu-general"
    assert all(
        c.group == "nv-cpu-general" for c in load_profiles()["cpu"].candidates("standard", None)
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("runner-type = 'x'", "Field required"),
        ("not toml [", "x.toml"),
    ],
)
def test_broken_profile_file_names_the_file(tmp_path: Path, text: str, problem: str):
    """A broken data file fails loudly with its name."""
    (tmp_path / "x.toml").write_text(text)
    with pytest.raises(ProfileError, match=r"x\.toml") as info:
        load_profiles(tmp_path)
    assert problem in str(info.value)


def test_profile_whose_labels_do_not_fit_its_type_is_refused(tmp_path: Path):
    """A GPU label in a CPU profile is a data error."""
    text = (
        (default_profiles_dir() / "cpu-amd64.toml")
        .read_text()
        .replace('"linux-amd64-cpu8"', '"linux-amd64-gpu-l4-latest-1"')
    )
    (tmp_path / "cpu-amd64.toml").write_text(text)
    with pytest.raises(ProfileError, match="does not fit the type"):
        load_profiles(tmp_path)


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("linux-amd64-cpu16", ("linux", "amd64", "cpu", 0, False)),
        ("linux-arm64-cpu16m", ("linux", "arm64", "cpu", 0, True)),
        ("linux-amd64-gpu-h100-latest-2", ("linux", "amd64", "gpu", 2, False)),
        ("windows-amd64-cpu8", ("windows", "amd64", "cpu", 0, False)),
    ],
)
def test_labels_are_read(label: str, expected: tuple[object, ...]):
    """OS, architecture, family, GPU count and memory optimisation come from the label."""
    info = parse_label(label)
    assert info is not None
    assert (info.os, info.arch, info.family, info.gpus, info.memory_optimised) == expected


@pytest.mark.parametrize("label", ["ubuntu-latest", "linux-x86-cpu8", "linux-amd64-gpu-h100", ""])
def test_unknown_labels_are_not_guessed(label: str):
    assert parse_label(label) is None
