"""The fake describes GitHub, not our client's beliefs: `fake_github/` never imports the product's logic."""

from __future__ import annotations

import ast
from pathlib import Path

import runner_queue_fallback.fake_github

FORBIDDEN = ("github", "observe", "coordinator", "guard", "cleanup", "parent")
SIM = Path(runner_queue_fallback.fake_github.__file__).parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_sim_imports_nothing_of_the_client_or_the_coordinator():
    bad = {
        f"{path.name}: {name}"
        for path in SIM.glob("*.py")
        for name in imported_modules(path)
        if name.startswith("runner_queue_fallback.") and name.split(".")[1] in FORBIDDEN
    }
    assert bad == set()


def test_sim_uses_githubkit_only_in_tests():
    assert not any(
        name.startswith("githubkit") for path in SIM.glob("*.py") for name in imported_modules(path)
    )
