"""The action's packaging: action.yml, guard/action.yml, the Dockerfile and its lock, the workflows.

Each external check runs the real tool from the same environment as pytest (never a hard-coded
path): check-jsonschema with SchemaStore's schemas, actionlint, hadolint.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from runner_queue_fallback.core.actions_io import COORDINATOR_OUTPUTS
from runner_queue_fallback.core.inputs import (
    COORDINATOR_INPUTS,
    GUARD_INPUTS,
    env_name,
    read_coordinator_inputs,
    read_guard_inputs,
    read_pool_settings,
)
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.workflow.plan import make_plan

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(sys.executable).parent
ACTION = ROOT / "action.yml"
GUARD = ROOT / "guard" / "action.yml"  # the composite guard (the default; no Docker)
DOCKER_GUARD = (
    ROOT / "guard" / "docker" / "action.yml"
)  # the Docker guard, same image as action.yml
DOCKERFILE = ROOT / "Dockerfile"
DEPENDABOT = ROOT / ".github" / "dependabot.yml"
LOCK = ROOT / "requirements" / "runtime.txt"
BASE = "python:3.12-slim"
EXAMPLES = sorted((ROOT / "examples").glob("*.yml"))
OWN_WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
WORKFLOWS = EXAMPLES + OWN_WORKFLOWS
SHA = "0123456789abcdef0123456789abcdef01234567"
VALID_COORDINATOR = {
    "workflow": "runner-worker.yml",
    "workflow-ref": "main",
    "source-ref": "refs/pull/1/merge",
    "source-sha": SHA,
    "runner-type": "cpu",
    "token": "t0ken",
}
VALID_GUARD = {
    "request-id": "rqf-1-1-1",
    "parent-run-id": "42",
    "parent-run-attempt": "1",
    "source-ref": "refs/pull/1/merge",
    "source-sha": SHA,
    "token": "t0ken",
}
ACTION_REF = re.compile(r"^[\w.-]+/runner-queue-fallback(/guard(/docker)?)?@(?P<sha>[0-9a-f]{40})$")
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _load(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    return data


def _on(workflow: dict[Any, Any]) -> Any:
    """The `on:` mapping (PyYAML reads the bare key `on` as the boolean True)."""
    return workflow.get("on", workflow.get(True))


def _tool(name: str, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    exe = TOOLS / name
    if not exe.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable}: run scripts/bootstrap")
    return subprocess.run(  # noqa: S603  # our own tool with our own file names
        [str(exe), *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


def _env(values: dict[str, str]) -> dict[str, str]:
    return {env_name(name): value for name, value in values.items()}


# -- external validators ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", [ACTION, GUARD, DOCKER_GUARD], ids=_rel)
def test_action_metadata_matches_the_schemastore_schema(path):
    """action.yml and both guard forms validate against SchemaStore's github-action schema."""
    result = _tool("check-jsonschema", "--builtin-schema", "vendor.github-actions", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", WORKFLOWS, ids=_rel)
def test_workflow_matches_the_schemastore_schema(path):
    """Every example and CI workflow validates against SchemaStore's github-workflow schema."""
    result = _tool("check-jsonschema", "--builtin-schema", "vendor.github-workflows", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", WORKFLOWS, ids=_rel)
def test_workflow_passes_actionlint(path):
    """actionlint finds nothing in any example or CI workflow."""
    result = _tool("actionlint", "-no-color", _rel(path))
    assert result.returncode == 0, result.stdout + result.stderr


def _local_copy(tmp_path: Path, workflows: list[Path], edit: dict[str, str] | None = None) -> Path:
    """A throwaway repository where the examples use this checkout's actions as ./ and ./guard."""
    repo = tmp_path / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / "guard" / "docker").mkdir(parents=True)
    for path in (ACTION, GUARD, DOCKER_GUARD, DOCKERFILE):
        shutil.copy(path, repo / path.relative_to(ROOT))
    for path in workflows:
        text = re.sub(
            r"[\w.-]+/runner-queue-fallback/(guard(/docker)?)@[0-9a-f]{40}",
            r"./\1",
            path.read_text(),
        )
        text = re.sub(r"[\w.-]+/runner-queue-fallback@[0-9a-f]{40}", "./", text)
        for old, new in (edit or {}).items():
            text = text.replace(old, new)
        (repo / ".github" / "workflows" / path.name).write_text(text)
    git = shutil.which("git")
    assert git, "git is needed: actionlint finds the project by its repository"
    subprocess.run([git, "init", "-q", str(repo)], check=True)  # noqa: S603
    return repo


def test_examples_pass_actionlint_against_our_action_yml(tmp_path):
    """With the actions referenced locally, actionlint checks every `with:` key and required input."""
    repo = _local_copy(tmp_path, EXAMPLES)
    result = _tool("actionlint", "-no-color", cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr


def test_examples_pass_actionlint_with_the_docker_guard(tmp_path):
    """The Docker form (guard/docker) takes the same `with:` keys: actionlint finds nothing either."""
    repo = _local_copy(tmp_path, EXAMPLES, edit={"uses: ./guard ": "uses: ./guard/docker "})
    children = [p.read_text() for p in (repo / ".github" / "workflows").glob("*worker.yml")]
    assert children
    assert all("uses: ./guard/docker " in text for text in children)
    result = _tool("actionlint", "-no-color", cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_a_misspelt_input(tmp_path):
    """The local-action check is live: a wrong input name in an example is reported."""
    repo = _local_copy(
        tmp_path,
        [ROOT / "examples" / "runner-check.yml", ROOT / "examples" / "runner-worker.yml"],
        edit={"runner-type: cpu": "runner_type: cpu", "request-id: ${{": "requestid: ${{"},
    )
    result = _tool("actionlint", "-no-color", cwd=repo)
    assert result.returncode != 0
    assert 'input "runner_type" is not defined' in result.stdout
    assert 'input "requestid" is not defined' in result.stdout


def test_dockerfile_passes_hadolint():
    """hadolint finds nothing in the Dockerfile."""
    result = _tool("hadolint", str(DOCKERFILE))
    assert result.returncode == 0, result.stdout + result.stderr


def test_dependabot_config_matches_the_schemastore_schema():
    """.github/dependabot.yml validates against SchemaStore's dependabot (v2) schema."""
    result = _tool("check-jsonschema", "--builtin-schema", "vendor.dependabot", str(DEPENDABOT))
    assert result.returncode == 0, result.stdout + result.stderr


# -- action.yml against the code -------------------------------------------------------------------


def test_coordinator_inputs_and_outputs_match_the_code():
    """action.yml declares the inputs core/inputs.py reads and the outputs core/actions_io.py writes."""
    action = _load(ACTION)
    assert tuple(action["inputs"]) == COORDINATOR_INPUTS
    assert tuple(action["outputs"]) == COORDINATOR_OUTPUTS


@pytest.mark.parametrize("path", [GUARD, DOCKER_GUARD], ids=_rel)
def test_guard_inputs_match_the_code(path):
    """Both guard forms declare exactly the inputs core/inputs.py reads for the guard, and no outputs."""
    guard = _load(path)
    assert tuple(guard["inputs"]) == GUARD_INPUTS
    assert "outputs" not in guard


@pytest.mark.parametrize("path", [ACTION, GUARD, DOCKER_GUARD], ids=_rel)
def test_every_input_and_output_is_described_and_defaults_are_strings(path):
    """Descriptions everywhere; a default is a (quoted) string, as the runner passes it."""
    action = _load(path)
    for name, spec in {**action["inputs"], **action.get("outputs", {})}.items():
        assert spec.get("description", "").strip(), name
    for name, spec in action["inputs"].items():
        if "default" in spec:
            assert isinstance(spec["default"], str), f"{name}: quote the default"


@pytest.mark.parametrize(
    ("path", "valid", "read"),
    [
        (ACTION, VALID_COORDINATOR, lambda env: read_coordinator_inputs(env, load_profiles())),
        (GUARD, VALID_GUARD, read_guard_inputs),
        (DOCKER_GUARD, VALID_GUARD, read_guard_inputs),
    ],
    ids=["action.yml", "guard/action.yml", "guard/docker/action.yml"],
)
def test_required_inputs_are_the_ones_the_code_requires(path, valid, read):
    """An input is `required: true` exactly when omitting it fails; the token has a default instead."""
    inputs = _load(path)["inputs"]
    read(_env(valid))  # the minimal valid set is accepted
    for name in inputs:
        omitted = {k: v for k, v in valid.items() if k != name}
        try:
            read(_env(omitted))
        except Exception:  # noqa: BLE001  # any failure means the code needs the input
            needed = True
        else:
            needed = False
        if name == "token":
            assert needed, "the code must refuse to run without a token"
            assert inputs[name]["default"] == "${{ github.token }}"
            assert inputs[name].get("required", False) is False
        else:
            assert inputs[name].get("required", False) is needed, name


@pytest.mark.parametrize(
    ("path", "valid", "read"),
    [
        (ACTION, VALID_COORDINATOR, lambda env: read_coordinator_inputs(env, load_profiles())),
        (GUARD, VALID_GUARD, read_guard_inputs),
        (DOCKER_GUARD, VALID_GUARD, read_guard_inputs),
    ],
    ids=["action.yml", "guard/action.yml", "guard/docker/action.yml"],
)
def test_defaults_are_what_the_code_applies_when_omitted(path, valid, read):
    """Passing action.yml's default gives the same inputs as leaving the input out."""
    inputs = _load(path)["inputs"]
    defaults = {
        name: spec["default"]
        for name, spec in inputs.items()
        if "default" in spec and "${{" not in spec["default"]
    }
    for name, default in defaults.items():
        omitted = {k: v for k, v in valid.items() if k != name}
        assert read(_env({**omitted, name: default})) == read(_env(omitted)), name


def test_documented_default_values():
    """The defaults the issues fix: standard, 180, 60, current, {} and the job's token."""
    inputs = _load(ACTION)["inputs"]
    got = {name: spec.get("default") for name, spec in inputs.items() if "default" in spec}
    assert got == {
        "queue-policy": "standard",
        "execution-timeout-minutes": "180",
        "admission-timeout-minutes": "60",
        "workload": "{}",
        "source-policy": "current",
        "api-version": "auto",  # issue 19
        "token": "${{ github.token }}",
    }
    parsed = read_coordinator_inputs(_env(VALID_COORDINATOR), load_profiles())
    assert parsed.api_version == "auto"
    assert parsed.pools.queue_policy == "standard"
    assert parsed.pools.execution_timeout_minutes == 180
    assert parsed.pools.admission_timeout_minutes == 60
    assert parsed.source_policy == "current"
    assert parsed.workload == "{}"


# -- entrypoints and the image ---------------------------------------------------------------------


def _dockerfile_bin_commands() -> set[str]:
    match = re.search(r"for command in ([\w ]+); do", DOCKERFILE.read_text())
    assert match, "the Dockerfile creates /app/bin/<command> in one loop"
    return set(match.group(1).split())


def test_runs_blocks_point_at_the_image_scripts():
    """Main runs coordinate, post runs cleanup (always), the Docker guard runs guard; no args anywhere.

    The runner starts the post step as a new container with --entrypoint set to post-entrypoint and
    the main step's args, so args would reach cleanup too: each entrypoint is a whole command.
    """
    runs = _load(ACTION)["runs"]
    assert runs == {
        "using": "docker",
        "image": "Dockerfile",
        "entrypoint": "/app/bin/coordinate",
        "post-entrypoint": "/app/bin/cleanup",
        "post-if": "always()",
    }
    guard_runs = _load(DOCKER_GUARD)["runs"]
    assert guard_runs == {
        "using": "docker",
        "image": "../../Dockerfile",
        "entrypoint": "/app/bin/guard",
    }
    assert (DOCKER_GUARD.parent / guard_runs["image"]).resolve() == DOCKERFILE
    assert _dockerfile_bin_commands() == {"coordinate", "cleanup", "guard"}


def _instructions() -> list[list[str]]:
    """The Dockerfile's instructions as [KEYWORD, rest], each with its continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    return [
        [parts[0].upper(), " ".join(parts[1].split())]
        for line in text.splitlines()
        if line.strip() and not line.startswith("#")
        for parts in [line.split(maxsplit=1)]
    ]


def _stages() -> list[list[list[str]]]:
    """The instructions of each build stage, split at every FROM."""
    stages: list[list[list[str]]] = []
    for instruction in _instructions():
        if instruction[0] == "FROM":
            stages.append([])
        stages[-1].append(instruction)
    return stages


def test_the_base_image_is_named_by_digest_once_and_the_stages_build_on_it():
    """The runner builds without --pull: a base named by tag is whatever the engine holds under it.

    So the one outside image is named by its digest (the tag kept for readers), in one `FROM`
    (written once: a literal Dependabot can move, no `ARG`), and every later stage is `FROM base`.
    """
    stages = _stages()
    assert _instructions()[0][0] == "FROM", "nothing (no ARG) before the base's FROM"
    image, _, alias = stages[0][0][1].partition(" AS ")
    assert alias == "base"
    assert re.fullmatch(rf"{re.escape(BASE)}@sha256:[0-9a-f]{{64}}", image), image
    assert len(stages) > 1
    assert [stage[0][1].split(" AS ")[0] for stage in stages[1:]] == ["base"] * (len(stages) - 1)
    aliases = {stage[0][1].partition(" AS ")[2] for stage in stages}
    copied_from = {
        rest.split()[0].removeprefix("--from=")
        for keyword, rest in _instructions()
        if keyword == "COPY" and rest.startswith("--from=")
    }
    assert copied_from <= aliases, "COPY --from names a stage, never an outside image"
    digest = image.partition("@")[2]
    instructions = " ".join(rest for _, rest in _instructions())
    assert instructions.count(digest) == 1


def test_dependabot_moves_the_base_images_digest():
    """Dependabot's docker ecosystem watches the Dockerfile's folder, so the digest follows patches."""
    updates = _load(DEPENDABOT)["updates"]
    [docker] = [update for update in updates if update["package-ecosystem"] == "docker"]
    assert ROOT / docker["directory"].lstrip("/") / "Dockerfile" == DOCKERFILE


def _stand_in(*args: str) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash, "bash runs the repository's scripts"
    return subprocess.run(  # noqa: S603  # our own script
        [bash, str(ROOT / "scripts" / "stand-in-dockerfile"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


def test_the_offline_builds_change_only_the_base_line_to_their_stand_in(tmp_path):
    """scripts/docker-smoke and guard-act build a copy whose base stage starts from a local image.

    Only that line differs; a Dockerfile with no digest-pinned base stage is refused, not copied.
    """
    result = _stand_in("local/stand-in:1")
    assert result.returncode == 0, result.stderr
    original, copy = DOCKERFILE.read_text().splitlines(), result.stdout.splitlines()
    changed = [(old, new) for old, new in zip(original, copy, strict=True) if old != new]
    assert changed == [(f"FROM {_stages()[0][0][1]}", "FROM local/stand-in:1 AS base")]
    by_tag = tmp_path / "Dockerfile"
    by_tag.write_text(DOCKERFILE.read_text().replace(_stages()[0][0][1], f"{BASE} AS base"))
    refused = _stand_in("local/stand-in:1", str(by_tag))
    assert refused.returncode == 1
    assert "no `FROM <image>@sha256:<digest> AS base` line" in refused.stderr


def test_dockerfile_follows_the_container_action_rules():
    """Slim base, no USER or WORKDIR, exec-form absolute ENTRYPOINT, unbuffered, no .pyc writes."""
    text = DOCKERFILE.read_text()
    base, builder, runtime = _stages()
    assert base[0][1].startswith(f"{BASE}@")
    assert builder[0] == ["FROM", "base AS builder"]
    assert runtime[0] == ["FROM", "base"], "the image runs on the base the venv was built on"
    keywords = [keyword for keyword, _ in builder + runtime]
    assert "USER" not in keywords
    assert "WORKDIR" not in keywords
    entrypoint = next(rest for keyword, rest in runtime if keyword == "ENTRYPOINT")
    assert re.fullmatch(r'\["/[^"]+"(, "[^"]+")*\]', entrypoint), entrypoint
    runtime_env = " ".join(rest for keyword, rest in runtime if keyword == "ENV")
    for setting in ("PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", "PYTHONSAFEPATH=1"):
        assert setting in text
        assert setting.split("=")[0] in runtime_env, f"{setting} in the runtime stage"
    assert "compileall" in text
    # Dependencies come from the lock, in a layer before the code is copied.
    assert text.index("COPY requirements/runtime.txt") < text.index("COPY runner_queue_fallback")


def test_runtime_stage_takes_only_the_builders_app_tree():
    """The runtime stage runs nothing and copies the venv, /app/bin, profiles and code, same paths."""
    *_, runtime = _stages()
    assert not [rest for keyword, rest in runtime if keyword == "RUN"]
    copies = [rest.split() for keyword, rest in runtime if keyword == "COPY"]
    assert all(len(parts) == 3 and parts[0] == "--from=builder" for parts in copies), copies
    assert {(source, target) for _, source, target in copies} == {
        (path, path)
        for path in ("/app/venv", "/app/bin", "/app/profiles", "/app/runner_queue_fallback")
    }


def test_profiles_are_where_the_package_finds_them_in_the_image(tmp_path):
    """Laid out as the builder copies it (/app/<package>, /app/profiles), profiles are found."""
    _, builder, _ = _stages()
    copies = {}
    for keyword, rest in builder:
        source, _, target = rest.partition(" ")
        if keyword == "COPY" and target.startswith("/app/"):
            copies[source] = target.removeprefix("/app/")
    app = tmp_path / "app"
    for source, target in copies.items():
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, app / target)
    assert copies.get("profiles") == "profiles"
    probe = (
        "from runner_queue_fallback.core.profiles import default_profiles_dir, load_profiles; "
        "print(default_profiles_dir()); print(len(load_profiles()))"
    )
    result = subprocess.run(  # noqa: S603  # the test's own interpreter
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(app), "PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    where, count = result.stdout.split()
    assert Path(where) == app / "profiles"
    assert int(count) > 0


def test_dockerignore_lets_in_only_what_the_dockerfile_copies():
    """.venv, tests, .git and docs never reach the build context."""
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = {
        rest.split()[0]
        for keyword, rest in _instructions()
        if keyword == "COPY" and not rest.startswith("--from=")
    }
    assert allowed == copied
    assert not allowed & {".venv", "tests", ".git", "docs"}


# -- the runtime lock ------------------------------------------------------------------------------

TOP_LEVEL = "runner-queue-fallback (pyproject.toml)"


def _lock() -> dict[str, tuple[str, list[str], set[str]]]:
    """requirements/runtime.txt as {name: (version, hashes, what it is pinned for)}."""
    entries: dict[str, tuple[str, list[str], set[str]]] = {}
    name = ""
    via_list = False
    for line in LOCK.read_text().splitlines():
        if match := re.match(r"^([A-Za-z0-9][\w.-]*)==(\S+) \\$", line):
            name = canonicalize_name(match[1])
            assert name not in entries, f"{name} pinned twice"
            entries[name] = (match[2], [], set())
        elif match := re.match(r"^    --hash=(\S+)", line):
            entries[name][1].append(match[1])
        elif match := re.match(r"^    # via(?: (.+))?$", line):
            via_list = match[1] is None
            entries[name][2].update([] if via_list else [match[1]])
        elif via_list and (match := re.match(r"^    #   (.+)$", line)):
            entries[name][2].add(match[1])
        else:
            via_list = False
            assert not line.strip() or line.startswith("#"), f"unexpected line in the lock: {line}"
    return entries


def _declared() -> dict[str, Requirement]:
    """pyproject.toml's [project].dependencies, by canonical name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(spec) for spec in project["dependencies"]]
    return {canonicalize_name(requirement.name): requirement for requirement in requirements}


def test_lock_pins_every_package_exactly_with_hashes():
    """Each lock entry is name==version with sha256 hashes; no index or host of this machine in it."""
    lock = _lock()
    assert lock
    for name, (_, hashes, _) in lock.items():
        assert hashes, f"{name} has no --hash"
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), name
    text = LOCK.read_text()
    for option in ("--index-url", "--extra-index-url", "--find-links", "--trusted-host", "://"):
        assert option not in text, f"{option} in the lock: regenerate it with scripts/lock"


def test_lock_pins_exactly_what_pyproject_dependencies_resolve_to():
    """pyproject's dependencies are the lock's top level, within their ranges, and nothing dangles.

    A changed range or a new dependency in pyproject.toml fails here until scripts/lock is rerun.
    """
    lock, declared = _lock(), _declared()
    top_level = {name for name, (_, _, via) in lock.items() if TOP_LEVEL in via}
    assert top_level == set(declared), "run scripts/lock after changing [project].dependencies"
    for name, requirement in declared.items():
        assert requirement.specifier.contains(lock[name][0], prereleases=True), name
    # Every other pin is there for a pinned package: the via graph reaches all from the top level.
    reached, todo = set(), list(top_level)
    while todo:
        name = todo.pop()
        reached.add(name)
        todo += [dep for dep, (_, _, via) in lock.items() if name in via and dep not in reached]
    assert reached == set(lock), f"pinned for nothing in the lock: {set(lock) - reached}"


def test_locked_packages_requirements_are_in_the_lock():
    """Read from installed metadata: what each locked version needs on Python 3.12 is pinned too."""
    lock = _lock()
    target = {"python_version": "3.12", "python_full_version": "3.12.0", "extra": ""}
    checked = 0
    for name, (version, _, _) in lock.items():
        try:
            if metadata.version(name) != version:
                continue  # the test environment has another version: its metadata says nothing
        except metadata.PackageNotFoundError:
            continue
        checked += 1
        for spec in metadata.requires(name) or []:
            requirement = Requirement(spec)
            if requirement.marker and not requirement.marker.evaluate(target):
                continue
            dep = canonicalize_name(requirement.name)
            assert dep in lock, f"{name}=={version} needs {spec}, which the lock leaves out"
            assert requirement.specifier.contains(lock[dep][0], prereleases=True), (name, spec)
    if not checked:
        pytest.skip("the .venv holds none of the locked versions: nothing to read metadata from")


GUARD_LOCK = ROOT / "requirements" / "guard.txt"


def _guard_lock_script() -> Any:
    from tests.script_files import load_file  # noqa: PLC0415 (only these tests read the script)

    return load_file(ROOT / "scripts" / "guard_lock.py", "guard_lock")


def test_the_guards_lock_is_the_runtime_lock_less_what_only_an_app_token_needs():
    """The composite guard never mints an App token: PyJWT, cryptography and what only they need
    stay out of its venv; every pin it keeps is the runtime lock's, hashes and all."""
    script = _guard_lock_script()
    assert GUARD_LOCK.read_text() == script.guard_lock(LOCK.read_text()), "run scripts/lock"
    runtime = LOCK.read_text()
    guard_entries = re.findall(
        r"(?m)^([A-Za-z0-9][\w.-]*)==(\S+) \\\n((?:    --hash=\S+.*\n)+)", GUARD_LOCK.read_text()
    )
    assert guard_entries
    for name, version, hashes in guard_entries:
        assert f"{name}=={version} \\\n{hashes}" in runtime, name
    guard_names = {canonicalize_name(name) for name, _, _ in guard_entries}
    assert not guard_names & {"pyjwt", "cryptography", "cffi", "pycparser"}
    assert {"pyjwt", "cryptography"} <= set(_lock())
    assert guard_names == set(_lock()) - {"pyjwt", "cryptography", "cffi", "pycparser"}


def test_the_guard_lock_keeps_a_package_that_a_kept_package_needs_too():
    script = _guard_lock_script()
    runtime = (
        "# header\n"
        "cffi==2 \\\n    --hash=sha256:aa\n    # via cryptography\n"
        "cryptography==50 \\\n    --hash=sha256:bb\n    # via runner-queue-fallback (pyproject.toml)\n"
        "pyjwt==2 \\\n    --hash=sha256:cc\n    # via runner-queue-fallback (pyproject.toml)\n"
        "shared==1 \\\n    --hash=sha256:dd\n    # via\n    #   cryptography\n    #   requests\n"
        "requests==2 \\\n    --hash=sha256:ee\n    # via runner-queue-fallback (pyproject.toml)\n"
    )
    kept = script.guard_lock(runtime)
    assert re.findall(r"(?m)^(\S+)==", kept) == ["shared", "requests"]
    assert "#   cryptography" not in kept
    assert "shared==1 \\\n    --hash=sha256:dd\n    # via\n    #   requests\n" in kept


def test_the_composite_guard_installs_the_guard_lock():
    text = (ROOT / "guard" / "prepare_venv.py").read_text()
    assert 'LOCK = ROOT / "requirements" / "guard.txt"' in text
    assert "scripts/guard_lock.py" in (ROOT / "scripts" / "lock").read_text()


def test_dockerfile_installs_only_from_the_lock_with_hashes():
    """The builder's one pip install takes requirements/runtime.txt with --require-hashes --no-deps."""
    installs = [rest for keyword, rest in _instructions() if "pip install" in rest]
    assert len(installs) == 1, installs
    args = installs[0].split("pip install", 1)[1].split("&&")[0].split()
    assert {"--require-hashes", "--no-deps"} <= set(args)
    _, builder, _ = _stages()
    copies = dict(rest.split() for keyword, rest in builder if keyword == "COPY")
    assert args[args.index("-r") + 1] == copies["requirements/runtime.txt"]
    assert "pyproject.toml" not in copies
    lock_script = (ROOT / "scripts" / "lock").read_text()
    assert "--generate-hashes" in lock_script
    assert "--output-file requirements/runtime.txt" in lock_script


# -- the example workflows -------------------------------------------------------------------------


def _steps_using_this_action(
    workflow: dict[str, Any],
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [
        (job, step)
        for job in workflow["jobs"].values()
        for step in job.get("steps", [])
        if "runner-queue-fallback" in step.get("uses", "")
    ]


def _coordinators() -> list[tuple[Path, dict[str, Any], dict[str, Any]]]:
    return [
        (path, job, step)
        for path in EXAMPLES
        for job, step in _steps_using_this_action(_load(path))
        if not re.search(r"/guard(/docker)?@", step["uses"])
    ]


def _children() -> list[Path]:
    return [path for path in EXAMPLES if "worker" in _load(path)["jobs"]]


def test_examples_pin_both_actions_to_one_commit():
    """Every example uses <owner>/runner-queue-fallback[/guard[/docker]]@<one 40-hex SHA>."""
    shas = set()
    for path in EXAMPLES:
        for _job, step in _steps_using_this_action(_load(path)):
            match = ACTION_REF.match(step["uses"])
            assert match, f"{path.name}: {step['uses']}"
            shas.add(match["sha"])
    assert len(shas) == 1


@pytest.mark.parametrize(
    ("path", "job", "step"), _coordinators(), ids=lambda v: v.name if isinstance(v, Path) else ""
)
def test_coordinator_timeout_covers_what_plan_says(path, job, step):
    """The coordinator job's timeout-minutes is at least the figure `plan` computes for its inputs."""
    # Expressions are only known at run time; plan checks every input it is given.
    with_ = {k: str(v) for k, v in step["with"].items() if "${{" not in str(v)}
    plan = make_plan(read_pool_settings(_env(with_), load_profiles()))
    assert job["timeout-minutes"] >= plan.timeout_minutes, path.name
    assert f">= {plan.timeout_minutes}" in path.read_text(), "note plan's figure in a comment"
    assert job["permissions"] == {"contents": "read", "actions": "write"}


@pytest.mark.parametrize(
    ("path", "job", "step"), _coordinators(), ids=lambda v: v.name if isinstance(v, Path) else ""
)
def test_child_timeout_covers_the_execution_timeout(path, job, step):
    """The child a coordinator dispatches exists and allows at least its execution timeout."""
    child_path = ROOT / "examples" / step["with"]["workflow"]
    child = _load(child_path)
    execution = int(step["with"].get("execution-timeout-minutes", "180"))
    assert child["jobs"]["worker"]["timeout-minutes"] >= execution, (path.name, child_path.name)


@pytest.mark.parametrize("path", _children(), ids=_rel)
def test_child_has_the_shape_the_coordinator_checks(path):
    """One job named worker, run-name = request-id, seven string inputs, guard then checkout."""
    child = _load(path)
    assert child["run-name"] == "${{ inputs.request-id }}"
    inputs = _on(child)["workflow_dispatch"]["inputs"]
    assert list(inputs) == [
        "request-id",
        "parent-run-id",
        "parent-run-attempt",
        "source-ref",
        "source-sha",
        "runner",
        "workload",
    ]
    assert all(spec == {"required": True, "type": "string"} for spec in inputs.values())
    assert child["permissions"] == {"contents": "read", "actions": "read"}
    assert list(child["jobs"]) == ["worker"]
    worker = child["jobs"]["worker"]
    assert worker["name"] == "worker"
    assert worker["runs-on"] == "${{ fromJSON(inputs.runner) }}"
    forbidden = {"strategy", "needs", "environment", "if", "concurrency", "permissions"}
    assert not forbidden & set(worker)
    guard, checkout = worker["steps"][:2]
    # Either form; the GPU child, a container job, uses the Docker form (lint's RQF122).
    assert re.search(r"/runner-queue-fallback/guard(/docker)?@", guard["uses"])
    wired = {name: f"${{{{ inputs.{name} }}}}" for name in GUARD_INPUTS[:5]}
    assert guard["with"] == {
        **wired,
        "coordinator-workflow": guard["with"]["coordinator-workflow"],
        "coordinator-ref": "refs/heads/main",
    }
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"] == {"ref": "${{ inputs.source-sha }}", "persist-credentials": False}


def test_parallel_and_cache_preparation_examples():
    """The matrix coordinator is bounded and independent; cache preparation pins after start."""
    matrix = _load(ROOT / "examples" / "parallel-check.yml")
    ((job, step),) = _steps_using_this_action(matrix)
    assert job["strategy"]["max-parallel"] == 2
    assert job["strategy"]["fail-fast"] is False
    assert "${{ matrix.shard }}" in step["with"]["workload"]
    cache = _load(ROOT / "examples" / "cache-prep.yml")
    ((_, step),) = _steps_using_this_action(cache)
    assert step["with"]["source-policy"] == "pinned-after-start"
    assert cache["concurrency"]["cancel-in-progress"] is False


# -- our own workflows -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", WORKFLOWS, ids=_rel)
def test_every_job_has_a_timeout_and_third_party_actions_are_pinned(path):
    """timeout-minutes on every job; other people's actions pinned by full SHA with a version comment."""
    workflow = _load(path)
    for name, job in workflow["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int), f"{path.name}: job {name}"
    for line in path.read_text().splitlines():
        match = re.search(r"uses: (\S+)(.*)", line)
        if not match or match[1].startswith(("./", "docker://")):
            continue
        if "runner-queue-fallback" in match[1]:
            continue  # this project's own actions: checked above against one placeholder SHA
        assert PINNED.match(match[1]), line
        assert re.search(r"# v\d", match[2]), f"{line}: add the version as a comment"


@pytest.mark.parametrize("path", OWN_WORKFLOWS, ids=_rel)
def test_own_workflows_start_with_no_permissions(path):
    """Our CI and release workflows grant nothing at the top and only what each job needs."""
    workflow = _load(path)
    assert workflow["permissions"] == {}
    for job in workflow["jobs"].values():
        assert job["permissions"].get("contents") == "read"


def test_release_tags_cover_version_major_and_commit():
    """The release pushes :vX.Y.Z, :vX and :<sha>, so consumers pinned by commit find their image."""
    text = (ROOT / ".github" / "workflows" / "release-image.yml").read_text()
    for tag in ('"$image:$TAG"', '"$image:$major"', '"$image:$SHA"'):
        assert tag in text
    release = _load(ROOT / ".github" / "workflows" / "release-image.yml")
    assert release["jobs"]["image"]["permissions"] == {"contents": "read", "packages": "write"}


INDEX_STAGE = ".venv/bin/pytest -n 0 -m index tests"


def test_ci_runs_the_same_command_as_dot_ci_run():
    """CI's test job runs scripts/test and then the tests that need the package index, as .ci/run."""
    ci = _load(ROOT / ".github" / "workflows" / "ci.yml")
    runs = [step.get("run") for step in ci["jobs"]["test"]["steps"]]
    assert runs[-2:] == ["scripts/test", INDEX_STAGE]
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert lines.index("scripts/test") < lines.index(INDEX_STAGE)
    assert "set -euo pipefail" in lines, "a failing stage fails CI"


def test_scripts_test_leaves_the_index_tests_to_their_own_stage():
    """pytest's default run (scripts/test's) deselects `index`; the stage's `-m index` selects them."""
    pytest_config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    options = pytest_config["ini_options"]["addopts"]
    assert options[options.index("-m") + 1] == "not index"
    assert any(marker.startswith("index:") for marker in pytest_config["ini_options"]["markers"])
