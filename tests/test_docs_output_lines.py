"""Every sample of output a page shows is what the code prints today: each line of a page's plain code
block (one with no language named) is matched against the lines the code can print, read from its
source (ast): every string and f-string, a value's place in it matching any text. A `console` block
is held alike, its `$ ` lines (the command typed) left out. A changed line in the
code, or a page that shows an old one, fails here.

What a page shows that the lab does not print (a diagram, the game's own text, a worked sum, decoded
tokens) is marked just above its block: `<!-- not the lab's output: why -->`. A line a page cuts short
with "..." must begin as a printed line does; a line of data a run dumps (a tool's schema, TRL's log of
a step), starting with "{", is the libraries' and is not held."""

import ast
import glob
import os
import re

import pytest
from conftest import ROOT

SOURCES = [os.path.join(ROOT, name) for name in ("env_rollout.py", "modes.py", "trl_on_cpu.py", "env_check.py")]
SOURCES += [
    path for folder in ("labkit", "bench", "docs") for path in sorted(glob.glob(os.path.join(ROOT, folder, "*.py")))
]
PAGES = [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]
PAGES += sorted(glob.glob(os.path.join(ROOT, "bench", "*.md")))
NOT_OUTPUT = re.compile(r"<!-- not the lab's output: \w[^>]*-->\s*$")
BLOCK = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.M | re.S)
CHECK_LINE = re.compile(r"^(PASS|WARN|FAIL|SKIP)  \w+: (.*)$")  # env_check's finding: status, check, message
HOLE = "\x00"  # where a value goes
BEGUN = 20  # characters of a line's own text that a cut-short line must show, so that values cannot match it alone


def built_text(node) -> str | None:
    """The text a string expression builds, with HOLE for each value put in; None where it builds none."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else HOLE for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = built_text(node.left), built_text(node.right)
        if left is None and right is None:
            return None
        return (HOLE if left is None else left) + (HOLE if right is None else right)
    return None


def printable_lines() -> tuple[list[re.Pattern], list[str]]:
    """A pattern for each line the code's strings can make (with six or more characters of its own), and
    the lines themselves (HOLE where a value goes)."""
    lines = set()
    for path in SOURCES:
        with open(path, encoding="utf-8") as file:
            tree = ast.parse(file.read(), filename=path)
        for node in ast.walk(tree):
            text = built_text(node)
            if text is not None:
                lines.update(line.strip() for line in text.split("\n") if len(line.replace(HOLE, "").strip()) >= 6)
    patterns = [re.compile("".join(".*?" if c == HOLE else re.escape(c) for c in line)) for line in lines]
    return patterns, sorted(lines)


PATTERNS, LINES = printable_lines()


def printed(line: str) -> bool:
    check = CHECK_LINE.match(line)
    return any(pattern.fullmatch(line) or (check and pattern.fullmatch(check.group(2))) for pattern in PATTERNS)


def begins_a_printed_line(prefix: str) -> bool:
    """Whether `prefix` (a line a page cut short with "...") is how some printable line begins: each
    literal part of it, in order, as far as the prefix goes; a value's place takes any text."""
    check = CHECK_LINE.match(prefix + " ")
    texts = [prefix] + ([check.group(2).rstrip()] if check else [])
    return any(begins(text, line.split(HOLE)) for text in texts for line in LINES)


def begins(text: str, parts: list[str]) -> bool:
    first, *rest = parts
    if not rest:
        return first.startswith(text)
    if not text.startswith(first):
        return first.startswith(text)
    at = matched = len(first)
    for part in rest:  # each comes after a value, which takes any text up to it
        found = text.find(part, at)
        if found < 0:  # the cut falls in this part (or in the value before it): the text must end as
            # the part begins, and what the line wrote itself so far must be enough to know it by
            overlap = next(len(text) - k for k in range(at, len(text) + 1) if part.startswith(text[k:]))
            return matched + overlap >= BEGUN
        at, matched = found + len(part), matched + len(part)
    return at == len(text) or parts[-1] == ""


def output_blocks(path: str):
    """(line number, lines) of each plain or console code block on the page that is not marked as another's
    output, without the commands typed."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    for block in BLOCK.finditer(text):
        before = text[: block.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if block.group(2) not in ("", "console") or NOT_OUTPUT.search(before):
            continue
        lines = [line.strip() for line in block.group(3).splitlines()]
        yield text[: block.start()].count("\n") + 1, [line for line in lines if not line.startswith("$ ")]


def test_the_matcher_tells_a_printed_line_from_one_the_code_no_longer_prints():
    assert printed("success rate before=0.622 after=0.877 (optimum 0.875, random 0.330)")
    assert printed("PASS  pickle: a fresh instance pickles too")
    assert not printed("wordle solve rate before=0.000 after=0.000")  # the line --full printed once
    assert not printed("success rate before=0.622 after=0.877 (optimum 0.875, random 0.330) and more")
    assert begins_a_printed_line("FAIL  tools: close() is offered to the model, but its schema cannot be built (Doc")
    assert not begins_a_printed_line("FAIL  tools: close() is offered to the model, and its schema")


@pytest.mark.parametrize("path", PAGES, ids=lambda path: os.path.relpath(path, ROOT))
def test_each_sample_output_on_the_page_is_what_the_code_prints(path):
    unmatched = []
    for number, lines in output_blocks(path):
        for line in lines:
            # A blank line, one saying what is left out, or data a line dumps (a schema, a log's dict).
            if not line or line.startswith(("...", "{")) or printed(line):
                continue
            cuts = [match.start() for match in re.finditer(r"\.\.\.", line)]  # "..." may also be the code's own
            if not any(begins_a_printed_line(line[:cut].rstrip()) for cut in cuts):
                unmatched.append(f"block at line {number}: {line[:120]}" + " (cut short)" * bool(cuts))
    assert unmatched == [], "\n".join(unmatched)
