"""Workflow commands, outputs, state and summary: the runner's file formats."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from runner_queue_fallback.core import actions_io
from runner_queue_fallback.core.actions_io import (
    Reporter,
    escape_data,
    escape_markdown,
    escape_property,
    markdown_code,
)
from runner_queue_fallback.fake_github.model import TOKEN_LENGTH, fake_token


def test_escaping_follows_the_runner():
    assert escape_data("50%\nnext\r") == "50%25%0Anext%0D"
    assert escape_property("a:b,c") == "a%3Ab%2Cc"


def test_markdown_escaping_keeps_tables_intact():
    assert escape_markdown("a|b\n<script>") == "a\\|b &lt;script&gt;"


def test_masked_secret_is_registered_first_and_scrubbed_everywhere(tmp_path: Path):
    out = io.StringIO()
    summary = tmp_path / "summary.md"
    reporter = Reporter(out, summary_path=summary)
    reporter.mask("ghs_abc")
    reporter.log("token ghs_abc leaked?")
    reporter.error("bad ghs_abc")
    reporter.summary("| ghs_abc |")
    lines = out.getvalue().splitlines()
    assert lines[0] == "::add-mask::ghs_abc"
    assert all("ghs_abc" not in line for line in lines[1:])
    assert "ghs_abc" not in summary.read_text()


def test_a_token_of_the_2026_format_never_appears_whole_in_any_form(tmp_path: Path):
    """520 characters with `.`, `_` and `-`: masked in the log, commands, groups and the summary,
    also where outside text is escaped first (Markdown puts a backslash before each `_`)."""
    token = fake_token("2718281")
    assert len(token) == TOKEN_LENGTH
    assert {".", "_", "-"} <= set(token)
    out, summary = io.StringIO(), tmp_path / "summary.md"
    reporter = Reporter(out, summary_path=summary)
    reporter.mask(token)
    reporter.log(f"GitHub said: Bad credentials {token}")
    reporter.error(f"bad {token}", title=f"t {token}")
    reporter.warning(token)
    with reporter.group(f"group {token}"):
        reporter.log(f"::{token}")
    reporter.summary(f"| {escape_markdown(token)} | {markdown_code(token)} | {token} |\n")
    lines = out.getvalue().splitlines()
    assert lines[0] == f"::add-mask::{token}"  # the runner learns the whole token at once
    shown = "\n".join(lines[1:]) + summary.read_text()
    assert token not in shown
    assert escape_markdown(token) not in shown
    assert token.split(".")[-1] not in shown  # not even its signature


def test_outputs_and_state_use_the_delimiter_form(tmp_path: Path):
    output, state = tmp_path / "out", tmp_path / "state"
    reporter = Reporter(io.StringIO(), output_path=output, state_path=state)
    reporter.set_output("runner", '{"group":"g",\n"labels":"l"}')
    reporter.save_state("child-run-id", "42")
    text = output.read_text().splitlines()
    assert text[0].startswith("runner<<ghadelimiter_")
    assert text[1:3] == ['{"group":"g",', '"labels":"l"}']
    assert text[3] == text[0].split("<<")[1]
    assert state.read_text().splitlines()[1] == "42"
    assert reporter.outputs == {"runner": '{"group":"g",\n"labels":"l"}'}


def test_commands_and_groups():
    out = io.StringIO()
    reporter = Reporter(out)
    with reporter.group("Round 1"):
        reporter.notice("child https://x/1", title="Dispatched")
    assert out.getvalue().splitlines() == [
        "::group::Round 1",
        "::notice title=Dispatched::child https://x/1",
        "::endgroup::",
    ]


@settings(max_examples=300, derandomize=True, database=None)
@given(st.text(alphabet="abW.w:/@_-[]`*| \n", max_size=40))
def test_markdown_escaping_asks_for_autolinks_only_where_one_can_be(text: str):
    """The shortcut past the autolink search (`_may_autolink`) changes no escaped text."""
    found = list(actions_io._AUTOLINK.finditer(actions_io._LINE_BREAK.sub(" ", text)))
    assert not found or actions_io._may_autolink(text)
    parts, start, flat = [], 0, actions_io._LINE_BREAK.sub(" ", text)
    for match in actions_io._AUTOLINK.finditer(flat):
        parts += [
            actions_io._escape_inline(flat[start : match.start()]),
            markdown_code(match.group()),
        ]
        start = match.end()
    assert escape_markdown(text) == "".join([*parts, actions_io._escape_inline(flat[start:])])


def test_markdown_escaping_of_a_token_skips_the_autolink_search():
    """A 2026 token (520 characters, no `@`) is escaped without the autolink search."""
    assert not actions_io._may_autolink(fake_token("x"))
    assert actions_io._may_autolink("see WWW.example.test")
    assert actions_io._may_autolink("a@b.test")
