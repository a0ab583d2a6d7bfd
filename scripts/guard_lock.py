"""Write requirements/guard.txt: the runtime lock less what only a GitHub App's token needs.

The composite guard (guard/prepare_venv.py) installs this lock into a new venv in every job. The
guard never mints an App token (it keeps the child's `GITHUB_TOKEN`), so PyJWT and cryptography,
with cffi and pycparser (about 18 MB installed), would only lengthen every start. Each pin kept is
the runtime lock's own entry, hashes and all: one resolution (scripts/lock), two subsets. A
package that a kept package needs too is kept.

    python3 scripts/guard_lock.py            write requirements/guard.txt from runtime.txt
    python3 scripts/guard_lock.py --check    exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "requirements" / "runtime.txt"
GUARD = ROOT / "requirements" / "guard.txt"
#: The runtime dependencies only a GitHub App's token needs (github/app_token.py), by the lock's
#: spelling of their names.
LEFT_OUT = ("pyjwt", "cryptography")
HEADER = (
    "#\n"
    "# The runtime lock (requirements/runtime.txt) less what only a GitHub App's token needs:\n"
    "# the composite guard installs this one. Written by scripts/guard_lock.py (scripts/lock runs\n"
    "# it); do not edit.\n"
    "#\n"
)
_PIN = re.compile(r"^([A-Za-z0-9][\w.-]*)==\S+ \\$")
_VIA_ONE = re.compile(r"^    # via (.+)$")
_VIA_MORE = re.compile(r"^    #   (.+)$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """The lock's entries in order: (canonical name, lines); the header is named ''."""
    blocks: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        match = _PIN.match(line)
        if match:
            blocks.append((_canonical(match[1]), []))
        blocks[-1][1].append(line)
    return blocks


def _vias(lines: list[str]) -> set[str]:
    """What an entry is pinned for (`# via` lines: package names, or the project itself)."""
    found = set()
    for line in lines:
        match = _VIA_ONE.match(line) or _VIA_MORE.match(line)
        if match:
            found.add(match[1].strip())
    return found


def guard_lock(runtime: str) -> str:
    """The guard's lock from the runtime lock's text: `LEFT_OUT` and what only they need."""
    blocks = _blocks(runtime)
    vias = {name: _vias(lines) for name, lines in blocks if name}
    dropped = set(LEFT_OUT)
    missing = dropped - vias.keys()
    if missing:
        raise SystemExit(f"the runtime lock pins no {', '.join(sorted(missing))}")
    changed = True
    while changed:  # a package pinned only for dropped packages goes too
        changed = False
        for name, via in vias.items():
            if name not in dropped and via and {_canonical(v) for v in via} <= dropped:
                dropped.add(name)
                changed = True
    kept = [
        [line for line in lines if _kept_line(line, dropped)]
        for name, lines in blocks[1:]
        if name not in dropped
    ]
    return HEADER + "".join("\n".join(lines) + "\n" for lines in kept)


def _kept_line(line: str, dropped: set[str]) -> bool:
    """A line of a kept entry, unless it names a dropped package in its `# via` list."""
    match = _VIA_MORE.match(line)
    return not (match and _canonical(match[1].strip()) in dropped)


def main(argv: list[str] | None = None) -> int:
    """Write the guard's lock, or `--check` it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    text = guard_lock(RUNTIME.read_text(encoding="utf-8"))
    if args.check:
        if not GUARD.exists() or GUARD.read_text(encoding="utf-8") != text:
            print("requirements/guard.txt is out of date: run scripts/lock", file=sys.stderr)
            return 1
        return 0
    GUARD.write_text(text, encoding="utf-8")
    print(f"requirements/guard.txt: {text.count('==')} pinned packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
