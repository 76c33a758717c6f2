"""The two rooms of the docs: the classroom's pages (README, docs/) name only what a student or an
instructor runs, the workshop's (bench/) hold the maintainers' targets; every page speaks of the
users' machines; and every link between the pages lands on a file and a heading that exist."""

import glob
import os
import re

import pytest
from conftest import ROOT

CLASSROOM_PAGES = [os.path.join(ROOT, "README.md"), *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]
WORKSHOP_PAGES = sorted(glob.glob(os.path.join(ROOT, "bench", "*.md")))


def read(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()


def makefile_group(title: str) -> set[str]:
    """The targets the Makefile's opening comment lists under one group's title."""
    comment = read(os.path.join(ROOT, "Makefile")).split("\n\n")[0]
    group = comment.split(f"# {title}")[1].split("\n#\n")[0]
    return {name for line in group.splitlines() for name in re.findall(r"^#   make ([\w-]+)", line)}


def test_the_makefile_lists_every_target_in_one_of_the_two_rooms():
    classroom, workshop = makefile_group("The classroom"), makefile_group("The workshop")
    assert {"smoke", "test", "test-all"} <= classroom and {"gpu-check", "bench", "rehearse-vllm"} <= workshop
    rules = set(re.findall(r"^([a-z][\w-]*):", read(os.path.join(ROOT, "Makefile")), re.M)) - {"test-slow"}
    assert rules == classroom | workshop and not classroom & workshop, rules ^ (classroom | workshop)


@pytest.mark.parametrize("path", CLASSROOM_PAGES, ids=os.path.basename)
def test_a_classroom_page_names_no_workshop_target(path):
    named = {name for name in makefile_group("The workshop") if re.search(rf"make {name}(?![\w-])", read(path))}
    assert named == set(), f"{os.path.relpath(path, ROOT)} names the workshop's targets {sorted(named)}"


@pytest.mark.parametrize("path", CLASSROOM_PAGES + WORKSHOP_PAGES, ids=os.path.relpath)
def test_a_page_speaks_of_the_users_machines(path):
    """An offline GPU node, a laptop, a classroom: not a machine lent to the team, nor what one carries."""
    words = r"\blent\b|device call|development machine|carries with the call|64 MiB"
    found = re.findall(words, read(path))
    assert found == [], f"{os.path.relpath(path, ROOT)}: {found}"


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchor for each heading: lower case, punctuation dropped, spaces made hyphens."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # a '#' comment in a code block is no heading
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("path", CLASSROOM_PAGES + WORKSHOP_PAGES, ids=os.path.relpath)
def test_every_link_between_pages_lands(path):
    text = read(path)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links or path.endswith("versions.md"), "no link found: the walk is broken"
    broken = []
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue  # a web address
        target, _, anchor = link.partition("#")
        file = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
        if not os.path.exists(file):
            broken.append(link)
        elif anchor and file.endswith(".md") and anchor not in heading_anchors(read(file)):
            broken.append(link)
    assert broken == [], f"{os.path.relpath(path, ROOT)}: links that land nowhere: {broken}"


def test_the_pages_say_how_to_run_from_the_venv_and_make_install_runs_nothing():
    import subprocess

    for page in ("README.md", os.path.join("docs", "exercises.md")):
        assert "source .venv/bin/activate" in read(os.path.join(ROOT, page)), page
    dry = subprocess.run(["make", "-n", "install"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (
        dry.returncode == 0
        and "pytest" not in dry.stdout
        and "env_rollout.py --" not in dry.stdout.replace("env_rollout.py --MODE", "")
    )
