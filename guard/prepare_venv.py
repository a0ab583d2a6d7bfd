"""Make the guard's Python environment for this job: a fresh venv with exactly the locked packages.

Run by guard/action.yml (the composite guard) with the runner's Python 3.11+ in isolated mode
(`python -I guard/prepare_venv.py`). Standard library only: nothing is installed yet.

- The venv is a new, empty directory under $RUNNER_TEMP (which the runner empties for every job),
  never one an earlier job could have left or changed on a persistent runner.
- Every package file is checked against the lock's hashes at install time (pip --require-hashes,
  --no-deps, --only-binary=:all:), whether it comes from the package index or from the wheel
  cache this script keeps between jobs. The cache is only a source of files to verify: a file that
  fails its hash is never installed; the cache is then downloaded again into a new directory.
- Warm start (the cache holds the lock's wheels for this Python and platform): no network at all.
  Cold start: `pip download` from the package index pip is configured for, then the same install.
- pip is not installed into the venv (ensurepip costs seconds of CPU): the interpreter's own pip
  installs into it (`pip --python`, pip >= 22.3), else the pip wheel that ships with the
  interpreter (ensurepip's; slower: imported from a zip, never byte-compiled), else the venv gets
  its own pip. All three belong to the interpreter, which the guard trusts already.
- The guard's own code is not installed: a .pth file puts this action's checkout (the commit the
  child pins) on the venv's path, as PYTHONPATH=/app does in the image.
- Writes `python=<the venv's interpreter>` to $GITHUB_OUTPUT for the guard step.
"""

from __future__ import annotations

import ensurepip
import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "runtime.txt"
PACKAGE = ROOT / "runner_queue_fallback"
MINIMUM = (3, 11)
PIP_WITH_PYTHON_OPTION = (22, 3)  # pip --python <interpreter> first came in pip 22.3
PTH_NAME = "runner-queue-fallback-guard.pth"
PIP_OPTIONS = ("--disable-pip-version-check", "--no-input", "--quiet")
#: What every pip command takes from the lock: only its pins, each file checked against its hashes.
LOCK_OPTIONS = ("--require-hashes", "--no-deps", "--only-binary=:all:")


class PrepareError(Exception):
    """The venv could not be prepared: the guard fails closed with this message."""


def install_command(pip: list[str], lock: Path, wheelhouse: Path) -> list[str]:
    """Install the lock from `wheelhouse` only (no index), every file checked against its hash."""
    return [
        *pip,
        "install",
        *PIP_OPTIONS,
        *LOCK_OPTIONS,
        "--no-compile",
        "--no-index",
        "--find-links",
        str(wheelhouse),
        "-r",
        str(lock),
    ]


def download_command(pip: list[str], lock: Path, wheelhouse: Path) -> list[str]:
    """Download the lock's wheels for this interpreter from the package index into `wheelhouse`."""
    return [
        *pip,
        "download",
        *PIP_OPTIONS,
        *LOCK_OPTIONS,
        "--dest",
        str(wheelhouse),
        "-r",
        str(lock),
    ]


def venv_python(env_dir: Path) -> Path:
    """The interpreter of the venv at `env_dir` (Scripts/python.exe on Windows)."""
    if os.name == "nt":
        return env_dir / "Scripts" / "python.exe"
    return env_dir / "bin" / "python"


def bundled_pip() -> Path | None:
    """The pip wheel that ships with this interpreter (ensurepip's, or the distribution's), if any."""
    extra = (sysconfig.get_config_var("WHEEL_PKG_DIR"), "/usr/share/python-wheels")
    places = [Path(ensurepip.__file__).parent / "_bundled", *(Path(e) for e in extra if e)]
    wheels = sorted(w for place in places if place.is_dir() for w in place.glob("pip-*.whl"))
    return wheels[-1] if wheels else None


def pip_command(python: Path) -> tuple[list[str], bool]:
    """How to run pip for the venv whose interpreter is `python`, and whether the venv needs pip."""
    if importlib.util.find_spec("pip") is not None:
        version = importlib.metadata.version("pip").split(".")
        if tuple(int(part) for part in version[:2] if part.isdigit()) >= PIP_WITH_PYTHON_OPTION:
            return [sys.executable, "-I", "-m", "pip", "--python", str(python)], False
    wheel = bundled_pip()
    if wheel is not None:
        return [str(python), "-I", str(wheel / "pip")], False
    return [str(python), "-I", "-m", "pip"], True


def wheelhouse_for(environ: dict[str, str], lock: Path) -> Path:
    """Where the verified wheels of this lock, Python and platform are kept between jobs."""
    base = environ.get("RUNNER_TOOL_CACHE") or str(Path.home() / ".cache")
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}-{sysconfig.get_platform()}"
    return Path(base) / "runner-queue-fallback-guard" / f"{digest}-{tag}"


def _run(command: list[str]) -> bool:
    return subprocess.run(command, check=False).returncode == 0  # noqa: S603  # our own argv


def install(pip: list[str], lock: Path, wheelhouse: Path) -> str:
    """Install the lock into the venv pip runs in; return "warm" or "cold" (where it came from)."""
    if wheelhouse.is_dir() and _run(install_command(pip, lock, wheelhouse)):
        return "warm"
    if wheelhouse.is_dir():
        print(f"guard: the wheel cache {wheelhouse} did not verify; downloading it again")
    wheelhouse.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=wheelhouse.name + ".new-", dir=wheelhouse.parent))
    if not _run(download_command(pip, lock, fresh)):
        shutil.rmtree(fresh, ignore_errors=True)
        raise PrepareError(
            "downloading the guard's locked dependencies failed; a cold start needs the package "
            "index (PyPI or the mirror pip is configured for)"
        )
    if not _run(install_command(pip, lock, fresh)):
        raise PrepareError("installing the guard's locked dependencies failed")
    shutil.rmtree(wheelhouse, ignore_errors=True)
    try:
        fresh.replace(wheelhouse)  # the next job on this runner starts warm
    except OSError:
        shutil.rmtree(fresh, ignore_errors=True)  # another job got there first: theirs is fine too
    return "cold"


def prepare(environ: dict[str, str]) -> tuple[Path, str]:
    """Create the venv, install the lock, link the action's code; return its python and the start."""
    if sys.version_info < MINIMUM:
        raise PrepareError(f"the guard needs Python 3.11 or newer, not {sys.version.split()[0]}")
    for needed in (LOCK, PACKAGE):
        if not needed.exists():
            raise PrepareError(f"the guard action's checkout has no {needed}: it is incomplete")
    env_dir = Path(tempfile.mkdtemp(prefix="rqf-guard-venv-", dir=environ.get("RUNNER_TEMP")))
    python = venv_python(env_dir)
    pip, with_pip = pip_command(python)
    venv.EnvBuilder(with_pip=with_pip).create(env_dir)
    start = install(pip, LOCK, wheelhouse_for(environ, LOCK))
    purelib = subprocess.run(  # noqa: S603  # the venv's interpreter, fixed arguments
        [str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / PTH_NAME).write_text(f"{ROOT}\n", encoding="utf-8")
    return python, start


def main(environ: dict[str, str]) -> int:
    """Prepare the venv and tell the next step where its interpreter is."""
    try:
        python, start = prepare(environ)
    except (PrepareError, OSError, subprocess.CalledProcessError) as error:
        print(f"::error title=runner-queue-fallback guard::{error}; the guard fails closed.")
        return 1
    output = environ.get("GITHUB_OUTPUT")
    if output:
        with Path(output).open("a", encoding="utf-8") as stream:
            stream.write(f"python={python}\n")
    version = sysconfig.get_python_version()
    print(f"guard: fresh venv {python.parent.parent} (Python {version}, {start} start)")
    return 0


if __name__ == "__main__":
    sys.exit(main(dict(os.environ)))
