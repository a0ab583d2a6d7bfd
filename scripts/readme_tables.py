"""Write the README's input and output tables from `action.yml` and `guard/action.yml`.

Usage: `.venv/bin/python scripts/readme_tables.py` rewrites the generated blocks in README.md;
`--check` exits 1 when they differ from the manifests (the test suite runs the same comparison).
Each block sits between `<!-- BEGIN GENERATED: <manifest> -->` and `<!-- END GENERATED -->`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MANIFESTS = ("action.yml", "guard/action.yml")
_BLOCK = re.compile(
    r"(<!-- BEGIN GENERATED: (?P<manifest>[\w./-]+) -->\n)(?P<body>.*?)(<!-- END GENERATED -->)",
    re.DOTALL,
)


def _cell(text: object) -> str:
    """One table cell: a single line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def tables(manifest: dict[str, Any]) -> str:
    """The inputs table, then the outputs table (when there are outputs), as Markdown."""
    lines = ["| input | required | default | description |", "| --- | --- | --- | --- |"]
    for name, spec in (manifest.get("inputs") or {}).items():
        required = "yes" if spec.get("required") else "no"
        default = spec.get("default")
        shown = f"`{_cell(default)}`" if default not in (None, "") else ""
        lines.append(f"| `{name}` | {required} | {shown} | {_cell(spec['description'])} |")
    outputs = manifest.get("outputs") or {}
    if outputs:
        lines += ["", "| output | description |", "| --- | --- |"]
        lines += [f"| `{name}` | {_cell(spec['description'])} |" for name, spec in outputs.items()]
    return "\n".join(lines) + "\n"


def render(readme: str, root: Path = ROOT) -> str:
    """The README with every generated block rewritten from its manifest."""

    def replace(match: re.Match[str]) -> str:
        manifest = yaml.safe_load((root / match["manifest"]).read_text(encoding="utf-8"))
        return f"{match.group(1)}{tables(manifest)}{match.group(4)}"

    return _BLOCK.sub(replace, readme)


def blocks(readme: str) -> list[str]:
    """The manifests the README has generated blocks for."""
    return [match["manifest"] for match in _BLOCK.finditer(readme)]


def main(argv: list[str]) -> int:
    """Rewrite the README, or with --check report whether it is current."""
    current = README.read_text(encoding="utf-8")
    wanted = render(current)
    if "--check" in argv:
        if wanted != current:
            print("README.md tables differ from the manifests: run scripts/readme_tables.py")
            return 1
        return 0
    README.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
