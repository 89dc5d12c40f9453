"""The README stays short, names every command, and no link in it or docs/ leaves the
repository or points at nothing.

A newcomer reads README.md first, then docs/; a link that leads out of the repository, to
a file since moved, or to a heading since renamed is a dead end, and a command missing from
the README is one nobody finds."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest


def repository_root() -> Path:
    """The folder holding pyproject.toml, wherever in tests/ this file lives."""
    here = Path(__file__).resolve().parent
    return next(p for p in (here, *here.parents) if (p / "pyproject.toml").is_file())


ROOT = repository_root()
README = ROOT / "README.md"
README_MAX_BYTES = 12_000  # 12 KB, read as the stricter 1,000 bytes a KB
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'(][^)]*)?\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
AUTOLINK = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]*:[^>\s]*)>")
BARE_URL = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text outside code blocks and code spans, where links are links."""
    return CODE_SPAN.sub(" ", FENCE.sub("", text))


def anchors(md: Path) -> set[str]:
    """The anchors GitHub gives the headings of a markdown file: lowercased, punctuation
    dropped (code marks, links reduced to their text), spaces made hyphens; a repeated one
    gets -1, -2, ..."""
    seen: dict[str, int] = {}
    found = set()
    for _, title in HEADING.findall(FENCE.sub("", md.read_text())):
        title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def link_targets(md: Path) -> list[str]:
    """Every link's target: inline links and images, reference definitions, autolinks,
    and bare URLs (which GitHub makes links too)."""
    text, targets = prose(md.read_text()), []
    for pattern in (INLINE_LINK, REFERENCE, AUTOLINK, BARE_URL):
        targets += [m.group(m.lastindex or 0) for m in pattern.finditer(text)]
        text = pattern.sub(" ", text)
    return targets


def link_problems(md: Path, root: Path = ROOT) -> list[str]:
    """Every link and image of `md` that is not relative or does not resolve to a file (and
    heading) inside `root`."""
    problems = []
    for target in link_targets(md):
        where = f"{md.relative_to(root)}: {target or '(empty)'}"
        if not target or SCHEME.match(target) or target.startswith(("/", "www.")):
            problems.append(f"{where}: not a relative link into the repository")
            continue
        path, _, anchor = target.partition("#")
        file = (md.parent / path).resolve() if path else md
        if not file.is_relative_to(root.resolve()):
            problems.append(f"{where}: leaves the repository")
        elif not file.is_file():
            problems.append(f"{where}: no such file")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            problems.append(f"{where}: no heading #{anchor} in {file.name}")
    return problems


# ---- which commands the command line has ----------------------------------------------------


def parser_commands(parser: argparse.ArgumentParser, prefix=()) -> list[tuple[str, ...]]:
    """Every command the parser runs, as its words: ("ring", "up"), ("node",), ..."""
    groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not groups:
        return [prefix] if prefix else []
    return [
        command
        for group in groups
        for name, sub in group.choices.items()
        for command in parser_commands(sub, (*prefix, name))
    ]


def help_listing(help_text: str) -> list[str]:
    """The subcommands an argparse --help lists: under its positional arguments, the
    metavar's line (COMMAND, ACTION, ...) followed by one line per subcommand indented by
    four spaces (a long name's help goes on the next line, indented further)."""
    block = help_text.partition("positional arguments:\n")[2].split("\n\n")[0]
    return [m.group(1) for m in re.finditer(r"^ {4}([a-z][\w-]*)", block, re.M)]


def run_help(*words: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "cqengine", *words, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout


def help_commands(prefix=()) -> list[tuple[str, ...]]:
    """Every command, found by reading `python -m cqengine ... --help` as a user would."""
    names = help_listing(run_help(*prefix))
    if not names:
        return [prefix] if prefix else []
    return [command for name in names for command in help_commands((*prefix, name))]


def cli_commands() -> list[tuple[str, ...]]:
    """The commands of the real command line: from its parser when the CLI exports
    build_parser (cqengine/cli.py or the package cqengine/cli/), else from --help."""
    try:
        from cqengine.cli import build_parser
    except ImportError:
        return help_commands()
    return parser_commands(build_parser())


# ---- the tests ------------------------------------------------------------------------------


def test_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size:,} bytes, over {README_MAX_BYTES:,}: move detail to docs/"
    )


def test_readme_keeps_the_two_commands_a_new_user_runs():
    """CI runs `make test` as the README's test command; both targets must exist."""
    blocks = re.findall(r"^```sh\n(.*?)^```", README.read_text(), re.M | re.S)
    first = [line.split("#")[0].strip() for line in blocks[0].splitlines()] if blocks else []
    assert first[:2] == ["make demo", "make test"], first
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), f"no `make {target}` in the Makefile"


@pytest.mark.parametrize("md", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_stays_in_the_repository_and_resolves(md):
    assert link_problems(md) == []


def test_docs_exist():
    names = {p.name for p in DOCS}
    assert {"README.md", "operations.md", "protocol.md", "evaluation.md"} <= names


def test_readme_names_every_command():
    commands = cli_commands()
    assert ("ring", "up") in commands and ("experiment",) in commands, commands
    readme = README.read_text()
    missing = [" ".join(c) for c in commands if f"`cqengine {' '.join(c)}" not in readme]
    assert missing == [], f"README.md does not name: {', '.join(missing)}"


def test_help_listing_reads_the_real_help():
    """The --help fallback of cli_commands finds what the parser holds."""
    from cqengine.cli import build_parser

    commands = parser_commands(build_parser())
    assert help_listing(run_help()) == list(dict.fromkeys(c[0] for c in commands))
    assert help_listing(run_help("ring")) == [c[1] for c in commands if c[0] == "ring"]
    assert help_listing(run_help("experiment")) == []


def test_link_checker_catches_dead_and_outside_links(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "other.md").write_text("# Other\n\n## Its part `x`\n")
    md = tmp_path / "docs" / "page.md"
    md.write_text(
        "# Page\n\n"
        "[ok](../other.md#its-part-x) [here](#page) ![img](../other.md)\n"
        "[web](https://example.org) <http://example.org> see https://example.org/x\n"
        "[shared](../../shared/DESIGN.md) [gone](missing.md) [anchor](../other.md#nope)\n"
        "[abs](/etc/passwd)\n\n[ref]: ../other.md#other\n"
        "`[in code](nowhere.md)`\n\n```\n[in a block](nowhere.md)\n```\n"
    )
    problems = link_problems(md, tmp_path)
    assert len(problems) == 7, problems
    for expected in ("example.org", "shared/DESIGN.md", "missing.md", "#nope", "/etc/passwd"):
        assert any(expected in p for p in problems), expected
    assert not any("nowhere" in p or "its-part-x" in p for p in problems)
