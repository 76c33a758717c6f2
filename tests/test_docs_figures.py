"""One source for each measured figure: where several pages quote the same figure, they agree.

A duration or a rate is measured in one place (the instructor's time plan, the Makefile's own comment,
the page that measured it); the other pages link to it or quote it unchanged. These tests read the
pages (and the lesson's comments) and fail where two of them give different values for one figure.
The exercises' quotes of the pages they cite are checked in tests/test_exercises.py."""

import os
import re

from conftest import ROOT
from test_docs_rooms import CLASSROOM_PAGES, read

DURATION = re.compile(r"\b(\d[\d,]*(?:\.\d+)?) ?(s|seconds|minutes|min)\b|\b(?:a )?(quarter|half) (?:of )?an hour\b")


def classroom_lines():
    """(page, line) for every line of the classroom's pages."""
    for path in CLASSROOM_PAGES:
        for line in read(path).splitlines():
            yield os.path.relpath(path, ROOT), line


def durations_after(name: str, line: str):
    """The durations a line states within its sentence after naming `name` (at most 120 characters on)."""
    for start in (match.end() for match in re.finditer(re.escape(name), line)):
        sentence = re.split(r"\.\s|;\s|\|", line[start : start + 120])[0]
        yield from DURATION.finditer(sentence)


def makefile_header() -> str:
    return read(os.path.join(ROOT, "Makefile")).split("\n\n")[0]


def test_the_test_suites_durations_are_measured_on_one_page():
    """`make test`, `make test-slow` and `make test-all` are timed in docs/instructor.md's time plan
    alone: README and the other pages say "minutes" and link there."""
    elsewhere = [
        f"{page}: {line.strip()[:100]}"
        for page, line in classroom_lines()
        if page != os.path.join("docs", "instructor.md") and any(durations_after("make test", line))
    ]
    assert elsewhere == [], "a page other than docs/instructor.md times the test suite:\n" + "\n".join(elsewhere)
    rows = [
        line
        for line in read(os.path.join(ROOT, "docs", "instructor.md")).splitlines()
        if line.startswith("| `make test")
    ]
    timed = [
        row.split("|")[1].strip() for row in rows if DURATION.search(row.split("|")[2] if row.count("|") > 2 else "")
    ]
    assert sorted(timed) == sorted(set(timed)) and timed, f"docs/instructor.md times a target twice, or none: {timed}"


def test_a_long_targets_duration_is_the_makefiles_wherever_it_is_quoted():
    """The Makefile's comment gives a duration for its long targets ("about 20 minutes"); a page that
    gives that target's (or its command's) duration in minutes gives the same."""
    commands = {"bench-learn": ("make bench-learn", "learn_bench.py"), "rehearse-smollm2": ("make rehearse-smollm2",)}
    header = makefile_header()
    for target, names in commands.items():
        entry = header.split(f"#   make {target}", 1)[1].split("\n#   make ", 1)[0]
        stated = re.search(r"about (\d+) minutes", entry)
        assert stated, f"the Makefile's comment on {target} gives no duration"
        quoted = {
            f"{page}: {match.group(0)}"
            for page, line in classroom_lines()
            for name in names
            for match in durations_after(name, line)
            if match.group(3) or match.group(2) in ("minutes", "min")
        }
        differing = {quote for quote in quoted if not quote.endswith(f"{stated.group(1)} minutes")}
        assert differing == set(), f"{target}: the Makefile says about {stated.group(1)} minutes, pages say {differing}"


def test_the_lesson_quotes_the_untrained_and_blind_success_the_smoke_prints():
    """Section 2's comment gives the untrained policy's success and blind guessing's, as README's smoke
    output prints them (before=..., random ...), to two decimals."""
    readme = read(os.path.join(ROOT, "README.md"))
    before = float(re.search(r"success rate before=(\d\.\d+)", readme).group(1))
    random_guessing = float(re.search(r"random (\d\.\d+)\)", readme).group(1))
    lesson = read(os.path.join(ROOT, "env_rollout.py"))
    section = lesson.split("# 2. The policy", 1)[1].split("\n\n", 1)[0]
    assert f"about {before:.2f}" in section and f"{random_guessing:.2f} for picking blindly" in section, section
    assert "uniform random guessing" not in lesson


def test_the_tiny_models_tool_calls_are_quoted_as_full_md_measured_them():
    """docs/full.md's "Two stages" measured the tiny model's tool calls a rollout; a page that gives
    such a range gives one of those."""
    full = read(os.path.join(ROOT, "docs", "full.md"))
    measured_in = " ".join(full.split("## Two stages", 1)[1].split("\n## ", 1)[0].split())
    calls = re.compile(r"(\d+(?:\.\d+)? to \d+(?:\.\d+)?) tool calls a rollout")
    measured = set(calls.findall(measured_in))
    assert measured, "docs/full.md's Two stages no longer gives the tiny model's tool calls a rollout"
    quoted = {(page, found) for page, line in classroom_lines() for found in calls.findall(line)}
    assert {found for _, found in quoted} <= measured, sorted(quoted)
