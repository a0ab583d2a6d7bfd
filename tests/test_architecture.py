"""Rules of the design that a grep can prove: time only through the Clock, and module boundaries."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "runner_queue_fallback"
MODULES = sorted(PACKAGE.rglob("*.py"))
REAL_TIME = {
    ("time", "sleep"),
    ("time", "monotonic"),
    ("time", "time"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
}


def _calls(path: Path) -> set[tuple[str, str]]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            found.add((node.value.id, node.attr))
    return found


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_clock_touches_real_time(path: Path):
    """Nothing but clock.py calls time.sleep, time.monotonic, time.time or datetime.now."""
    if path.name == "clock.py":
        return
    assert not (_calls(path) & REAL_TIME), f"{path.name} reads or waits on real time"


@pytest.mark.parametrize("path", sorted((PACKAGE / "sim").glob("*.py")), ids=lambda p: p.name)
def test_the_simulator_does_not_know_our_client(path: Path):
    """The fake describes GitHub, not our client's beliefs about GitHub."""
    forbidden = {"github", "observe", "coordinator", "sequence", "guard", "cleanup"}
    assert not {m for m in _imports(path) if m.split(".")[-1] in forbidden or ".github" in m}


SEQUENCE = ["coordinator.py", "guard.py", "cleanup.py"] + [
    str(p.relative_to(PACKAGE)) for p in sorted((PACKAGE / "sequence").glob("*.py"))
]


@pytest.mark.parametrize("name", SEQUENCE)
def test_the_sequence_does_not_import_the_simulator(name: str):
    path = PACKAGE / name
    assert path.exists()
    assert not {m for m in _imports(path) if m.split(".")[1:2] == ["sim"]}


@pytest.mark.parametrize(
    "name", ["inputs.py", "overrides.py", "profiles.py", "observe.py", "plan.py"]
)
def test_pure_modules_do_no_io(name: str):
    """inputs, profiles, plan and observe import nothing that talks to the network or the OS env."""
    path = PACKAGE / name
    if path.exists():
        assert not (_imports(path) & {"requests", "os", "subprocess", "socket"})
