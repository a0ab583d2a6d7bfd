"""A YAML parser's error as a person reads it: where, what the parser expected, and what to change.

PyYAML's own text spans several lines, names the input `<unicode string>` and differs between
its two loaders (libyaml's "did not find expected ',' or ']'", the Python one's "expected ',' or
']', but got ':'"). `explain` reads the parts the error carries instead (the problem, its place,
and the context the parser was in, with the place that context began) and says it on one line,
with a fix that names the lines to look at. The caller names the file: `lint` in front of each
finding, `simulate` in front of a scenario file's error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import yaml

__all__ = ["YamlProblem", "explain"]


@dataclass(frozen=True)
class YamlProblem:
    """Where the parser stopped (1-based), what went wrong there, and what to change."""

    line: int
    column: int
    what: str
    fix: str

    @property
    def message(self) -> str:
        """`not valid YAML at line 3, column 4: <what>`, one line."""
        return f"not valid YAML at line {self.line}, column {self.column}: {self.what}"


@dataclass(frozen=True)
class _Place:
    line: int  # 1-based
    column: int  # 1-based

    @property
    def text(self) -> str:
        return f"line {self.line}, column {self.column}"


def explain(error: yaml.YAMLError, text: str) -> YamlProblem:
    """What `error`, raised while parsing `text`, means, on one line, and how to fix it."""
    if isinstance(error, yaml.reader.ReaderError):
        return _reader(error, text)
    at = _place(getattr(error, "problem_mark", None)) or _Place(1, 1)
    e = _Error(
        problem=_one_line(getattr(error, "problem", None) or ""),
        context=_one_line(getattr(error, "context", None) or ""),
        at=at,
        began=_place(getattr(error, "context_mark", None)) or at,
        text=text,
    )
    for rule in _RULES:
        explained = rule(e)
        if explained is not None:
            return YamlProblem(at.line, at.column, *explained)
    return YamlProblem(at.line, at.column, *_general(e))


@dataclass(frozen=True)
class _Error:
    """The parts of a parser's error: its problem, the context it was in, and their places."""

    problem: str
    context: str
    at: _Place  # where the parser stopped
    began: _Place  # where its context began (the `[` of a list, a mapping's first key)
    text: str  # what was parsed

    def says(self, *words: str) -> bool:
        """Whether the problem holds any of `words` (either loader's wording, any case)."""
        return any(word in self.problem.lower() for word in words)

    def within(self, *words: str) -> bool:
        """Whether the context holds any of `words`."""
        return any(word in self.context.lower() for word in words)

    @property
    def found(self) -> str:
        """The character where the parser stopped ("" past the end of its line)."""
        line = _line(self.text, self.at.line)
        return line[self.at.column - 1] if 0 < self.at.column <= len(line) else ""


# -- the rules: each explains one kind of error as (what, fix), or returns None ---------------

_Explained = tuple[str, str] | None


def _lines(first: int, last: int) -> str:
    return f"line {first}" if first == last else f"lines {first} to {last}"


def _flow(e: _Error) -> _Explained:
    """An unclosed `[` list or `{` mapping, or a missing comma in one."""
    if e.within("flow sequence"):
        kind, opening, closing, items = "list", "[", "]", "items"
    elif e.within("flow mapping"):
        kind, opening, closing, items = "mapping", "{", "}", "entries"
    else:
        return None
    inside = f"in the {kind} that '{opening}' opens at {e.began.text}"
    what = (
        f"expected ',' or '{closing}' {inside}" if e.says("expected") else f"{e.problem} {inside}"
    )
    return what, (
        f"check the brackets and commas on {_lines(e.began.line, e.at.line)}: close the {kind} "
        f"with '{closing}' and separate its {items} with ', ', or quote the value if it is text "
        f"that starts with '{opening}'"
    )


def _colon(e: _Error) -> _Explained:
    """`key: a: b`, or a key indented deeper than the keys beside it."""
    if not e.says("mapping values are not allowed"):
        return None
    return "a ': ' where no new key can start", (
        f"on line {e.at.line}, quote a value that holds ': ' (name: 'a: b'), or indent the key "
        "like the keys above it"
    )


def _tab(e: _Error) -> _Explained:
    """A tab where YAML wants indentation or a value."""
    if e.found != "\t" or not e.says("cannot start any token", "tab character"):
        return None
    return "a tab, which YAML does not allow for indentation", (
        f"indent line {e.at.line} with spaces instead of the tab"
    )


def _reserved(e: _Error) -> _Explained:
    """A value that starts with a character YAML reserves (`@`, a backtick, `%`, `]`, ...)."""
    starts = e.says("cannot start any token") or (e.within("block node") and e.says("node content"))
    if not starts or not e.found.strip():
        return None
    return f"a plain value cannot start with {e.found!r}", (
        f"quote the value on line {e.at.line} ('{e.found}...'): YAML reserves {e.found!r} at the "
        "start of a value"
    )


def _quote(e: _Error) -> _Explained:
    """A quote never closed, or an escape double quotes do not know."""
    if not e.within("quoted scalar"):
        return None
    if e.says("escape"):
        return "a backslash escape that double quotes do not know", (
            f"on line {e.at.line}, write the backslash twice (\\\\), or use single quotes, in "
            "which a backslash is plain text"
        )
    return f"the quote opened at {e.began.text} is not closed", (
        f"close the quote opened on line {e.began.line}; inside the value, write a single quote "
        "as '' between single quotes, a double quote as \\\" between double quotes"
    )


def _stray_closer(e: _Error) -> _Explained:
    """`a: [b, c]]`: a `]` or `}` that closes nothing."""
    if e.found not in {"]", "}"} or not e.within("block"):
        return None
    opening = "[" if e.found == "]" else "{"
    return f"a '{e.found}' that closes no '{opening}'", (
        f"remove the extra '{e.found}' on line {e.at.line}, or quote the value if it is text"
    )


def _after_quote(e: _Error) -> _Explained:
    """`name: 'a' b`: text after the closing quote of a value."""
    if not (e.within("block mapping") and e.says("expected key", "block end")):
        return None
    before = _line(e.text, e.at.line)[: e.at.column - 1].rstrip()
    if not before.endswith(("'", '"')):
        return None
    return "text after the closing quote of a value", (
        f"quote the whole value on line {e.at.line}, or move the text inside the quotes"
    )


def _mapping(e: _Error) -> _Explained:
    """A line that does not line up with the keys of its mapping."""
    if not (e.within("block mapping") and e.says("expected key", "block end")):
        return None
    return f"expected a key of the mapping that starts at {e.began.text}", (
        f"indent line {e.at.line} like the keys of that mapping (column {e.began.column}), or, "
        "if it continues the value above it, quote that whole value"
    )


def _sequence(e: _Error) -> _Explained:
    """A line inside a `- ` list that is not one of its items."""
    if not e.within("block collection", "block sequence"):
        return None
    return f"expected an item ('- ') of the list that starts at {e.began.text}", (
        f"start each item of that list with '- ' at column {e.began.column}, or indent line "
        f"{e.at.line} less to end the list"
    )


def _alias(e: _Error) -> _Explained:
    """`*name` without its `&name`, or a bare `*` or `&`."""
    if e.says("undefined alias"):
        return "'*' starts an alias, and no anchor (&name) of that name comes before it", (
            f"quote the value on line {e.at.line} if the '*' is text ('*...')"
        )
    if e.within("alias"):
        return "'*' starts an alias, which needs the name of an anchor (&name)", (
            f"quote the value on line {e.at.line} if the '*' is text ('*...')"
        )
    if e.within("anchor") and not e.within("duplicate"):
        return "'&' starts an anchor, which needs a name", (
            f"quote the value on line {e.at.line} if the '&' is text ('&...')"
        )
    return None


def _duplicate_anchor(e: _Error) -> _Explained:
    """The same `&name` twice."""
    if not e.within("duplicate anchor"):
        return None
    return f"the anchor defined at {e.began.text} is defined again", (
        f"give the anchor on line {e.at.line} another name"
    )


def _documents(e: _Error) -> _Explained:
    """A second document (`---`) in a file that holds one."""
    if not e.within("single document"):
        return None
    return "a second document starts here; the file holds one", (
        f"remove the '---' on line {e.at.line} and what follows it, or merge the two parts"
    )


def _block_scalar(e: _Error) -> _Explained:
    """`key: |x`: text on the line of a `|` or `>`."""
    if not e.within("block scalar"):
        return None
    return "after '|' or '>' only '-', '+' or an indentation digit may follow", (
        f"put the text on the lines after line {e.began.line}, indented under its key"
    )


def _directive(e: _Error) -> _Explained:
    """A line that starts with `%`, read as a directive."""
    if not e.within("directive"):
        return None
    return "a line that starts with '%' is read as a YAML directive", (
        f"quote the value on line {e.at.line}, or remove the line"
    )


_RULES: tuple[Callable[[_Error], _Explained], ...] = (
    _flow,
    _colon,
    _tab,
    _quote,
    _stray_closer,
    _after_quote,
    _mapping,
    _sequence,
    _alias,
    _duplicate_anchor,
    _documents,
    _block_scalar,
    _directive,
    _reserved,
)


def _general(e: _Error) -> tuple[str, str]:
    """Any other error: the parser's problem in one line, and where its context began."""
    expected = re.sub(r"^did not find expected\b", "expected", e.problem) or "the parser stopped"
    where = re.sub(r"^while (parsing|scanning) ", "", e.context)
    what = f"{expected} (in {where} that starts at {e.began.text})" if where else expected
    return what, (
        f"look at line {e.at.line} and the lines just above it: a quote, bracket or brace left "
        "open, a tab, or an indentation unlike the lines around it are the usual causes"
    )


def _reader(error: yaml.reader.ReaderError, text: str) -> YamlProblem:
    """A character YAML allows nowhere (a control character): its code, line and column."""
    code = error.character if isinstance(error.character, int) else None
    index = max(text.find(chr(code)), 0) if code is not None else 0
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    if code is None:
        return YamlProblem(
            line, column, "a character YAML does not allow", f"remove it from line {line}"
        )
    escape = (
        f"\\x{code:02x}"
        if code <= 0xFF
        else f"\\u{code:04x}"
        if code <= 0xFFFF
        else f"\\U{code:08x}"
    )
    return YamlProblem(
        line,
        column,
        f"the character U+{code:04X}, which YAML does not allow",
        f'remove it from line {line}, or write it as the escape "{escape}" between double quotes',
    )


# -- helpers ---------------------------------------------------------------------------------


def _place(mark: object) -> _Place | None:
    line, column = getattr(mark, "line", None), getattr(mark, "column", None)
    if not isinstance(line, int) or not isinstance(column, int):
        return None
    return _Place(line + 1, column + 1)


def _line(text: str, number: int) -> str:
    lines = text.split("\n")
    return lines[number - 1] if 0 < number <= len(lines) else ""


def _one_line(text: str) -> str:
    return " ".join(text.split())
