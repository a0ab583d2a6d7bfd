"""The README: its generated reference tables, its length and order, and links that resolve.

The tables are generated from the action manifests and must not drift; the README adopts in one
screen and sends the rest to docs/, whose links and anchors must all resolve.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.script_files import load_file

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    return load_file(ROOT / "scripts/readme_tables.py", "readme_tables")


def test_the_readme_has_a_generated_table_for_each_action():
    generator = _generator()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")

    assert sorted(generator.blocks(readme)) == sorted(generator.MANIFESTS)


def test_the_readme_tables_match_the_manifests():
    generator = _generator()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")

    assert generator.render(readme) == readme, "run scripts/readme_tables.py"


def test_a_changed_manifest_changes_the_table(tmp_path: Path):
    generator = _generator()
    manifest = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    manifest["inputs"]["workflow"]["description"] = "a | new meaning"
    (tmp_path / "action.yml").write_text(yaml.safe_dump(manifest), encoding="utf-8")
    readme = "<!-- BEGIN GENERATED: action.yml -->\nSTALE TABLE\n<!-- END GENERATED -->\n"

    rendered = generator.render(readme, tmp_path)

    assert "| `workflow` | yes |  | a \\| new meaning |" in rendered
    assert "STALE TABLE" not in rendered
    assert "| `run-id` |" in rendered


# -- the README adopts in one screen; the rest lives in docs/ ---------------------------------

README = ROOT / "README.md"
#: The README's sections, in the order a team adopting it needs them.
SECTIONS = [
    "Adopt it: two workflows",
    "Your own pools",
    "The guard: two forms",
    "Inputs and outputs",
    "The five most common failures",
    "On your machine",
    "Development",
    "Where we depart from the specification",
    "More",
]
FIRST_SCREEN = 100


def _lines() -> list[str]:
    return README.read_text(encoding="utf-8").splitlines()


def test_the_readme_is_under_350_lines():
    assert len(_lines()) < 350


def test_the_readme_sections_come_in_order():
    assert [line[3:] for line in _lines() if line.startswith("## ")] == SECTIONS


def test_the_first_screen_holds_both_workflows_the_trust_setting_and_the_pools():
    """Both workflows (whole: `on:` included), the runner-group setting, and the default pools."""
    screen = "\n".join(_lines()[:FIRST_SCREEN])
    for marker in ("<!-- lint: pair=cpu coordinator -->", "<!-- lint: pair=cpu child -->"):
        assert marker in screen, marker
    child = screen.split("<!-- lint: pair=cpu child -->", 1)[1]
    assert child.count("```") >= 2, "the child workflow ends after the first screen"
    assert screen.count("\non:\n") == 2
    assert "Selected workflows" in screen
    assert "default pools are the original action's catalogue" in screen
    assert "`runners`" in screen


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    return {_slug(m[1]) for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)}


DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(document: Path):
    text = re.sub(r"```.*?```", "", document.read_text(encoding="utf-8"), flags=re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        assert resolved.exists(), f"{document.name}: {target}"
        if anchor:
            assert anchor in _anchors(resolved), f"{document.name}: {target}"


def test_every_departure_is_listed_in_the_readme_one_line_each():
    """One line per departure of docs/departures.md, in order, linking to its reason."""
    reasons = re.findall(
        r"^## (\d+)\. (.+)$",
        (ROOT / "docs" / "departures.md").read_text(encoding="utf-8"),
        re.MULTILINE,
    )
    listed = re.findall(
        r"^(\d+)\. \[(.+)\]\(docs/departures\.md#(.+)\)$", "\n".join(_lines()), re.MULTILINE
    )
    assert len(reasons) >= 15
    assert [(n, title) for n, title, _ in listed] == reasons
    assert [anchor for _, _, anchor in listed] == [_slug(f"{n}. {t}") for n, t in reasons]
