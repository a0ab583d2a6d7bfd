"""`lint`: check a coordinator workflow and its child against the rules of the spec.

    runner-queue-fallback lint COORDINATOR.yml [CHILD.yml]
    runner-queue-fallback lint [--dir .github/workflows]

Each finding names the file, line and rule id, says what is wrong and why, and how to fix it.
Errors fail the lint (exit 1); warnings and notices do not.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import TextIO

from runner_queue_fallback.core.actions_io import Reporter, escape_log_line
from runner_queue_fallback.tools.lint.engine import LintResult, lint_directory, lint_files
from runner_queue_fallback.workflow.model import RULES, Finding, Rule

__all__ = [
    "NOTHING_TO_CHECK",
    "RULES",
    "Finding",
    "LintResult",
    "Rule",
    "add_arguments",
    "lint_directory",
    "lint_files",
    "render",
    "rules_table",
    "run",
]

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
DEFAULT_DIR = Path(".github/workflows")
#: Nothing to lint is a usage problem (exit 2), not a pass.
NOTHING_TO_CHECK = (
    "nothing to check: no workflow in {dir} uses the coordinator; pass COORDINATOR.yml "
    "[CHILD.yml], or --dir with the workflows that use it"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `lint` subcommand's arguments."""
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        metavar="FILE",
        help="COORDINATOR.yml, optionally followed by CHILD.yml (default: search --dir)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        metavar="PATH",
        help=f"lint every workflow here that uses the coordinator (default: {DEFAULT_DIR})",
    )
    parser.add_argument(
        "--format",
        choices=("text", "github"),
        default="text",
        help="text lines, or GitHub annotations (::error file=...,line=...)",
    )
    parser.add_argument("--rules", action="store_true", help="print the rule table and exit")


def run(args: argparse.Namespace, stream: TextIO) -> int:
    """Run `lint` for parsed arguments; 1 if any error was found, 2 for a usage problem."""
    if args.rules:
        print(rules_table(), file=stream)
        return EXIT_OK
    files: list[Path] = args.files
    problem = _usage_problem(files, args.dir)
    if problem:
        _say(stream, args.format, problem, level="error")
        return EXIT_USAGE
    if files:
        result = lint_files(files[0], files[1] if len(files) > 1 else None)
    else:
        result = lint_directory(args.dir or DEFAULT_DIR)
    print(render(result, args.format), file=stream, end="")
    if not files and not result.coordinators and not result.findings:
        _say(
            stream, args.format, NOTHING_TO_CHECK.format(dir=args.dir or DEFAULT_DIR), level="error"
        )
        return EXIT_USAGE
    return EXIT_FINDINGS if result.errors else EXIT_OK


def _usage_problem(files: list[Path], directory: Path | None) -> str:
    if len(files) > 2:
        return "lint takes at most two files: COORDINATOR.yml and CHILD.yml"
    if files and directory is not None:
        return "give either files or --dir, not both"
    if files and not files[0].is_file():
        return f"no such file: {files[0]}"
    directory = directory or DEFAULT_DIR
    if not files and not directory.is_dir():
        return f"no such directory: {directory} (run from the repository root, or pass --dir)"
    return ""


def _say(stream: TextIO, fmt: str, message: str, *, level: str = "notice") -> None:
    if fmt == "github":
        Reporter(stream).command(level, message, title="lint")
    else:
        Reporter(stream).log(f"{level}: {message}" if level == "error" else message)


def render(result: LintResult, fmt: str) -> str:
    """The findings as text lines or GitHub annotations, then a one-line summary.

    A finding quotes the workflow (a path, a value, a YAML error with its line): as text, each
    is one log line through `escape_log_line`, so no value can start a line or a command.
    """
    lines = []
    for finding in result.findings:
        if fmt == "github":
            lines.append(_annotation(finding))
        else:
            lines.append(escape_log_line(finding.text()))
    if result.coordinators or result.findings:
        lines.append(_summary(result))
    return "".join(f"{line}\n" for line in lines)


def _annotation(finding: Finding) -> str:
    buffer = io.StringIO()
    Reporter(buffer).command(
        finding.level,
        f"{finding.message} (fix: {finding.fix})",
        file=finding.path,
        line=str(finding.line),
        title=finding.rule,
    )
    return buffer.getvalue().rstrip("\n")


def _summary(result: LintResult) -> str:
    counts = dict.fromkeys(("error", "warning", "notice"), 0)
    for finding in result.findings:
        counts[finding.level] += 1
    found = ", ".join(f"{n} {level}{'' if n == 1 else 's'}" for level, n in counts.items())
    return f"lint: {found} in {len(result.coordinators)} coordinator workflow(s)"


def rules_table() -> str:
    """Every rule as a Markdown table: id, level, what it checks."""
    rows = ["| id | level | checks |", "| --- | --- | --- |"]
    rows += [f"| {r.id} | {r.level} | {r.checks} |" for r in RULES.values()]
    return "\n".join(rows)
