"""The README's set-up and commands run as written: the install line, the commands, the by-hand run.

The README marks what it offers to be typed with an HTML comment before a `console` block:
`<!-- try: install -->` (a fresh venv, the install line, then the commands) and
`<!-- try: by hand -->` (a subcommand run with action inputs as `INPUT_*` variables). Each `$ `
line is a command, run as written by bash. The install block needs the package index (pip fetches
the build backend and the dependencies), so it is marked `index` and runs in `.ci/run`'s own stage;
the by-hand block runs with the command of the venv that runs the tests.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: What `pip install .` of a clone reads, and the files the README's commands name.
_CLONE = ("pyproject.toml", "README.md", "LICENSE", "runner_queue_fallback", "profiles", "examples")
_BLOCK = re.compile(r"<!-- try: (?P<name>[a-z ]+) -->\s*```console\n(?P<body>.*?)```", re.DOTALL)


def try_blocks(text: str) -> dict[str, list[str]]:
    """The commands of each marked `console` block, by its name (`$ ` lines, continuations joined)."""
    blocks: dict[str, list[str]] = {}
    for match in _BLOCK.finditer(text):
        body = match["body"].replace("\\\n", " ")
        commands = [line[2:] for line in body.splitlines() if line.startswith("$ ")]
        blocks[match["name"]] = commands
    return blocks


def _run(commands: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the commands in one bash, stopping at the first that fails; show each as it runs."""
    script = "set -euxo pipefail\n" + "\n".join(commands) + "\n"
    return subprocess.run(  # noqa: S603  # our own README's commands, in a scratch directory
        ["bash", "-c", script],  # noqa: S607  # bash from PATH, as a reader's shell would be
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _environ(path_first: Path | None = None) -> dict[str, str]:
    """The process environment without a venv of its own; `path_first` leads PATH."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_the_readme_offers_an_install_block_and_a_by_hand_block():
    blocks = try_blocks(README.read_text(encoding="utf-8"))
    install = blocks.get("install", [])
    assert any("pip install ." in line for line in install), install
    for command in ("--help", "plan", "lint", "simulate"):
        assert any(line.startswith(f"runner-queue-fallback {command}") for line in install), command
    by_hand = blocks.get("by hand", [])
    assert by_hand, "no `<!-- try: by hand -->` block"
    assert all(re.match(r"env ('INPUT_[A-Z-]+=[^']*' )+runner-queue-fallback ", c) for c in by_hand)


def test_the_by_hand_example_runs_as_written():
    """`env 'INPUT_RUNNER-TYPE=...' runner-queue-fallback plan`: the hyphenated names reach it."""
    commands = try_blocks(README.read_text(encoding="utf-8"))["by hand"]
    done = _run(commands, ROOT, _environ(Path(sys.executable).parent))
    assert done.returncode == 0, done.stderr + done.stdout
    assert "queue deadline" in done.stdout  # plan's table: the inputs were read, not refused


def _clone(into: Path) -> Path:
    """The files of a clone that `pip install .` and the README's commands need."""
    for name in _CLONE:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, into / name)
    return into


@pytest.mark.index
def test_the_readme_install_line_gives_the_command_in_a_fresh_venv(tmp_path: Path):
    """The install block as written, in a clone without a venv: the command is there and runs."""
    blocks = try_blocks(README.read_text(encoding="utf-8"))
    clone = _clone(tmp_path)
    python = Path(sys.executable).resolve().parent  # a python3 of 3.11+ first on PATH
    done = _run(blocks["install"] + blocks["by hand"], clone, _environ(python))
    assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-4000:]
    assert (clone / ".venv" / "bin" / "runner-queue-fallback").is_file()
    assert "usage: runner-queue-fallback" in done.stdout
    assert "as expected" in done.stdout  # simulate's verdict
