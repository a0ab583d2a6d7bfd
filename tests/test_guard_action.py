"""The two guard forms: guard/action.yml (composite, no Docker) and guard/docker/action.yml (Docker).

Both must declare the same inputs and outputs, hand every input to the same `guard` command, and
give the same result for the same child. The composite's steps are checked for what makes them
safe (no `${{ }}` inside a script, pinned actions, an explicit shell) and its guard step is run the
way the runner runs it (bash, the step's env with the inputs filled in) against the fake GitHub on
a loopback server. guard/prepare_venv.py is tested for its pip commands and its cache rules;
scripts/guard-act runs both forms end to end under nektos/act, on a host and in `container:` jobs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.core.inputs import GUARD_INPUTS, env_name
from runner_queue_fallback.fake_github import FakeGitHub
from tests.script_files import load_file
from tests.test_guard import (
    COORDINATOR_WORKFLOW,
    PARENT_ID,
    REQUEST_ID,
    SOURCE_REF,
    TOKEN,
    dispatch_child,
    make_world,
)

ROOT = Path(__file__).resolve().parent.parent
COMPOSITE = ROOT / "guard" / "action.yml"
DOCKER = ROOT / "guard" / "docker" / "action.yml"
PREPARE = ROOT / "guard" / "prepare_venv.py"
LOCK = ROOT / "requirements" / "guard.txt"  # the composite guard's lock
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    return data


def _steps() -> list[dict[str, Any]]:
    runs = _load(COMPOSITE)["runs"]
    assert runs["using"] == "composite"
    steps: list[dict[str, Any]] = runs["steps"]
    return steps


def _guard_step() -> dict[str, Any]:
    (step,) = [s for s in _steps() if "-m runner_queue_fallback guard" in s.get("run", "")]
    return step


@pytest.fixture(scope="module")
def prepare() -> ModuleType:
    """guard/prepare_venv.py, imported from its file (it is a script, not part of the package)."""
    return load_file(PREPARE, "prepare_venv")


# -- the two manifests agree -----------------------------------------------------------------------


def test_both_forms_declare_the_same_inputs_and_outputs():
    """Same names, order, descriptions, required flags and defaults; same (no) outputs."""
    composite, docker = _load(COMPOSITE), _load(DOCKER)
    assert composite["inputs"] == docker["inputs"]
    assert list(composite["inputs"]) == list(docker["inputs"])
    assert composite.get("outputs") == docker.get("outputs")
    assert tuple(composite["inputs"]) == GUARD_INPUTS


def test_the_composite_hands_every_input_to_the_guard_as_the_runner_names_it():
    """One INPUT_<NAME> per declared input (hyphens kept, as for the Docker form), nothing else.

    Adding an input to the manifests without its env line here (or the reverse) fails this test.
    """
    env = _guard_step()["env"]
    passed = {name: value for name, value in env.items() if name.startswith("INPUT_")}
    declared = _load(COMPOSITE)["inputs"]
    assert passed == {env_name(name): f"${{{{ inputs.{name} }}}}" for name in declared}


def test_the_docker_form_runs_the_guard_in_the_coordinators_image():
    runs = _load(DOCKER)["runs"]
    assert runs == {"using": "docker", "image": "../../Dockerfile", "entrypoint": "/app/bin/guard"}
    assert (DOCKER.parent / runs["image"]).resolve() == ROOT / "Dockerfile"


# -- the composite's steps are safe ----------------------------------------------------------------


@pytest.mark.parametrize("step", _steps(), ids=lambda s: s.get("id") or s.get("name", "?"))
def test_no_expression_inside_a_script_and_an_explicit_portable_shell(step):
    """Outside text reaches a script through env only; every script runs in bash (Git Bash on Windows)."""
    if "run" in step:
        assert "${{" not in step["run"], "pass the value through env:, never inline it"
        assert step["shell"] == "bash"
    else:
        assert PINNED.match(step["uses"]), step["uses"]


def test_actions_used_by_the_composite_are_pinned_with_a_version_comment():
    for line in COMPOSITE.read_text(encoding="utf-8").splitlines():
        match = re.search(r"uses: (\S+)(.*)", line)
        if match:
            assert PINNED.match(match[1]), line
            assert re.search(r"# v\d", match[2]), line


def test_setup_python_runs_only_without_a_usable_python_and_a_failure_explains_itself():
    steps = {step.get("id"): step for step in _steps()}
    setup = steps["setup"]
    assert setup["uses"].startswith("actions/setup-python@")
    assert setup["if"] == "steps.python.outputs.path == ''"
    assert "continue-on-error" not in setup, "a failed setup must fail the guard (closed)"
    explain = next(s for s in _steps() if "failure()" in str(s.get("if", "")))
    assert "steps.setup.outcome == 'failure'" in explain["if"]
    assert "exit 1" in explain["run"]
    assert "::error" in explain["run"]


def test_the_guard_runs_isolated_from_the_workspace_and_python_variables():
    """-I: no PYTHON* variable, user site or working directory (an earlier job's files) is used."""
    step = _guard_step()
    assert step["run"].strip() == '"$RQF_GUARD_PYTHON" -I -m runner_queue_fallback guard'
    assert step["env"]["RQF_GUARD_PYTHON"] == "${{ steps.venv.outputs.python }}"


def test_the_python_probe_accepts_only_3_11_or_newer(tmp_path):
    """The probe's own check, run with this interpreter and with a stand-in that says 3.10."""
    probe = _steps()[0]["run"]
    bash = shutil.which("bash")
    assert bash
    for version, found in (("(3, 11)", True), ("(3, 10)", False)):
        fake = tmp_path / "bin"
        fake.mkdir(exist_ok=True)
        # A python3 that reports `version` and runs the probe's -c code (its last argument).
        fake_version = f"import sys; sys.version_info = {version}; exec(sys.argv[-1])"
        shim = f'#!/bin/sh\nexec {sys.executable} -c "{fake_version}" "$@"\n'
        for name in ("python3", "python"):
            (fake / name).write_text(shim)
            (fake / name).chmod(0o755)
        output = tmp_path / f"out-{found}"
        output.write_text("")
        result = subprocess.run(  # noqa: S603  # bash with the manifest's own script
            [bash, "-c", probe],
            env={"PATH": f"{fake}:/usr/bin:/bin", "GITHUB_OUTPUT": str(output)},
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert ("path=" in output.read_text()) is found, (version, output.read_text())


def _probe(tmp_path: Path, version: str | None, container: str) -> tuple[int, str, str]:
    """The probe run by bash with a python3 that says `version` (none at all for None).

    `container` is what `${{ job.container.id }}` gives the probe: empty outside a container job.
    Returns the exit code, the log and what the step wrote to GITHUB_OUTPUT.
    """
    bash = shutil.which("bash")
    assert bash
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    for name in ("python3", "python"):
        (fake / name).unlink(missing_ok=True)
        if version is not None:
            code = f"import sys; sys.version_info = {version}; exec(sys.argv[-1])"
            (fake / name).write_text(f'#!/bin/sh\nexec {sys.executable} -c "{code}" "$@"\n')
            (fake / name).chmod(0o755)
    output = tmp_path / "output"
    output.write_text("")
    step = _steps()[0]
    assert step["env"] == {"RQF_JOB_CONTAINER": "${{ job.container.id }}"}
    result = subprocess.run(  # noqa: S603  # bash with the manifest's own script
        [bash, "--noprofile", "--norc", "-c", step["run"]],
        # Only the fake's folder (the probe needs bash's builtins only): no python3 of this machine.
        env={"PATH": str(fake), "GITHUB_OUTPUT": str(output), "RQF_JOB_CONTAINER": container},
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr, output.read_text()


@pytest.mark.parametrize("version", [None, "(3, 10)"], ids=["no-python", "python-3.10"])
def test_in_a_job_container_without_python_3_11_the_probe_fails_closed_naming_the_docker_guard(
    tmp_path, version
):
    """No setup-python in a container job: the probe fails, so every later step is skipped."""
    code, log, output = _probe(tmp_path, version, container="4f2a9c0d1e3b")
    assert code == 1
    assert "path=" not in output
    assert "::error title=runner-queue-fallback guard::" in log
    assert "/runner-queue-fallback/guard/docker@" in log
    assert "actions/setup-python is not tried" in log
    assert "installing one with actions/setup-python" not in log


def test_outside_a_job_container_without_python_the_probe_leaves_it_to_setup_python(tmp_path):
    code, log, output = _probe(tmp_path, "(3, 10)", container="")
    assert (code, output) == (0, "")
    assert "installing one with actions/setup-python" in log


def test_in_a_job_container_with_python_3_11_the_probe_uses_the_images_python(tmp_path):
    code, log, output = _probe(tmp_path, "(3, 11)", container="4f2a9c0d1e3b")
    assert code == 0, log
    assert output.startswith("path=")


def test_the_container_is_known_from_the_job_context_not_from_dockerenv():
    """/.dockerenv also exists when the runner itself runs in Docker, where setup-python works."""
    text = COMPOSITE.read_text(encoding="utf-8")
    scripts = "\n".join(step.get("run", "") for step in _steps())
    assert ".dockerenv" not in scripts
    assert ".containerenv" not in scripts
    assert "RQF_JOB_CONTAINER: ${{ job.container.id }}" in text


def test_guard_act_skips_the_container_runs_without_an_engine_unless_required(tmp_path):
    """No Docker engine (as on a CI machine): a clean skip, exit 0; with --require, a failure."""
    bash = shutil.which("bash")
    assert bash
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "PYTHON": sys.executable,
        "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock",
        "TMPDIR": str(tmp_path),
        "HOME": str(tmp_path),
    }
    codes = {}
    for extra in ([], ["--require"]):
        result = subprocess.run(  # noqa: S603  # the repository's own script
            [bash, str(ROOT / "scripts" / "guard-act"), *extra, "container"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert "SKIP container: " in result.stdout, result.stdout + result.stderr
        codes[bool(extra)] = result.returncode
    assert codes == {False: 0, True: 1}


# -- the guard step as the runner runs it, against the fake GitHub on loopback ----------------------


@pytest.fixture
def served() -> Iterator[tuple[FakeGitHub, str]]:
    world = make_world(FakeClock())
    with world.serve() as url:
        yield world, url


def _with(world: FakeGitHub) -> dict[str, str]:
    """The child's `with:` for the guard, as examples/runner-worker.yml wires it (token included)."""
    return {
        "request-id": REQUEST_ID,
        "parent-run-id": str(PARENT_ID),
        "parent-run-attempt": "1",
        "source-ref": SOURCE_REF,
        "source-sha": world.refs["heads/feature"],
        "coordinator-workflow": COORDINATOR_WORKFLOW,
        "coordinator-ref": "refs/heads/main",
        "guard-quota-wait-minutes": "10",  # the runner fills in the default
        "api-version": "auto",  # not in the example's with: the runner fills in the default
        "token": TOKEN,
    }


def _runner_env(world: FakeGitHub, url: str, run_id: int, tmp_path: Path) -> dict[str, str]:
    summary = tmp_path / "summary.md"
    summary.write_text("")
    return {
        "PATH": "/usr/bin:/bin",
        "GITHUB_RUN_ID": str(run_id),
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_REPOSITORY": world.repository,
        "GITHUB_API_URL": url,
        "GITHUB_STEP_SUMMARY": str(summary),
    }


def _run_composite_step(
    env: dict[str, str], values: dict[str, str], runner: str = ""
) -> subprocess.CompletedProcess[str]:
    """The composite's guard step: its env with ${{ inputs.* }} filled in, its script in bash.

    `runner`: the runner context's `name` (`${{ runner.name }}`).
    """
    step = _guard_step()
    filled = {}
    for name, value in step["env"].items():
        expression = EXPRESSION.fullmatch(value)
        assert expression, f"{name}: {value}"
        ref = expression[1]
        if ref.startswith("inputs."):
            filled[name] = values[ref.removeprefix("inputs.")]
        elif ref == "runner.name":
            filled[name] = runner
        else:
            assert ref == "steps.venv.outputs.python"
            filled[name] = sys.executable  # the venv prepare_venv.py makes: here, the test's own
    bash = shutil.which("bash")
    assert bash
    return subprocess.run(  # noqa: S603  # bash with the manifest's own script
        [bash, "-c", step["run"]],
        env={**env, **filled},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _run_docker_entrypoint(
    env: dict[str, str], values: dict[str, str], runner: str = ""
) -> subprocess.CompletedProcess[str]:
    """The Docker form: the runner sets INPUT_<NAME> for every declared input, then the entrypoint.

    `runner`: the runner's name, which the runner hands the container as RUNNER_NAME with the
    rest of the runner context (a Docker action's `runs.env` cannot use that context).
    """
    declared = _load(DOCKER)["inputs"]
    inputs = {env_name(name): values[name] for name in declared}
    named = {"RUNNER_NAME": runner} if runner else {}
    return subprocess.run(
        [sys.executable, "-I", "-m", "runner_queue_fallback", "guard"],
        env={**env, **inputs, **named},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


FORMS = {"composite": _run_composite_step, "docker": _run_docker_entrypoint}


@pytest.mark.parametrize("form", FORMS)
def test_both_forms_pass_a_genuine_child(served, tmp_path, form):
    world, url = served
    run_id = dispatch_child(world)
    env = _runner_env(world, url, run_id, tmp_path)
    result = FORMS[form](env, _with(world))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Guard passed: the workload may start" in result.stdout
    summary = (tmp_path / "summary.md").read_text()
    # attempt, request id, identity, parent, first, source, runner
    assert summary.count("| pass |") == 7
    assert TOKEN not in summary
    assert [line for line in result.stdout.splitlines() if TOKEN in line] == [
        f"::add-mask::{TOKEN}"
    ]


def test_the_composite_passes_the_runner_context_s_name_to_the_guard():
    """The guard compares its runner with the one GitHub shows: the step hands it the name."""
    assert _guard_step()["env"]["RUNNER_NAME"] == "${{ runner.name }}"


@pytest.mark.parametrize("form", FORMS)
def test_both_forms_compare_the_runner_they_run_on_with_the_one_github_shows(
    served, tmp_path, form
):
    """The job got runner linux-amd64-cpu16-001: the guard there reads that name and passes."""
    world, url = served
    world.add_pool("nv-cpu-general", "linux-amd64-cpu16", runners=1)
    run_id = dispatch_child(world)
    world.clock.sleep(10.0)  # listed at 2 s, and a runner takes it
    job = world.runs[run_id].job
    assert job is not None
    assert job.runner_name == "linux-amd64-cpu16-001"
    env = _runner_env(world, url, run_id, tmp_path)
    result = FORMS[form](env, _with(world), runner="linux-amd64-cpu16-001")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "child runner holds (the job worker shown on this runner, " in result.stdout
    assert "'linux-amd64-cpu16-001')" in result.stdout


@pytest.mark.parametrize("form", FORMS)
def test_both_forms_refuse_a_moved_source_with_exit_1(served, tmp_path, form):
    world, url = served
    run_id = dispatch_child(world)
    values = _with(world)
    world.move_ref("heads/feature")
    result = FORMS[form](_runner_env(world, url, run_id, tmp_path), values)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "title=Guard refused the workload::source ref: expected" in result.stdout
    assert "| FAIL |" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", GUARD_INPUTS)
def test_both_forms_read_every_input(served, tmp_path, form, name):
    """Each input reaches the program: a wrong value in it changes the outcome in both forms."""
    world, url = served
    run_id = dispatch_child(world)
    wrong = {
        "request-id": "rqf-someone-else",
        "parent-run-id": "0",  # not a run id: refused before any request
        "parent-run-attempt": "2",
        "source-ref": "refs/heads/other",
        "source-sha": "f" * 40,
        "coordinator-workflow": "ci.yml",  # the parent is a run of another workflow
        "coordinator-ref": "refs/heads/other",  # the parent ran from main
        "guard-quota-wait-minutes": "61",  # more than an hour: refused before any request
        "api-version": "2024-01-01",  # not a version the input allows: refused before any request
        "token": "",  # blank: the input is missing
    }
    values = {**_with(world), name: wrong[name]}
    result = FORMS[form](_runner_env(world, url, run_id, tmp_path), values)
    assert result.returncode != 0, (name, result.stdout)
    assert "Guard passed" not in result.stdout


# -- prepare_venv.py: pip commands and the wheel cache ---------------------------------------------


def test_every_pip_command_takes_only_the_lock_with_hashes(prepare, tmp_path):
    pip = ["python", "-m", "pip"]
    install = prepare.install_command(pip, LOCK, tmp_path)
    download = prepare.download_command(pip, LOCK, tmp_path)
    for command in (install, download):
        assert {"--require-hashes", "--no-deps", "--only-binary=:all:"} <= set(command)
        assert command[command.index("-r") + 1] == str(LOCK)
    assert install[len(pip)] == "install"
    assert "--no-index" in install, "an install reads only the verified wheel cache"
    assert install[install.index("--find-links") + 1] == str(tmp_path)
    assert download[len(pip)] == "download"
    assert download[download.index("--dest") + 1] == str(tmp_path)


def test_the_wheel_cache_is_keyed_by_lock_python_and_platform(prepare, tmp_path):
    lock = tmp_path / "runtime.txt"
    lock.write_text("a==1 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    first = prepare.wheelhouse_for({"RUNNER_TOOL_CACHE": str(tmp_path)}, lock)
    assert first.parent == tmp_path / "runner-queue-fallback-guard"
    assert f"py{sys.version_info[0]}{sys.version_info[1]}-" in first.name
    lock.write_text(lock.read_text() + "b==2 \\\n    --hash=sha256:" + "1" * 64 + "\n")
    assert prepare.wheelhouse_for({"RUNNER_TOOL_CACHE": str(tmp_path)}, lock) != first


def _venvs(tmp_path: Path) -> tuple[list[Path], Any]:
    """A stand-in for prepare_venv.new_venv: numbered empty folders, and the list of them."""
    made: list[Path] = []

    def make_venv() -> Path:
        made.append(tmp_path / f"venv-{len(made)}")
        made[-1].mkdir()
        return made[-1]

    return made, make_venv


def test_a_cache_that_does_not_verify_is_downloaded_again_never_used(
    prepare, tmp_path, monkeypatch
):
    """pip's hash check fails on the cache: that venv is dropped; a fresh download replaces the
    cache and is installed into a new venv."""
    house = tmp_path / "cache" / "abc-py311"
    house.mkdir(parents=True)
    (house / "tampered.whl").write_text("x")
    calls: list[tuple[list[str], Path]] = []

    def fake_run(command: list[str], _env: dict[str, str], cwd: Path) -> bool:
        calls.append((command, cwd))
        if "download" in command:
            Path(command[command.index("--dest") + 1], "good.whl").write_text("ok")
            return True
        source = Path(command[command.index("--find-links") + 1])
        return (source / "good.whl").exists()  # only the fresh download verifies

    monkeypatch.setattr(prepare, "_run", fake_run)
    monkeypatch.setattr(prepare, "pip_command", lambda python: ["pip", str(python)])
    made, make_venv = _venvs(tmp_path)
    env_dir, start = prepare.install(LOCK, house, make_venv, ["--cert", "ca.pem"], {})
    assert (env_dir, start) == (made[1], "cold")
    assert not made[0].exists(), "the venv the failed install ran in is gone"
    assert [c[0][2] for c in calls] == ["install", "download", "install"]
    assert [c[1] for c in calls] == [made[0], made[1], made[1]]
    first, download, second = (c[0] for c in calls)
    assert Path(first[first.index("--find-links") + 1]) == house
    assert Path(second[second.index("--find-links") + 1]) != house, "install from the fresh one"
    assert download[download.index("--cert") + 1] == "ca.pem", "transport options: downloads only"
    assert "--cert" not in first + second
    assert sorted(p.name for p in house.iterdir()) == ["good.whl"], "the cache was replaced"
    calls.clear()
    assert prepare.install(LOCK, house, make_venv, [], {}) == (made[2], "warm")
    assert [c[0][2] for c in calls] == ["install"]


def test_a_failed_download_fails_closed_with_a_message(prepare, tmp_path, monkeypatch):
    monkeypatch.setattr(prepare, "_run", lambda *_args: False)
    monkeypatch.setattr(prepare, "pip_command", lambda python: ["pip", str(python)])
    with pytest.raises(prepare.PrepareError, match="cold start needs the package index"):
        prepare.install(LOCK, tmp_path / "cache" / "abc", _venvs(tmp_path)[1], [], {})
    assert not list((tmp_path / "cache").iterdir()), "no half-downloaded cache is left"


def test_every_venv_is_a_new_directory(prepare, tmp_path, monkeypatch):
    """Two jobs never share a venv, even with the same RUNNER_TEMP."""
    made: list[Path] = []

    def create(_self: Any, env_dir: str) -> None:
        made.append(Path(env_dir))
        prepare._venv_paths(made[-1])["purelib"].mkdir(parents=True)

    monkeypatch.setattr(prepare.venv.EnvBuilder, "create", create)
    monkeypatch.setattr(prepare, "install", lambda _l, _h, make_venv, *_args: (make_venv(), "warm"))
    monkeypatch.setattr(prepare, "verify_venv", lambda *_args: None)
    environ = {"RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(tmp_path / "out")}
    assert prepare.main(environ) == 0
    assert prepare.main(environ) == 0
    assert len(set(made)) == 2
    assert all(m.parent == tmp_path for m in made)
    outputs = (tmp_path / "out").read_text().splitlines()
    assert [line.split("=", 1)[0] for line in outputs] == ["python", "python"]
    for env_dir in made:
        (pth,) = prepare._venv_paths(env_dir)["purelib"].glob("*.pth")
        assert pth.read_text().strip() == str(ROOT), "the action's own checkout, not a copy"


def test_the_lock_has_no_markers_that_leave_out_a_supported_python():
    """No environment marker in the lock: every pin applies on Python 3.11, 3.12 and 3.13."""
    pins = [line for line in LOCK.read_text().splitlines() if re.match(r"^[A-Za-z0-9]", line)]
    assert pins
    assert not [line for line in pins if ";" in line]
