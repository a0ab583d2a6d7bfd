"""How a workflow is read (`workflow/model.py`): YAML nested past any stack is a finding.

Both loaders `model` may use (libyaml, with its own depth limit, and PyYAML's recursive one)
read a file nested 100,000 deep as RQF000, never a traceback: in `lint` itself, and in
`preflight`, which reads the child file from GitHub with the same model.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import yaml

from runner_queue_fallback import cli
from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import env_name
from runner_queue_fallback.fake_github.world import FakeGitHub
from runner_queue_fallback.tools.simulate.steps import (
    PARENT_RUN_ID,
    TOKEN,
    standard_world,
)
from runner_queue_fallback.workflow import model
from tests.scenario import CPU16
from tests.test_input_rules import coordinator_inputs
from tests.test_sim_support import GROUP

#: YAML nested far deeper than libyaml's limit (1000) and Python's stack.
DEEP_YAML = "[" * 100_000 + "]" * 100_000


def run_main(argv: list[str], environ: dict[str, str] | None = None) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(argv, environ or {}, clock=FakeClock())
    return code, out.getvalue()


@pytest.fixture(params=["libyaml", "pure-python"])
def yaml_loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both loaders `model` may use: libyaml (its own depth limit) or PyYAML's recursive one."""
    if request.param == "pure-python":
        monkeypatch.setattr(model, "_LOADER", yaml.SafeLoader)
    elif not hasattr(yaml, "CSafeLoader"):  # pragma: no cover - libyaml ships in PyYAML's wheels
        pytest.skip("PyYAML without libyaml")
    return str(request.param)


@pytest.mark.found_by("review", issue=26)
def test_deep_yaml_in_a_linted_workflow_is_an_input_error(tmp_path: Path, yaml_loader: str):
    """`lint` on a workflow file nested 100,000 deep.

    Before (PyYAML's own loader): RecursionError, a traceback. After: RQF000, exit 1.
    """
    coordinator = tmp_path / "deep.yml"
    coordinator.write_text(f"on: {DEEP_YAML}\n")
    code, out = run_main(["lint", str(coordinator)])
    assert code == 1, out
    assert "RQF000" in out
    assert "nesting" in out
    assert "Traceback" not in out


@pytest.mark.found_by("review", issue=26)
def test_deep_yaml_in_the_child_file_that_preflight_reads(yaml_loader: str):
    """`preflight` reads the child file from GitHub: one nested 100,000 deep.

    Before (PyYAML's own loader): RecursionError, a traceback. After: the child check fails
    with RQF000, exit 1, and nothing is posted.
    """
    clock = FakeClock()
    world, sha = standard_world(clock, FakeGitHub(clock))
    world.add_pool(GROUP, CPU16, runners=1)
    world.add_workflow("runner-worker.yml", "main", content=f"on: {DEEP_YAML}\n")
    environ = {env_name(k): v for k, v in coordinator_inputs(sha).items()}
    environ |= {
        env_name("token"): TOKEN,
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": world.api_url,
        "GITHUB_RUN_ID": str(PARENT_RUN_ID),
        "GITHUB_RUN_ATTEMPT": "1",
    }
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["preflight"], environ, clock=clock, session=world.session())
    text = out.getvalue()
    assert code == 1, text
    assert "RQF000" in text
    assert "Traceback" not in text
    assert [e for e in world.ledger if e.method == "POST"] == []
