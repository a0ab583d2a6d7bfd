"""The README's reference tables are generated from the action manifests and must not drift."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "readme_tables", ROOT / "scripts/readme_tables.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
