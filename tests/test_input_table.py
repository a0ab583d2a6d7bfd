"""The input tables: each manifest, the README, the rules, the flags and lint agree with them."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
import yaml

from runner_queue_fallback.commands.flags import INPUT_HELP
from runner_queue_fallback.core import inputs as inputs_module
from runner_queue_fallback.core.input_table import COORDINATOR, GUARD, Input, table
from runner_queue_fallback.core.inputs import (
    PROFILE_RULES,
    RULES,
    InputErrors,
    read_guard_inputs,
    read_pool_settings,
)
from runner_queue_fallback.core.profiles import load_profiles
from runner_queue_fallback.tools.lint import coordinator as lint_coordinator
from tests.script_files import load_file

ROOT = Path(__file__).resolve().parent.parent
#: Each manifest and the table it declares.
MANIFESTS = {
    "action.yml": COORDINATOR,
    "guard/action.yml": GUARD,
    "guard/docker/action.yml": GUARD,
}
ROWS = [pytest.param(item, id=f"coordinator-{name}") for name, item in COORDINATOR.items()] + [
    pytest.param(item, id=f"guard-{name}") for name, item in GUARD.items()
]
GUARD_ENVIRON = {
    "INPUT_REQUEST-ID": "rq-1",
    "INPUT_PARENT-RUN-ID": "7",
    "INPUT_PARENT-RUN-ATTEMPT": "1",
    "INPUT_SOURCE-REF": "refs/heads/main",
    "INPUT_SOURCE-SHA": "a" * 40,
    "INPUT_TOKEN": "t0ken",
}


def _declared(item: Input) -> dict[str, Any]:
    """What the manifest must say for `item`, as YAML loads it."""
    found: dict[str, Any] = {"description": item.description, "required": item.required}
    if item.default is not None:
        found["default"] = item.default
    return found


def _yaml(item: Input) -> str:
    """The manifest entry to paste for `item` (descriptions folded, defaults quoted)."""
    folded = textwrap.fill(item.description, width=94, break_on_hyphens=False)
    lines = [f"  {item.name}:", "    description: >-", textwrap.indent(folded, "      ")]
    lines.append(f"    required: {str(item.required).lower()}")
    if item.default is not None:
        lines.append(f"    default: '{item.default}'")
    return "\n".join(lines)


@pytest.mark.parametrize(("path", "inputs"), MANIFESTS.items(), ids=list(MANIFESTS))
def test_each_manifest_declares_its_table(path: str, inputs: Mapping[str, Input]):
    """Names in the table's order, and each description, `required` and default word for word."""
    declared = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))["inputs"]
    assert list(declared) == list(inputs), f"{path}: the inputs differ from the table's"
    for name, item in inputs.items():
        assert declared[name] == _declared(item), (
            f"{path}: input {name} differs from its row in core/input_table.py; "
            f"the table says:\n{_yaml(item)}"
        )


def test_the_pasted_entry_loads_as_the_row_says():
    """The entry a failing comparison shows is one the comparison accepts."""
    for item in [*COORDINATOR.values(), *GUARD.values()]:
        assert yaml.safe_load(_yaml(item))[item.name] == _declared(item), item.name


@pytest.mark.parametrize(
    ("path", "inputs"), [("action.yml", COORDINATOR), ("guard/action.yml", GUARD)]
)
def test_the_readme_input_tables_show_the_table(path: str, inputs: Mapping[str, Input]):
    """The README's generated input table is the one the input table makes."""
    generator = load_file(ROOT / "scripts/readme_tables.py", "readme_tables")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (block,) = [m["body"] for m in generator._BLOCK.finditer(readme) if m["manifest"] == path]
    wanted = generator.tables({"inputs": {n: _declared(i) for n, i in inputs.items()}})
    assert block.startswith(wanted)


@pytest.mark.parametrize("item", ROWS)
def test_every_rule_a_table_names_exists(item: Input):
    assert item.rule in RULES or item.rule in PROFILE_RULES, item.rule


def test_every_rule_is_named_by_a_table():
    """No rule is left over once its last input is gone."""
    named = {item.rule for item in [*COORDINATOR.values(), *GUARD.values()]}
    assert named == set(RULES) | set(PROFILE_RULES)


@pytest.mark.parametrize("item", ROWS)
def test_every_default_and_stand_in_passes_its_own_rule(item: Input):
    """A default is read by its input's rule when the input is omitted: it must pass it."""
    rule = RULES.get(item.rule)
    for value in (item.default, item.stand_in):
        if value is not None and rule is not None and not value.startswith("${{"):
            rule(item.name, value)


@pytest.mark.parametrize("item", ROWS)
def test_a_secret_has_no_flag_and_no_default_of_its_own(item: Input):
    """No flag takes a token; a token's only default is the runner's own `${{ github.token }}`."""
    if item.secret:
        assert item.flag is None
        assert item.default is None or item.runner_default


def test_the_guard_has_no_flags_and_no_stand_ins():
    """The guard is run by the runner only: no command takes its inputs as flags, lint none."""
    assert all(item.flag is None and item.stand_in is None for item in GUARD.values())


def test_every_coordinator_input_but_the_credentials_has_a_flag():
    flagless = {n for n, i in COORDINATOR.items() if i.flag is None}
    assert flagless == {"token", "runners-token", "app-private-key"}
    assert flagless == {n for n, i in COORDINATOR.items() if i.secret}


def test_flag_help_states_the_tables_default_or_what_omitting_means():
    assert INPUT_HELP["execution-timeout-minutes"] == "whole minutes, 1 to 4320 (default: 180)"
    assert INPUT_HELP["queue-timeout-minutes"].endswith("(default: the policy's)")
    assert INPUT_HELP["workflow"].endswith("(preflight needs it; default: none)")


def test_needed_means_required_or_defaulted_by_the_runner():
    assert COORDINATOR["token"].needed
    assert COORDINATOR["workflow"].needed
    assert not COORDINATOR["runners-token"].needed
    assert not COORDINATOR["api-version"].needed


def test_a_name_listed_twice_is_refused():
    item = GUARD["token"]
    with pytest.raises(ValueError, match="listed twice"):
        table(item, item)


def test_lint_stands_in_for_every_needed_input():
    """lint validates a step whose needed input is missing or an expression with the stand-in.

    Without one, a new needed input would be reported by RQF204 as well as by RQF201 (missing).
    `runner-type` needs none: lint starts from a runner type of its own.
    """
    for name, item in COORDINATOR.items():
        if item.needed and name != "runner-type":
            assert lint_coordinator._STAND_INS[name] == item.stand_in, name


def _with(inputs: Mapping[str, Input], name: str, **changes: Any) -> Mapping[str, Input]:
    return MappingProxyType({**inputs, name: dataclasses.replace(inputs[name], **changes)})


def test_an_omitted_input_takes_the_tables_default(monkeypatch: pytest.MonkeyPatch):
    """The default the program reads is the one written in the table, read by the input's rule."""
    profiles = load_profiles()
    environ = {"INPUT_RUNNER-TYPE": "cpu"}
    assert read_pool_settings(environ, profiles).execution_timeout_minutes == 180
    changed = _with(COORDINATOR, "execution-timeout-minutes", default="90")
    monkeypatch.setattr(inputs_module, "COORDINATOR", changed)
    settings = read_pool_settings(environ, profiles)
    assert settings.execution_timeout_minutes == 90
    assert settings.admission_timeout_minutes == int(
        str(COORDINATOR["admission-timeout-minutes"].default)
    )


def test_an_input_the_table_requires_is_required(monkeypatch: pytest.MonkeyPatch):
    """Turning `required` on in the guard's table makes the guard refuse to run without it."""
    assert read_guard_inputs(GUARD_ENVIRON).coordinator_ref == ""
    monkeypatch.setattr(inputs_module, "GUARD", _with(GUARD, "coordinator-ref", required=True))
    with pytest.raises(InputErrors) as caught:
        read_guard_inputs(GUARD_ENVIRON)
    assert [error.name for error in caught.value.errors] == ["coordinator-ref"]


def test_an_input_is_checked_by_the_rule_its_row_names(monkeypatch: pytest.MonkeyPatch):
    """The row's rule is the one applied: a request id read as a number refuses `rq-1`."""
    changed = _with(GUARD, "request-id", rule="positive-whole-number")
    monkeypatch.setattr(inputs_module, "GUARD", changed)
    with pytest.raises(InputErrors) as caught:
        read_guard_inputs(GUARD_ENVIRON)
    assert "positive whole number" in str(caught.value)
