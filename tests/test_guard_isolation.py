"""The composite guard's environment: no pip or Python configuration an earlier job left reaches it.

Issue 26, item 1. On a persistent self-hosted runner an earlier job can leave files and settings
behind; each test plants one such way in, with a payload that writes a marker file if it ever runs
(and, like the exploit the review found, prints "Guard passed" and exits 0). Every test has its own
HOME, XDG_CONFIG_HOME, XDG_CONFIG_DIRS, RUNNER_TEMP and tool cache, and an environment built from
nothing, so this machine's own pip configuration (extra indexes, find-links, a constraint file,
PIP_* variables) does not leak in. What is planted (`VECTORS`):

- `user-pip-conf`, `global-pip-conf`: a pip.conf in ~/.config/pip and ~/.pip, or in
  $XDG_CONFIG_DIRS/pip, that adds a requirements file and a find-links folder holding a poisoned
  wheel (its requirement carries the wheel's own hash, so --require-hashes alone lets it in; the
  wheel's .pth runs the payload);
- `pip-variables`: PIP_REQUIREMENT, PIP_CONSTRAINT, PIP_FIND_LINKS, PIP_TARGET, PIP_PREFIX, PIP_SRC,
  PIP_USER and PIP_CONFIG_FILE (a file with the same extra requirement);
- `python-variables`: PYTHONPATH (a sitecustomize and a shadow `runner_queue_fallback`),
  PYTHONSTARTUP, PYTHONUSERBASE (a usercustomize and a .pth) and a PYTHONHOME no Python can start
  from;
- `user-site`: a usercustomize and a .pth in the user site of the runner's Python (~/.local);
- `workspace`: the working directory holds a shadow `pip`, `runner_queue_fallback` and sitecustomize;
- `stale-venv`: a venv left in RUNNER_TEMP by a previous job, with a .pth and a fake interpreter;
- `poisoned-cache` (`plant_poisoned_cache`): the guard's wheel cache holds a tampered copy of every
  locked wheel (same name, a .pth added) and an extra poisoned wheel;
- and, offline only: a poisoned index (PIP_INDEX_URL, honoured: its wheel fails the lock's hash),
  and a locked wheel that itself brings a .pth (refused before any venv interpreter starts).

Offline, in scripts/test: guard/prepare_venv.py run the way the composite runs it (the runner's
Python, `-I`) on a lock of one tiny wheel made here, with every vector planted at once (each
payload has its own marker, so none hides another), cold (downloaded from a file:// index that a
planted pip.conf names: a transport setting, so it is honoured) and warm; the probe step and the
guard step of guard/action.yml with the Python vectors planted; pip's own reading of planted
configuration compared with prepare_venv.py's. With the `index` marker (a CI stage of its own,
after scripts/test: `pytest -m index`): the composite guard's own steps with the real lock against
the fake GitHub on loopback, cold from the package index with every vector planted, then warm with
each vector alone, and with a poisoned cache (downloaded again).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from runner_queue_fallback.core.clock import FakeClock
from runner_queue_fallback.fake_github import FakeGitHub
from tests.script_files import load_file
from tests.test_guard import dispatch_child, make_world
from tests.test_guard_action import EXPRESSION, _runner_env, _steps, _with

ROOT = Path(__file__).resolve().parent.parent
PREPARE = ROOT / "guard" / "prepare_venv.py"
LOCK = ROOT / "requirements" / "guard.txt"  # the composite guard's lock
#: The runner's Python: the interpreter this test venv was made from (not the venv, which holds
#: pytest and this project).
BASE_PYTHON = Path(getattr(sys, "_base_executable", sys.executable))
PASSED = "Guard passed"
#: What a planted payload does if it runs: leave its marker, then claim the guard passed.
PAYLOAD = (
    "import os, pathlib; pathlib.Path({marker!r}).write_text('ran'); "
    "print('Guard passed: the workload may start'); os._exit(0)"
)
#: Runs guard/prepare_venv.py's main() on another lock (the tests' tiny one), as `python -I` would.
DRIVER = (
    "import importlib.util, os, sys; from pathlib import Path; "
    "spec = importlib.util.spec_from_file_location('prepare_venv', sys.argv[1]); "
    "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
    "sys.exit(module.main(dict(os.environ), Path(sys.argv[2])))"
)


@pytest.fixture(scope="module")
def prepare() -> ModuleType:
    return load_file(PREPARE, "prepare_venv")


# -- wheels, an index and a lock, made here ---------------------------------------------------------


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel holding `files` (a .pth among them runs at every interpreter start)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    contents = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: rqf-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    rows = [
        f"{path},sha256={_digest(text.encode())},{len(text.encode())}"
        for path, text in contents.items()
    ]
    contents[f"{info}/RECORD"] = "\n".join([*rows, f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
    return wheel


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lock_for(path: Path, wheels: list[tuple[str, str, Path]]) -> Path:
    """A lock in requirements/runtime.txt's form: `name==version` with the wheel's hash."""
    lines = [
        f"{name}=={version} \\\n    --hash=sha256:{sha256(wheel)}"
        for name, version, wheel in wheels
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def make_index(root: Path, wheels: list[Path]) -> str:
    """A file:// simple index (PEP 503) serving `wheels`; its URL."""
    for wheel in wheels:
        project = wheel.name.split("-")[0].replace("_", "-")
        page = root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        shutil.copy(wheel, page / wheel.name)
        link = f'<a href="{wheel.name}#sha256={sha256(wheel)}">{wheel.name}</a>'
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>{link}</body></html>\n")
    return (root / "simple").as_uri()


# -- a machine of its own per test -------------------------------------------------------------------


@dataclass
class Rig:
    """One test's own runner: its folders, its environment, and the markers payloads would write."""

    root: Path
    env: dict[str, str]
    workspace: Path
    markers: list[Path] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return Path(self.env["HOME"])

    def marker(self, name: str) -> Path:
        """A marker file of its own for one planted payload."""
        marker = self.root / "markers" / name
        self.markers.append(marker)
        return marker

    def payload(self, name: str) -> str:
        """The payload's code for one planted file."""
        return PAYLOAD.format(marker=str(self.marker(name)))

    def ran(self) -> list[str]:
        """The payloads that ran (none, if the guard's environment is closed)."""
        return [marker.name for marker in self.markers if marker.exists()]

    def user_site(self) -> Path:
        version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
        return self.home / ".local" / "lib" / version / "site-packages"


def make_rig(tmp_path: Path) -> Rig:
    """Folders of its own for everything pip and Python read, and `python3` on PATH as on a runner."""
    home = tmp_path / "home"
    bin_dir = tmp_path / "bin"
    for folder in (
        home,
        bin_dir,
        tmp_path / "etc-xdg",
        tmp_path / "runner-temp",
        tmp_path / "markers",
    ):
        folder.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(BASE_PYTHON)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {
        "PATH": os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"]),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CONFIG_DIRS": str(tmp_path / "etc-xdg"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
        "RUNNER_TOOL_CACHE": str(tmp_path / "tool-cache"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
    }
    return Rig(tmp_path, env, workspace)


def poisoned_wheel(rig: Rig) -> tuple[Path, Path]:
    """A find-links folder with a wheel whose .pth runs a payload, and a requirements file asking
    for it with its own hash (so --require-hashes alone would let it in)."""
    folder = rig.root / "evil-wheels"
    wheel = make_wheel(
        folder, "rqf-evil", "1.0", {"rqf_evil.pth": rig.payload("poisoned-wheel") + "\n"}
    )
    requirements = rig.root / "evil-requirements.txt"
    requirements.write_text(f"rqf-evil==1.0 --hash=sha256:{sha256(wheel)}\n")
    return folder, requirements


def evil_pip_conf(rig: Rig) -> str:
    """A pip.conf that adds the poisoned requirement and its folder to every install and download."""
    folder, requirements = poisoned_wheel(rig)
    return (
        f"[global]\nfind-links = {folder}\n"
        f"[install]\nrequirement = {requirements}\n"
        f"[download]\nrequirement = {requirements}\n"
    )


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def plant_user_pip_conf(rig: Rig) -> None:
    _write(rig.home / ".config" / "pip" / "pip.conf", evil_pip_conf(rig))
    _write(rig.home / ".pip" / "pip.conf", evil_pip_conf(rig))


def plant_global_pip_conf(rig: Rig) -> None:
    _write(Path(rig.env["XDG_CONFIG_DIRS"]) / "pip" / "pip.conf", evil_pip_conf(rig))


def plant_pip_variables(rig: Rig) -> None:
    folder, requirements = poisoned_wheel(rig)
    conf = _write(rig.root / "elsewhere" / "pip.conf", evil_pip_conf(rig))
    rig.env |= {
        "PIP_REQUIREMENT": str(requirements),
        "PIP_CONSTRAINT": str(requirements),
        "PIP_FIND_LINKS": str(folder),
        "PIP_TARGET": str(rig.root / "target"),
        "PIP_PREFIX": str(rig.root / "prefix"),
        "PIP_SRC": str(rig.root / "src"),
        "PIP_USER": "1",
        "PIP_CONFIG_FILE": str(conf),
    }


def plant_python_variables(rig: Rig) -> None:
    path = rig.root / "evil-path"
    _write(path / "sitecustomize.py", rig.payload("pythonpath-sitecustomize") + "\n")
    _write(path / "runner_queue_fallback" / "__init__.py", "")
    _write(path / "runner_queue_fallback" / "__main__.py", rig.payload("pythonpath-package") + "\n")
    userbase = rig.root / "evil-userbase"
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = userbase / "lib" / version / "site-packages"
    _write(site / "usercustomize.py", rig.payload("pythonuserbase-usercustomize") + "\n")
    _write(site / "evil.pth", rig.payload("pythonuserbase-pth") + "\n")
    startup = _write(rig.root / "startup.py", rig.payload("pythonstartup") + "\n")
    rig.env |= {
        "PYTHONPATH": str(path),
        "PYTHONSTARTUP": str(startup),
        "PYTHONUSERBASE": str(userbase),
        "PYTHONHOME": str(rig.root / "no-python-here"),  # any Python it reaches fails to start
    }


def plant_user_site(rig: Rig) -> None:
    _write(rig.user_site() / "usercustomize.py", rig.payload("user-site-usercustomize") + "\n")
    _write(rig.user_site() / "evil.pth", rig.payload("user-site-pth") + "\n")


def plant_workspace(rig: Rig) -> None:
    _write(rig.workspace / "sitecustomize.py", rig.payload("workspace-sitecustomize") + "\n")
    _write(rig.workspace / "pip" / "__init__.py", "")
    _write(rig.workspace / "pip" / "__main__.py", rig.payload("workspace-pip") + "\n")
    _write(rig.workspace / "runner_queue_fallback" / "__init__.py", "")
    _write(
        rig.workspace / "runner_queue_fallback" / "__main__.py",
        rig.payload("workspace-package") + "\n",
    )


def plant_stale_venv(rig: Rig) -> None:
    stale = Path(rig.env["RUNNER_TEMP"]) / "rqf-guard-venv-stale"
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    _write(
        stale / "pyvenv.cfg", f"home = {BASE_PYTHON.parent}\ninclude-system-site-packages = false\n"
    )
    _write(
        stale / "lib" / version / "site-packages" / "evil.pth", rig.payload("stale-venv-pth") + "\n"
    )
    python = _write(
        stale / "bin" / "python",
        f"#!/bin/sh\n{BASE_PYTHON} -c {rig.payload('stale-venv-python')!r}\n",
    )
    python.chmod(0o755)


def plant_poisoned_cache(rig: Rig, wheelhouse: Path) -> None:
    """Every wheel in the guard's cache gets a .pth added; a poisoned extra wheel lies beside them."""
    for wheel in sorted(wheelhouse.glob("*.whl")):
        with zipfile.ZipFile(wheel, "a") as archive:
            archive.writestr(
                "zz_tampered.pth", rig.payload(f"tampered-{wheel.name.split('-')[0]}") + "\n"
            )
    make_wheel(
        wheelhouse,
        "rqf-evil-cached",
        "1.0",
        {"rqf_evil_cached.pth": rig.payload("cached-extra") + "\n"},
    )


#: The vectors that need nothing but the rig (the cache is planted once it exists).
VECTORS: dict[str, Callable[[Rig], None]] = {
    "user-pip-conf": plant_user_pip_conf,
    "global-pip-conf": plant_global_pip_conf,
    "pip-variables": plant_pip_variables,
    "python-variables": plant_python_variables,
    "user-site": plant_user_site,
    "workspace": plant_workspace,
    "stale-venv": plant_stale_venv,
}


def plant_all(rig: Rig) -> None:
    """Every vector at once (each payload has its own marker, so none can hide another's)."""
    for plant in VECTORS.values():
        plant(rig)


# -- guard/prepare_venv.py on a tiny lock, offline ---------------------------------------------------


@dataclass
class Tiny:
    """A lock of one harmless wheel, served by a file:// index that a pip.conf names."""

    lock: Path
    wheel: Path
    conf: Path


def tiny_lock(rig: Rig, *extra: tuple[str, str, dict[str, str]]) -> Tiny:
    folder = rig.root / "genuine"
    wheels = [
        (
            "rqf-harmless",
            "1.0",
            make_wheel(folder, "rqf-harmless", "1.0", {"rqf_harmless.py": "VALUE = 1\n"}),
        )
    ]
    wheels += [
        (name, version, make_wheel(folder, name, version, files)) for name, version, files in extra
    ]
    index = make_index(rig.root / "index", [wheel for _, _, wheel in wheels])
    # index-url is a transport setting: honoured from the user's pip.conf (or the file
    # PIP_CONFIG_FILE names, which replaces it), whatever else that file holds.
    conf = Path(rig.env.get("PIP_CONFIG_FILE") or rig.home / ".config" / "pip" / "pip.conf")
    existing = conf.read_text() if conf.exists() else ""
    _write(conf, f"[global]\nindex-url = {index}\n" + existing.replace("[global]\n", "", 1))
    return Tiny(lock_for(rig.root / "lock.txt", wheels), wheels[0][2], conf)


def run_prepare(rig: Rig, lock: Path) -> subprocess.CompletedProcess[str]:
    """guard/prepare_venv.py as the composite's venv step runs it: the runner's Python, -I."""
    output = Path(rig.env["GITHUB_OUTPUT"])
    output.write_text("")
    return subprocess.run(  # noqa: S603  # the runner's Python with our own script
        [str(BASE_PYTHON), "-I", "-c", DRIVER, str(PREPARE), str(lock)],
        env=rig.env,
        cwd=rig.workspace,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def output_python(rig: Rig) -> Path:
    lines = Path(rig.env["GITHUB_OUTPUT"]).read_text().splitlines()
    (python,) = [line.removeprefix("python=") for line in lines if line.startswith("python=")]
    return Path(python)


def site_packages(prepare: ModuleType, python: Path) -> list[str]:
    return sorted(
        path.name
        for directory in prepare.site_dirs(python.parent.parent)
        for path in directory.iterdir()
    )


def use_venv(rig: Rig, python: Path) -> subprocess.CompletedProcess[str]:
    """Start the prepared venv's interpreter the way the guard step does (any planted .pth runs now)."""
    code = "import rqf_harmless, runner_queue_fallback; print(runner_queue_fallback.__file__)"
    return subprocess.run(  # noqa: S603  # the venv's interpreter, fixed arguments
        [str(python), "-I", "-c", code],
        env=rig.env,
        cwd=rig.workspace,
        capture_output=True,
        text=True,
        check=False,
    )


def assert_prepared_and_closed(
    prepare: ModuleType, rig: Rig, result: subprocess.CompletedProcess[str], start: str
) -> None:
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{start} start" in result.stdout
    python = output_python(rig)
    assert site_packages(prepare, python) == [
        "rqf_harmless-1.0.dist-info",
        "rqf_harmless.py",
        prepare.PTH_NAME,
    ], "exactly the lock and the guard's own .pth"
    used = use_venv(rig, python)
    assert used.returncode == 0, used.stdout + used.stderr
    assert used.stdout.strip() == str(ROOT / "runner_queue_fallback" / "__init__.py")
    assert rig.ran() == []
    assert PASSED not in result.stdout + used.stdout


def test_a_cold_prepare_with_every_vector_planted_installs_only_the_lock(prepare, tmp_path):
    """The tiny lock comes from the honoured index and is installed; no payload runs.

    Every vector at once keeps scripts/test quick; the `index` tests plant each one alone.
    """
    rig = make_rig(tmp_path)
    plant_all(rig)
    tiny = tiny_lock(rig)
    result = run_prepare(rig, tiny.lock)
    assert_prepared_and_closed(prepare, rig, result, "cold")
    assert f"index-url ({tiny.conf})" in result.stdout


def test_a_warm_prepare_with_every_vector_planted_installs_only_the_lock(prepare, tmp_path):
    rig = make_rig(tmp_path)
    plant_all(rig)
    tiny = tiny_lock(rig)
    wheelhouse = prepare.wheelhouse_for(rig.env, tiny.lock)
    wheelhouse.mkdir(parents=True)
    shutil.copy(tiny.wheel, wheelhouse)
    result = run_prepare(rig, tiny.lock)
    assert_prepared_and_closed(prepare, rig, result, "warm")


def test_a_poisoned_wheel_cache_is_never_installed_and_is_replaced(prepare, tmp_path):
    """The cache's tampered copy fails its hash: a new venv gets the lock from the index."""
    rig = make_rig(tmp_path)
    tiny = tiny_lock(rig)
    wheelhouse = prepare.wheelhouse_for(rig.env, tiny.lock)
    wheelhouse.mkdir(parents=True)
    shutil.copy(tiny.wheel, wheelhouse)
    plant_poisoned_cache(rig, wheelhouse)
    result = run_prepare(rig, tiny.lock)
    assert "did not verify; downloading it again into a new venv" in result.stdout
    assert_prepared_and_closed(prepare, rig, result, "cold")
    assert [path.name for path in wheelhouse.iterdir()] == [tiny.wheel.name]
    assert sha256(wheelhouse / tiny.wheel.name) == sha256(tiny.wheel)


def test_a_poisoned_index_changes_nothing_that_is_installed(prepare, tmp_path):
    """index-url is honoured, so an earlier job can redirect downloads: the hashes refuse its wheel."""
    rig = make_rig(tmp_path)
    tiny = tiny_lock(rig)
    poisoned = make_wheel(
        rig.root / "poisoned",
        "rqf-harmless",
        "1.0",
        {"rqf_harmless.py": "", "zz.pth": rig.payload("index") + "\n"},
    )
    rig.env["PIP_INDEX_URL"] = make_index(rig.root / "evil-index", [poisoned])
    result = run_prepare(rig, tiny.lock)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "cold start needs the package index" in result.stdout
    assert "index-url (PIP_INDEX_URL)" in result.stdout
    assert rig.ran() == []
    assert not list(Path(rig.env["RUNNER_TEMP"]).glob("*/lib/*/site-packages/zz.pth"))


def test_a_locked_wheel_that_brings_a_pth_is_refused_before_any_venv_interpreter_starts(tmp_path):
    """Even a locked distribution may not run code at startup: the check reads the venv from outside."""
    rig = make_rig(tmp_path)
    startup = ("rqf-startup", "2.0", {"rqf_startup.pth": rig.payload("locked-pth") + "\n"})
    tiny = tiny_lock(rig, startup)
    result = run_prepare(rig, tiny.lock)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "rqf_startup.pth, which would run at every start of its interpreter" in result.stdout
    assert "None of its interpreters was started" in result.stdout
    assert rig.ran() == []
    assert not Path(rig.env["GITHUB_OUTPUT"]).read_text(), "no interpreter for the guard step"


# -- the check of the venv, and pip's environment, in process ---------------------------------------


def _venv_with(
    prepare: ModuleType, tmp_path: Path, *dists: tuple[str, str], extra: tuple[str, ...] = ()
) -> Path:
    """A venv-shaped folder whose site-packages holds these distributions (and `extra` files)."""
    env_dir = tmp_path / "venv"
    purelib = prepare._venv_paths(env_dir)["purelib"]
    purelib.mkdir(parents=True)
    for name, version in dists:
        info = purelib / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text(f"{name}/__init__.py,,\n{info.name}/METADATA,,\n")
        (purelib / name).mkdir()
    for name in extra:
        (purelib / name).write_text("")
    return env_dir


@pytest.mark.parametrize(
    ("dists", "extra", "named"),
    [
        ((("a", "1"), ("b", "2"), ("evil", "1")), (), "evil 1 (not in the lock)"),
        ((("a", "1"),), (), "no b (the lock pins 2)"),
        ((("a", "1"), ("b", "3")), (), "b 3 (the lock pins 2)"),
        (
            (("a", "1"), ("b", "2")),
            ("distutils-precedence.pth",),
            "distutils-precedence.pth, which would run",
        ),
        ((("a", "1"), ("b", "2")), ("sitecustomize.py",), "sitecustomize.py, which would run"),
        (
            (("a", "1"), ("b", "2")),
            ("usercustomize.cpython-311.pyc",),
            "usercustomize.cpython-311.pyc, which",
        ),
        (
            (("a", "1"), ("b", "2")),
            ("stray.py",),
            "stray.py, which no installed distribution lists",
        ),
    ],
    ids=["extra", "missing", "version", "pth", "sitecustomize", "usercustomize", "stray"],
)
def test_the_venv_check_refuses_anything_but_the_lock_and_names_it(
    prepare, tmp_path, dists, extra, named
):
    lock = tmp_path / "lock.txt"
    lock.write_text(
        "a==1 \\\n    --hash=sha256:" + "0" * 64 + "\nB==2 \\\n    --hash=sha256:" + "1" * 64 + "\n"
    )
    env_dir = _venv_with(prepare, tmp_path, *dists, extra=extra)
    with pytest.raises(prepare.PrepareError, match="does not match the lock") as refused:
        prepare.verify_venv(env_dir, lock)
    assert named in str(refused.value)
    prepare.verify_venv(_venv_with(prepare, tmp_path / "good", ("a", "1"), ("b", "2")), lock)


def test_no_fallback_makes_a_venv_with_its_own_pip(prepare, monkeypatch):
    """ensurepip would bring setuptools' .pth: without the interpreter's pip the guard fails closed."""
    find_spec = prepare.importlib.util.find_spec
    monkeypatch.setattr(
        prepare.importlib.util, "find_spec", lambda name: None if name == "pip" else find_spec(name)
    )
    monkeypatch.setattr(prepare, "bundled_pip", lambda: None)
    with pytest.raises(
        prepare.PrepareError, match=r"neither pip 22\.3 or newer nor its bundled pip"
    ):
        prepare.pip_command(Path("venv/bin/python"))


def test_pip_runs_without_python_or_pip_variables_and_reads_no_config_file(prepare):
    environ = {
        "PATH": "/bin",
        "HOME": "/home/runner",
        "HTTPS_PROXY": "http://proxy:3128",
        "PYTHONPATH": "/evil",
        "PYTHONHOME": "/evil",
        "PIP_REQUIREMENT": "/evil.txt",
        "PIP_INDEX_URL": "https://mirror/simple",  # honoured as an option, not as a variable
        "pip_target": "/evil",  # Windows reads variable names without case
        "_PIP_RUNNING_IN_SUBPROCESS": "1",  # would make pip --python install into the runner's Python
    }
    assert prepare.pip_environment(environ) == {
        "PATH": "/bin",
        "HOME": "/home/runner",
        "HTTPS_PROXY": "http://proxy:3128",
        "PIP_CONFIG_FILE": os.devnull,
    }
    for command in (
        prepare.install_command(["pip"], LOCK, Path("house")),
        prepare.download_command(["pip"], LOCK, Path("house")),
    ):
        assert "--isolated" in command
        assert "--no-cache-dir" in command


# -- transport settings: what is read from pip's configuration, and nothing else ---------------------


def test_only_transport_settings_are_kept_and_each_is_named(prepare, tmp_path):
    rig = make_rig(tmp_path)
    user = _write(
        rig.home / ".config" / "pip" / "pip.conf",
        "[global]\nindex-url = https://mirror.example/simple\nfind-links = /evil\n"
        "trusted-host = a.example b.example\n[install]\nrequirement = /evil.txt\n"
        "[download]\nretries = 7\nconstraint = /evil.txt\n",
    )
    xdg = _write(
        Path(rig.env["XDG_CONFIG_DIRS"]) / "pip" / "pip.conf",
        "[global]\nindex-url = https://overridden.example/simple\nclient-cert = /client.pem\n"
        "proxy = http://proxy.example:3128\ntarget = /evil\n",
    )
    environ = {
        **rig.env,
        "PIP_EXTRA_INDEX_URL": "https://x.example/simple https://y.example/simple",
    }
    environ |= {"PIP_DEFAULT_TIMEOUT": "30", "PIP_FIND_LINKS": "/evil", "PIP_NO_BINARY": ":all:"}
    settings, ignored = prepare.transport_settings(environ)
    mine = {
        s.name: (s.value, s.source)
        for s in settings
        if s.source.startswith((str(tmp_path), "PIP_"))
    }
    assert mine == {
        "index-url": ("https://mirror.example/simple", str(user)),  # the user's file wins
        "client-cert": ("/client.pem", str(xdg)),
        "proxy": ("http://proxy.example:3128", str(xdg)),
        "trusted-host": ("a.example b.example", str(user)),
        "retries": ("7", str(user)),
        "extra-index-url": (
            "https://x.example/simple https://y.example/simple",
            "PIP_EXTRA_INDEX_URL",
        ),
        "default-timeout": ("30", "PIP_DEFAULT_TIMEOUT"),
    }
    assert {
        f"global.find-links ({user})",
        f"install.requirement ({user})",
        f"download.constraint ({user})",
        f"global.target ({xdg})",
        "PIP_FIND_LINKS",
        "PIP_NO_BINARY",
    } <= set(ignored)
    options = prepare.transport_options(settings)
    assert options[options.index("--index-url") + 1] == "https://mirror.example/simple"
    assert [options[i + 1] for i, o in enumerate(options) if o == "--trusted-host"] == [
        "a.example",
        "b.example",
    ]
    assert not {"--find-links", "--requirement", "--constraint", "--target"} & set(options)


def test_pip_config_file_naming_the_null_device_reads_no_file(prepare, tmp_path):
    rig = make_rig(tmp_path)
    _write(
        rig.home / ".config" / "pip" / "pip.conf",
        "[global]\nindex-url = https://mirror.example/simple\n",
    )
    assert prepare.config_files({**rig.env, "PIP_CONFIG_FILE": os.devnull}) == []


#: pip's own reading (its Configuration, as `pip download` parses it) and prepare_venv.py's, both
#: in the runner's Python (the site file is in its prefix).
PIP_VIEW = """
import importlib.util, json, os, sys
from pip._internal.commands import create_command
from pip._internal.configuration import get_configuration_files
spec = importlib.util.spec_from_file_location("prepare_venv", sys.argv[1])
prepare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prepare)
options, _ = create_command("download").parse_args([])
files = get_configuration_files()
ours = {s.name: s.value for s in prepare.transport_settings(dict(os.environ))[0]}
print(json.dumps({
    "pip": {
        "files": [*files["global"], *files["user"], *files["site"]],
        "index-url": options.index_url, "extra-index-url": options.extra_index_urls,
        "cert": options.cert, "trusted-host": options.trusted_hosts, "retries": options.retries,
    },
    "ours": {
        "files": [str(path) for path in prepare.config_files(dict(os.environ))],
        "index-url": ours.get("index-url"), "extra-index-url": ours.get("extra-index-url", "").split(),
        "cert": ours.get("cert"), "trusted-host": ours.get("trusted-host", "").split(),
        "retries": int(ours["retries"]),
    },
}))
"""


def _pip_has_python_option() -> bool:
    version = subprocess.run(  # noqa: S603  # the runner's Python, fixed arguments
        [str(BASE_PYTHON), "-I", "-c", "import pip; print(pip.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )
    return version.returncode == 0 and tuple(int(p) for p in version.stdout.split(".")[:2]) >= (
        22,
        3,
    )


@pytest.mark.skipif(not _pip_has_python_option(), reason="the runner's Python has no pip 22.3+")
def test_the_settings_kept_are_those_pip_itself_would_use(tmp_path):
    """pip's own Configuration, given the planted files and variables, finds the same places and values."""
    rig = make_rig(tmp_path)
    _write(rig.home / ".pip" / "pip.conf", "[global]\nindex-url = https://legacy.example/simple\n")
    _write(
        rig.home / ".config" / "pip" / "pip.conf",
        "[global]\nindex-url = https://user.example/simple\ntrusted-host = u.example\n"
        "[download]\ntrusted-host = d.example e.example\n",
    )
    _write(
        Path(rig.env["XDG_CONFIG_DIRS"]) / "pip" / "pip.conf",
        "[global]\ncert = /xdg-ca.pem\nretries = 9\n",
    )
    environ = {**rig.env, "PIP_EXTRA_INDEX_URL": "https://x.example/simple", "PIP_RETRIES": "3"}
    pip = subprocess.run(  # noqa: S603  # the runner's Python and pip, reading the planted files
        [str(BASE_PYTHON), "-I", "-c", PIP_VIEW, str(PREPARE)],
        env=environ,
        capture_output=True,
        text=True,
        check=True,
    )
    view = json.loads(pip.stdout)
    assert view["ours"] == view["pip"]
    assert view["pip"]["trusted-host"] == ["d.example", "e.example"], (
        "[download] wins over [global]"
    )
    assert view["pip"]["retries"] == 3, "a variable wins over every file"


# -- the probe step and the guard step of guard/action.yml -------------------------------------------


def _step(step_id: str | None, marker: str) -> dict[str, Any]:
    (step,) = [s for s in _steps() if s.get("id") == step_id and marker in s.get("run", "")]
    return step


def fill(value: str, values: dict[str, str], outputs: dict[str, dict[str, str]]) -> str:
    """A step's `${{ }}` env value as the runner fills it (inputs, step outputs, `||`)."""
    expression = EXPRESSION.fullmatch(value)
    assert expression, value
    for term in (part.strip() for part in expression[1].split("||")):
        if term.startswith("inputs."):
            found = values.get(term.removeprefix("inputs."), "")  # the runner's default: empty
        elif term.startswith(("job.", "runner.")):
            # the job context: empty outside a container job; the runner's name: none here
            found = values.get(term, "")
        else:
            _, step_id, _, name = term.split(".", 3)
            found = outputs.get(step_id, {}).get(name, "")
        if found:
            return found
    return ""


def run_step(
    rig: Rig,
    step: dict[str, Any],
    values: dict[str, str],
    outputs: dict[str, dict[str, str]],
    extra: dict[str, str],
) -> subprocess.CompletedProcess[str]:
    """One composite step as the runner runs it: bash, its env filled in, its own GITHUB_OUTPUT."""
    output = rig.root / f"output-{step.get('id') or 'guard'}"
    output.write_text("")
    env = {name: fill(value, values, outputs) for name, value in step.get("env", {}).items()}
    bash = shutil.which("bash")
    assert bash
    result = subprocess.run(  # noqa: S603  # bash with the manifest's own script
        [bash, "-c", step["run"]],
        env={
            **rig.env,
            **extra,
            "GITHUB_OUTPUT": str(output),
            "GITHUB_ACTION_PATH": str(ROOT / "guard"),
            **env,
        },
        cwd=rig.workspace,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if step.get("id"):
        lines = [line.split("=", 1) for line in output.read_text().splitlines() if "=" in line]
        outputs[step["id"]] = dict(lines)
    return result


def test_the_probe_runs_the_candidate_python_isolated(tmp_path):
    """A usercustomize or .pth in the user site, or PYTHON* variables, cannot make it print another path."""
    rig = make_rig(tmp_path)
    fake = rig.root / "fake-python"
    fake.write_text(f"#!/bin/sh\n{BASE_PYTHON} -I -c {rig.payload('fake-interpreter')!r}\n")
    fake.chmod(0o755)
    marker = rig.marker("probe-usercustomize")
    lie = f"import pathlib, sys; pathlib.Path({str(marker)!r}).write_text('ran'); "
    lie += f"sys.executable = {str(fake)!r}"
    _write(rig.user_site() / "usercustomize.py", lie + "\n")
    _write(rig.user_site() / "evil.pth", rig.payload("probe-pth") + "\n")
    _write(rig.workspace / "sitecustomize.py", rig.payload("probe-workspace") + "\n")
    rig.env["PYTHONSTARTUP"] = str(
        _write(rig.root / "startup.py", rig.payload("probe-startup") + "\n")
    )
    outputs: dict[str, dict[str, str]] = {}
    result = run_step(rig, _step("python", "candidate"), {}, outputs, {})
    assert result.returncode == 0, result.stdout + result.stderr
    assert rig.ran() == []
    assert Path(outputs["python"].get("path", "")).resolve() == BASE_PYTHON.resolve()


@pytest.fixture
def served() -> Iterator[tuple[FakeGitHub, str]]:
    world = make_world(FakeClock())
    with world.serve() as url:
        yield world, url


def assert_refuses_the_forged_and_passes_the_real(
    rig: Rig, served: tuple[FakeGitHub, str], python: Path
) -> None:
    """The guard step with `python` as the venv's: `request-id=hello` refused, the real child passed."""
    world, url = served
    run_id = dispatch_child(world)
    runner = {k: v for k, v in _runner_env(world, url, run_id, rig.root).items() if k != "PATH"}
    guard = next(s for s in _steps() if "-m runner_queue_fallback guard" in s.get("run", ""))
    venv = {"venv": {"python": str(python)}}

    def run_guard_step(values: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return run_step(rig, guard, values, venv, runner)

    forged = run_guard_step({**_with(world), "request-id": "hello"})
    assert forged.returncode != 0, forged.stdout + forged.stderr
    assert PASSED not in forged.stdout
    assert rig.ran() == []
    real = run_guard_step(_with(world))
    assert real.returncode == 0, real.stdout + real.stderr
    assert "Guard passed: the workload may start" in real.stdout
    assert rig.ran() == []


def test_the_guard_step_runs_isolated_from_python_variables_and_the_workspace(tmp_path, served):
    """The guard step with this test's own venv as the guard's: PYTHONPATH's shadow package, a
    PYTHONHOME no Python starts from, the user site and the workspace's shadows do not reach it."""
    rig = make_rig(tmp_path)
    for vector in ("python-variables", "user-site", "workspace"):
        VECTORS[vector](rig)
    assert_refuses_the_forged_and_passes_the_real(rig, served, Path(sys.executable))


# -- the whole composite with the real lock: needs the package index for its cold start -------------


def composite_prepare(rig: Rig) -> tuple[Path, str]:
    """The composite's steps up to the guard: find Python, make the venv. Its python and log."""
    outputs: dict[str, dict[str, str]] = {}
    probe = run_step(rig, _step("python", "candidate"), {}, outputs, {})
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert outputs["python"].get("path"), (
        "the runner's Python was not found: setup-python would run"
    )
    made = run_step(rig, _step("venv", "prepare_venv.py"), {}, outputs, {})
    assert made.returncode == 0, made.stdout + made.stderr
    return Path(outputs["venv"]["python"]), made.stdout


def transport_of_this_machine() -> dict[str, str]:
    """What a cold start here needs from the real environment: proxies, certificates, PIP_* transport."""
    names = {
        "https_proxy",
        "http_proxy",
        "no_proxy",
        "ssl_cert_file",
        "ssl_cert_dir",
        "requests_ca_bundle",
    }
    pip = {
        "PIP_INDEX_URL",
        "PIP_EXTRA_INDEX_URL",
        "PIP_CERT",
        "PIP_CLIENT_CERT",
        "PIP_TRUSTED_HOST",
    }
    pip |= {"PIP_PROXY", "PIP_TIMEOUT", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES"}
    return {k: v for k, v in os.environ.items() if k.lower() in names or k in pip}


@pytest.fixture(scope="module")
def locked_wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real lock's wheels, downloaded once (by a cold composite prepare) for the warm tests."""
    rig = make_rig(tmp_path_factory.mktemp("cold-once"))
    rig.env |= transport_of_this_machine()
    _, log = composite_prepare(rig)
    assert "cold start" in log
    (house,) = (Path(rig.env["RUNNER_TOOL_CACHE"]) / "runner-queue-fallback-guard").iterdir()
    return house


def warm_rig(tmp_path: Path, locked_wheels: Path) -> Rig:
    rig = make_rig(tmp_path)
    house = Path(rig.env["RUNNER_TOOL_CACHE"]) / "runner-queue-fallback-guard" / locked_wheels.name
    shutil.copytree(locked_wheels, house)
    return rig


@pytest.mark.index
def test_the_composite_guard_cold_with_every_vector_planted(tmp_path, served):
    rig = make_rig(tmp_path)
    rig.env |= transport_of_this_machine()
    plant_all(rig)
    python, log = composite_prepare(rig)
    assert "cold start" in log
    assert rig.ran() == []
    assert_refuses_the_forged_and_passes_the_real(rig, served, python)


@pytest.mark.index
@pytest.mark.parametrize("vector", VECTORS)
def test_the_composite_guard_warm_with_one_vector_planted(tmp_path, served, locked_wheels, vector):
    rig = warm_rig(tmp_path, locked_wheels)
    VECTORS[vector](rig)
    python, log = composite_prepare(rig)
    assert "warm start" in log
    assert_refuses_the_forged_and_passes_the_real(rig, served, python)


@pytest.mark.index
def test_the_composite_guard_with_a_poisoned_cache_downloads_it_again(
    tmp_path, served, locked_wheels
):
    rig = warm_rig(tmp_path, locked_wheels)
    rig.env |= transport_of_this_machine()
    plant_poisoned_cache(
        rig, Path(rig.env["RUNNER_TOOL_CACHE"]) / "runner-queue-fallback-guard" / locked_wheels.name
    )
    python, log = composite_prepare(rig)
    assert "did not verify" in log
    assert "cold start" in log
    assert_refuses_the_forged_and_passes_the_real(rig, served, python)
