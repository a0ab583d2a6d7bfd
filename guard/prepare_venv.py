"""Make the guard's Python environment for this job: a fresh venv with exactly the locked packages.

Long (one standard-library script) because it runs before anything is installed, so pip's
isolation, the transport keys read from pip's config files and the venv check must be one file.

Run by guard/action.yml (the composite guard) with the runner's Python 3.11+ in isolated mode
(`python -I guard/prepare_venv.py`). Standard library only: nothing is installed yet.

- The venv is a new, empty directory under $RUNNER_TEMP (which the runner empties for every job),
  never one an earlier job could have left or changed on a persistent runner.
- Every package file is checked against the lock's hashes at install time (pip --require-hashes,
  --no-deps, --only-binary=:all:), whether it comes from the package index or from the wheel
  cache this script keeps between jobs. The cache is only a source of files to verify: a file that
  fails its hash is never installed; the venv is dropped and the cache downloaded again.
- Warm start (the cache holds the lock's wheels for this Python and platform): no network at all.
  Cold start: `pip download` from the package index pip is configured for, then the same install.
- pip reads no configuration that could change what is installed: it runs with --isolated and
  PIP_CONFIG_FILE naming the null device (no config file at all), and every process that runs pip
  gets no PYTHON* or PIP_* variable. Only the settings that say where and how to download
  (TRANSPORT: index URLs, certificates, trusted hosts, proxy, timeout, retries) are read from
  pip's configuration files and PIP_* variables, as pip would find them, and passed as options;
  each one used is named in the log. The hashes decide what is installed, wherever it came from.
- pip is not installed into the venv (ensurepip costs seconds of CPU): the interpreter's own pip
  installs into it (`pip --python`, pip >= 22.3), else the pip wheel that ships with the
  interpreter (ensurepip's; slower: imported from a zip, never byte-compiled). Both belong to the
  interpreter, which the guard trusts already. A venv of its own pip (ensurepip, which brings
  setuptools' .pth) is never made: without either, the guard fails closed.
- Once pip has installed into the venv, none of its interpreters starts until the venv is
  verified from here (this interpreter reads its files): exactly the locked distributions at their
  locked versions, and nothing that runs at startup (no .pth file, no sitecustomize or
  usercustomize, no file that no locked distribution installed). Anything else fails closed.
- The guard's own code is not installed: a .pth file, written after that check, puts this action's
  checkout (the commit the child pins) on the venv's path, as PYTHONPATH=/app does in the image.
- Writes `python=<the venv's interpreter>` to $GITHUB_OUTPUT for the guard step.
"""

from __future__ import annotations

import configparser
import csv
import hashlib
import importlib.metadata
import importlib.util
import locale
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import venv
from collections.abc import Callable, Iterable, Mapping
from email.parser import Parser
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
#: The runtime lock less what only a GitHub App's token needs (scripts/guard_lock.py writes it).
LOCK = ROOT / "requirements" / "guard.txt"
PACKAGE = ROOT / "runner_queue_fallback"
MINIMUM = (3, 11)
PIP_WITH_PYTHON_OPTION = (22, 3)  # pip --python <interpreter> first came in pip 22.3
PTH_NAME = "runner-queue-fallback-guard.pth"
#: --isolated: no user configuration and no PIP_* variable; PIP_CONFIG_FILE (pip_environment)
#: takes away the global and site files that --isolated still reads. No pip cache either: the
#: verified wheel cache below is the only state kept between jobs.
PIP_OPTIONS = (
    "--isolated",
    "--disable-pip-version-check",
    "--no-input",
    "--quiet",
    "--no-cache-dir",
)
#: What every pip command takes from the lock: only its pins, each file checked against its hashes.
LOCK_OPTIONS = ("--require-hashes", "--no-deps", "--only-binary=:all:")
#: The pip settings that only say where and how to download, each with its option. They are
#: honoured from pip's configuration and PIP_* variables (the rest is ignored), so that runners
#: behind a mirror, a proxy or an intercepting certificate keep working.
TRANSPORT = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "cert": "--cert",
    "client-cert": "--client-cert",
    "trusted-host": "--trusted-host",
    "proxy": "--proxy",
    "timeout": "--timeout",
    "default-timeout": "--timeout",  # pip's other name for --timeout (PIP_DEFAULT_TIMEOUT)
    "retries": "--retries",
}
#: Transport settings that take several values, separated by white space (as pip splits them).
REPEATED = frozenset({"extra-index-url", "trusted-host"})
#: The pip configuration sections a `pip download` reads, in pip's order (a later one wins).
SECTIONS = ("global", "download")
#: Modules the site module imports at every start of an interpreter.
STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize"})
#: Names at the top of a venv's site-packages that no distribution installs but that are harmless.
HARMLESS = frozenset({"__pycache__"})


class PrepareError(Exception):
    """The venv could not be prepared: the guard fails closed with this message."""


class Setting(NamedTuple):
    """One pip setting found in pip's configuration: its name, value and where it was found.

    (A NamedTuple, not a dataclass: tests load this script from its file, outside sys.modules.)
    """

    name: str
    value: str
    source: str


def _on_path() -> None:
    """Put this action's own checkout on the path (-I leaves it off), for core/actions_io.py."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def _escape(text: str) -> str:
    """The program's one escaping path for a log line (core/actions_io.py: standard library only)."""
    _on_path()
    from runner_queue_fallback.core.actions_io import escape_log_line  # noqa: PLC0415  # see _on_path

    return escape_log_line(text)


def _escape_message(text: str) -> str:
    """The same path for the message of a workflow command."""
    _on_path()
    from runner_queue_fallback.core.actions_io import escape_data  # noqa: PLC0415  # see _on_path

    return escape_data(text)


def _say(text: str) -> None:
    print(_escape(f"guard: {text}"))


# -- pip's configuration: where it is, and the transport settings in it ----------------------------


def _normalise(name: str) -> str:
    """A pip setting's name as pip compares it (lower case, `-` for `_`, no leading `--`)."""
    return name.lower().replace("_", "-").removeprefix("--")


def _home(environ: Mapping[str, str]) -> Path:
    variable = "USERPROFILE" if os.name == "nt" else "HOME"
    return Path(environ.get(variable) or Path.home())


def _windows() -> bool:
    return sys.platform == "win32"


def _global_config_files(environ: Mapping[str, str], name: str) -> list[Path]:
    """The global files pip reads (appdirs.site_config_dirs): XDG_CONFIG_DIRS and /etc on Linux."""
    if _windows():
        return [Path(environ.get("PROGRAMDATA") or r"C:\ProgramData", "pip", name)]
    if sys.platform == "darwin":
        return [Path("/Library/Application Support/pip", name)]
    dirs = environ.get("XDG_CONFIG_DIRS", "").strip() or "/etc/xdg"
    home = str(_home(environ))
    places = [Path(re.sub(r"^~(?=/|$)", home, d), "pip") for d in dirs.split(os.pathsep) if d]
    return [*(place / name for place in places), Path("/etc", name)]


def _user_config_files(environ: Mapping[str, str], name: str) -> list[Path]:
    """The user files pip reads: the legacy one, then the new one (which wins)."""
    home = _home(environ)
    legacy = home / ("pip" if _windows() else ".pip") / name
    if _windows():
        new = Path(environ.get("APPDATA") or home / "AppData" / "Roaming", "pip")
    elif sys.platform == "darwin":
        support = home / "Library" / "Application Support" / "pip"
        new = support if support.is_dir() else home / ".config" / "pip"
    else:
        new = Path(environ.get("XDG_CONFIG_HOME", "").strip() or home / ".config") / "pip"
    return [legacy, new / name]


def config_files(environ: Mapping[str, str]) -> list[Path]:
    """The configuration files pip reads here, in the order pip applies them (the last wins).

    As pip's Configuration finds them: global, user (unless PIP_CONFIG_FILE names a file that
    exists), site (this interpreter's prefix), then PIP_CONFIG_FILE; none at all when
    PIP_CONFIG_FILE is the null device.
    """
    named = environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    name = "pip.ini" if _windows() else "pip.conf"
    files = _global_config_files(environ, name)
    if not (named and Path(named).exists()):
        files += _user_config_files(environ, name)
    files.append(Path(sys.prefix, name))
    if named:
        files.append(Path(named))
    return files


def _read_config(path: Path) -> list[tuple[str, str, str]] | None:
    """(section, name, value) of every setting in one file; None when pip could not read it."""
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding=locale.getpreferredencoding(do_setlocale=False))
    except (UnicodeDecodeError, configparser.Error):
        return None
    return [
        (section, _normalise(name), value)
        for section in parser.sections()
        for name, value in parser.items(section)
    ]


def _settings_in_files(files: Iterable[Path]) -> tuple[dict[tuple[str, str], Setting], list[str]]:
    """The settings of the sections a download reads (the last file wins), and the others' names."""
    found: dict[tuple[str, str], Setting] = {}
    ignored: list[str] = []
    for path in files:
        if not path.is_file():
            continue
        items = _read_config(path)
        if items is None:
            ignored.append(f"{path} (unreadable)")
            continue
        for section, name, value in items:
            if section in SECTIONS and name in TRANSPORT:
                if value:  # pip ignores an empty value
                    found[section, name] = Setting(name, value, str(path))
            else:
                ignored.append(f"{section}.{name} ({path})")
    return found, ignored


def _settings_in_environ(environ: Mapping[str, str]) -> tuple[list[Setting], list[str]]:
    """The PIP_* variables that are transport settings, and the names of the other PIP_* ones."""
    found: list[Setting] = []
    ignored: list[str] = []
    for variable, value in sorted(environ.items()):
        if not variable.startswith("PIP_") or variable == "PIP_CONFIG_FILE":
            continue
        name = _normalise(variable.removeprefix("PIP_"))
        if name in TRANSPORT and value:
            found.append(Setting(name, value, variable))
        else:
            ignored.append(variable)
    return found, ignored


def transport_settings(environ: Mapping[str, str]) -> tuple[list[Setting], list[str]]:
    """The transport settings a plain `pip download` would use here, and what else was ignored.

    pip's precedence: files in `config_files` order, in each the [global] section and then the
    [download] one, then PIP_* variables; a later value replaces an earlier one (`timeout` and
    `default-timeout` are one setting).
    """
    in_files, ignored = _settings_in_files(config_files(environ))
    in_environ, ignored_variables = _settings_in_environ(environ)
    ordered = [in_files[key] for section in SECTIONS for key in in_files if key[0] == section]
    chosen: dict[str, Setting] = {}
    for setting in [*ordered, *in_environ]:
        chosen[TRANSPORT[setting.name]] = setting
    return list(chosen.values()), ignored + ignored_variables


def transport_options(settings: Iterable[Setting]) -> list[str]:
    """The settings as pip command-line options (the only way they reach an isolated pip)."""
    options: list[str] = []
    for setting in settings:
        values = setting.value.split() if setting.name in REPEATED else [setting.value.strip()]
        for value in values:
            options += [TRANSPORT[setting.name], value]
    return options


def pip_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of every process that runs pip: no PYTHON* or PIP_* variable, no config file.

    pip's --python runs pip again under the venv's interpreter, without -I: this environment is
    what keeps PYTHONPATH, PYTHONSTARTUP, PYTHONHOME and the like away from that run too.
    """
    env = {name: value for name, value in environ.items() if not _python_or_pip(name)}
    env["PIP_CONFIG_FILE"] = os.devnull  # pip then loads no configuration file at all
    return env


def _python_or_pip(name: str) -> bool:
    upper = name.upper()  # Windows variable names ignore case
    return upper.startswith(("PYTHON", "PIP_", "_PIP_", "__PYVENV_LAUNCHER__"))


# -- pip commands -----------------------------------------------------------------------------------


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


def download_command(
    pip: list[str], lock: Path, wheelhouse: Path, transport: Iterable[str] = ()
) -> list[str]:
    """Download the lock's wheels for this interpreter from the package index into `wheelhouse`."""
    return [
        *pip,
        "download",
        *PIP_OPTIONS,
        *LOCK_OPTIONS,
        *transport,
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
    spec = importlib.util.find_spec("ensurepip")
    extra = (sysconfig.get_config_var("WHEEL_PKG_DIR"), "/usr/share/python-wheels")
    places = [Path(e) for e in extra if e]
    if spec is not None and spec.origin:
        places.insert(0, Path(spec.origin).parent / "_bundled")
    wheels = sorted(w for place in places if place.is_dir() for w in place.glob("pip-*.whl"))
    return wheels[-1] if wheels else None


def pip_command(python: Path) -> list[str]:
    """How to run pip for the venv whose interpreter is `python` (this interpreter's pip, or its wheel)."""
    if importlib.util.find_spec("pip") is not None:
        version = importlib.metadata.version("pip").split(".")
        if tuple(int(part) for part in version[:2] if part.isdigit()) >= PIP_WITH_PYTHON_OPTION:
            return [sys.executable, "-I", "-m", "pip", "--python", str(python)]
    wheel = bundled_pip()
    if wheel is not None:
        return [str(python), "-I", str(wheel / "pip")]
    raise PrepareError(
        f"{sys.executable} has neither pip 22.3 or newer nor its bundled pip wheel (ensurepip); "
        "install pip for it, or use the Docker guard (guard/docker)"
    )


def _run(command: list[str], env: Mapping[str, str], cwd: Path) -> bool:
    """Run pip; its own messages go to the log. The working directory is the fresh venv's."""
    # our own argv, in our own environment
    return subprocess.run(command, env=dict(env), cwd=cwd, check=False).returncode == 0  # noqa: S603


def wheelhouse_for(environ: Mapping[str, str], lock: Path) -> Path:
    """Where the verified wheels of this lock, Python and platform are kept between jobs."""
    base = environ.get("RUNNER_TOOL_CACHE") or str(_home(environ) / ".cache")
    digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}-{sysconfig.get_platform()}"
    return Path(base) / "runner-queue-fallback-guard" / f"{digest}-{tag}"


def new_venv(parent: str | None) -> Path:
    """A new, empty venv with no pip of its own; its interpreter is not started."""
    env_dir = Path(tempfile.mkdtemp(prefix="rqf-guard-venv-", dir=parent))
    venv.EnvBuilder(with_pip=False).create(env_dir)
    return env_dir


def install(
    lock: Path,
    wheelhouse: Path,
    make_venv: Callable[[], Path],
    transport: list[str],
    env: Mapping[str, str],
) -> tuple[Path, str]:
    """A new venv with the lock installed; and "warm" or "cold" (where the wheels came from).

    A venv whose install from the cache failed is dropped, whatever pip left in it: the cold
    start downloads and installs into a new one.
    """
    env_dir = make_venv()
    if wheelhouse.is_dir():
        pip = pip_command(venv_python(env_dir))
        if _run(install_command(pip, lock, wheelhouse), env, env_dir):
            return env_dir, "warm"
        _say(f"the wheel cache {wheelhouse} did not verify; downloading it again into a new venv")
        shutil.rmtree(env_dir, ignore_errors=True)
        env_dir = make_venv()
    pip = pip_command(venv_python(env_dir))
    wheelhouse.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=wheelhouse.name + ".new-", dir=wheelhouse.parent))
    if not _run(download_command(pip, lock, fresh, transport), env, env_dir):
        shutil.rmtree(fresh, ignore_errors=True)
        raise PrepareError(
            "downloading the guard's locked dependencies failed; a cold start needs the package "
            "index (PyPI or the mirror pip is configured for)"
        )
    if not _run(install_command(pip, lock, fresh), env, env_dir):
        raise PrepareError("installing the guard's locked dependencies failed")
    shutil.rmtree(wheelhouse, ignore_errors=True)
    try:
        fresh.replace(wheelhouse)  # the next job on this runner starts warm
    except OSError:
        shutil.rmtree(fresh, ignore_errors=True)  # another job got there first: theirs is fine too
    return env_dir, "cold"


# -- the check of the venv against the lock, before any of its interpreters starts ------------------


def canonical_name(name: str) -> str:
    """A distribution's name as the lock and pip compare it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_pins(lock: Path) -> dict[str, str]:
    """The lock's distributions and versions (`name==version` lines)."""
    pins = re.findall(r"(?m)^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", lock.read_text("utf-8"))
    return {canonical_name(name): version for name, version in pins}


def _venv_paths(env_dir: Path) -> dict[str, Path]:
    """The venv's install paths, from this interpreter (the venv's shares its version and layout)."""
    base = str(env_dir)
    variables = {"base": base, "platbase": base, "installed_base": base, "installed_platbase": base}
    return {
        name: Path(sysconfig.get_path(name, scheme="venv", vars=variables))
        for name in ("purelib", "platlib")
    }


def site_dirs(env_dir: Path) -> list[Path]:
    """Every directory of the venv its interpreter would read .pth files from, without starting it."""
    candidates = [*_venv_paths(env_dir).values(), *map(Path, site.getsitepackages([str(env_dir)]))]
    found: dict[Path, None] = {}
    for candidate in candidates:
        if candidate.is_dir():
            found.setdefault(candidate.resolve(), None)
    return list(found)


def _distribution(dist_info: Path) -> tuple[str, str, set[str]]:
    """A .dist-info's name and version (its METADATA) and the top-level names its RECORD lists."""
    metadata = Parser().parsestr((dist_info / "METADATA").read_text("utf-8"), headersonly=True)
    name, version = metadata.get("Name"), metadata.get("Version")
    if not name or not version:
        raise PrepareError(f"{dist_info.name} names no distribution or version")
    with (dist_info / "RECORD").open(encoding="utf-8", newline="") as record:
        paths = [row[0] for row in csv.reader(record) if row]
    tops = {path.replace("\\", "/").split("/")[0] for path in paths}
    return canonical_name(name), version, {top for top in tops if top != ".."}


def _startup_file(entry: Path) -> bool:
    """A file or package the interpreter would run at startup (a .pth file, a *customize module)."""
    return entry.suffix == ".pth" or entry.name.split(".")[0] in STARTUP_MODULES


def _installed(env_dir: Path) -> tuple[dict[str, str], set[str], list[Path]]:
    """The distributions in the venv's install folders, the names their RECORDs list, the folders."""
    found: dict[str, str] = {}
    owned = set(HARMLESS)
    folders = sorted({path.resolve() for path in _venv_paths(env_dir).values() if path.is_dir()})
    for folder in folders:
        for entry in sorted(folder.glob("*.dist-info")):
            try:
                name, version, tops = _distribution(entry)
            except (OSError, UnicodeDecodeError, csv.Error) as error:
                raise PrepareError(f"{entry.name} cannot be read ({error})") from error
            found[name] = version
            owned |= tops | {entry.name}
    return found, owned, folders


def verify_venv(env_dir: Path, lock: Path) -> None:
    """Fail unless the venv holds exactly the lock and nothing that runs at an interpreter's start.

    Every site folder is searched for startup files (on Windows the venv's own folder is one);
    in the install folders every entry must belong to an installed distribution.
    """
    found, owned, folders = _installed(env_dir)
    problems: list[str] = []
    for directory in site_dirs(env_dir):
        for entry in sorted(directory.iterdir()):
            if _startup_file(entry):
                problems.append(f"{entry.name}, which would run at every start of its interpreter")
            elif directory in folders and entry.name not in owned:
                problems.append(f"{entry.name}, which no installed distribution lists")
    pins = locked_pins(lock)
    problems += [f"{name} {found[name]} (not in the lock)" for name in sorted(found.keys() - pins)]
    problems += [f"no {name} (the lock pins {pins[name]})" for name in sorted(pins.keys() - found)]
    problems += [
        f"{name} {found[name]} (the lock pins {pins[name]})"
        for name in sorted(found.keys() & pins.keys())
        if found[name] != pins[name]
    ]
    if problems:
        raise PrepareError(
            f"the new venv {env_dir} does not match the lock {lock.name}: "
            + "; ".join(problems)
            + ". None of its interpreters was started"
        )


# -- the whole preparation --------------------------------------------------------------------------


def _log_settings(settings: list[Setting], ignored: list[str]) -> None:
    used = ", ".join(f"{setting.name} ({setting.source})" for setting in settings)
    _say(
        "pip runs isolated (no configuration file, no PIP_* or PYTHON* variable); kept from pip's "
        f"configuration, for downloads only: {used or 'nothing'}"
    )
    if ignored:
        _say("pip settings ignored (only where and how to download is kept): " + ", ".join(ignored))


def prepare(environ: Mapping[str, str], lock: Path = LOCK) -> tuple[Path, str]:
    """Create the venv, install the lock, check it, link the action's code; its python and start."""
    if sys.version_info < MINIMUM:
        raise PrepareError(f"the guard needs Python 3.11 or newer, not {sys.version.split()[0]}")
    for needed in (lock, PACKAGE):
        if not needed.exists():
            raise PrepareError(f"the guard action's checkout has no {needed}: it is incomplete")
    settings, ignored = transport_settings(environ)
    _log_settings(settings, ignored)
    env_dir, start = install(
        lock,
        wheelhouse_for(environ, lock),
        lambda: new_venv(environ.get("RUNNER_TEMP")),
        transport_options(settings),
        pip_environment(environ),
    )
    verify_venv(env_dir, lock)
    (_venv_paths(env_dir)["purelib"] / PTH_NAME).write_text(f"{ROOT}\n", encoding="utf-8")
    return venv_python(env_dir), start


def main(environ: Mapping[str, str], lock: Path = LOCK) -> int:
    """Prepare the venv and tell the next step where its interpreter is."""
    try:
        python, start = prepare(environ, lock)
    except (PrepareError, OSError, subprocess.CalledProcessError) as error:
        message = _escape_message(str(error))
        print(f"::error title=runner-queue-fallback guard::{message}; the guard fails closed.")
        return 1
    output = environ.get("GITHUB_OUTPUT")
    if output:
        with Path(output).open("a", encoding="utf-8") as stream:
            stream.write(f"python={python}\n")
    version = sysconfig.get_python_version()
    _say(f"fresh venv {python.parent.parent} (Python {version}, {start} start)")
    return 0


if __name__ == "__main__":
    sys.exit(main(dict(os.environ)))
