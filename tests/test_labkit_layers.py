"""The layers: labkit/ is the plumbing beneath the lesson, and imports none of the lab's scripts; the
lesson, env_rollout.py, imports only the standard library and torch at its top, so that --smoke loads
nothing else, and none of the modules built on it; those (modes.py, trl_on_cpu.py, env_check.py) import
one way. Read from the source (ast), so that an import inside a function counts too."""

import ast
import glob
import os
import sys

import pytest
from conftest import ROOT

SCRIPTS = {"env_rollout", "modes", "trl_on_cpu", "env_check"}  # the lab's own modules beside labkit/
PROJECT = SCRIPTS | {"labkit"}
LABKIT_FILES = sorted(glob.glob(os.path.join(ROOT, "labkit", "*.py")))


def parsed(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as file:
        return ast.parse(file.read(), filename=path)


def imported(nodes) -> list[tuple[str, int]]:
    """(the top-level name of each imported module, the line) of these nodes' import statements;
    a relative import (from . import x) is labkit's own, named 'labkit'."""
    names = []
    for node in nodes:
        if isinstance(node, ast.Import):
            names += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(("labkit" if node.level else node.module.split(".")[0], node.lineno))
    return names


def test_labkit_has_the_modules_the_lab_names():
    names = {os.path.basename(path) for path in LABKIT_FILES}
    expected = {"command_line", "offline_tokenizers", "plots", "recipes", "trl_glue", "wordle_sessions"}
    assert names >= {"__init__.py"} | {name + ".py" for name in expected}


@pytest.mark.parametrize("path", LABKIT_FILES, ids=os.path.basename)
def test_labkit_imports_none_of_the_scripts_anywhere(path):
    found = [(name, line) for name, line in imported(ast.walk(parsed(path))) if name in SCRIPTS]
    assert found == [], f"{os.path.relpath(path, ROOT)} imports the lab's scripts (module, line): {found}"


@pytest.mark.parametrize("path", LABKIT_FILES, ids=os.path.basename)
def test_labkit_imports_only_the_standard_library_at_its_top(path):
    """Heavy imports (torch, TRL, transformers) happen inside labkit's functions: importing a labkit
    module, as --smoke imports labkit.command_line, costs nothing."""
    top = imported(parsed(path).body)
    found = [(name, line) for name, line in top if name not in sys.stdlib_module_names and name != "labkit"]
    assert found == [], f"{os.path.relpath(path, ROOT)} imports at its top (module, line): {found}"


def test_env_rollout_imports_only_the_standard_library_and_torch_at_its_top():
    top = imported(parsed(os.path.join(ROOT, "env_rollout.py")).body)
    assert top, "no import found: the walk is broken"
    project = [(name, line) for name, line in top if name in PROJECT]
    assert project == [], f"env_rollout.py imports the project's modules at its top (module, line): {project}"
    others = [(name, line) for name, line in top if name not in sys.stdlib_module_names and name != "torch"]
    assert others == [], f"env_rollout.py imports beyond the standard library and torch (module, line): {others}"


def test_the_walk_sees_imports_inside_functions():
    """The checks above would pass on anything if `imported` missed nested imports: modes.py imports
    trl_on_cpu and env_check inside its functions, env_rollout.py labkit."""
    everywhere = {name for name, _ in imported(ast.walk(parsed(os.path.join(ROOT, "modes.py"))))}
    assert {"labkit", "trl_on_cpu", "env_check", "env_rollout"} <= everywhere
    assert "labkit" in {name for name, _ in imported(ast.walk(parsed(os.path.join(ROOT, "env_rollout.py"))))}


def script_imports(name: str) -> set[str]:
    """The lab's own modules beside labkit/ that this one imports, anywhere in it."""
    return {found for found, _ in imported(ast.walk(parsed(os.path.join(ROOT, name + ".py"))))} & SCRIPTS - {name}


def test_the_lesson_imports_none_of_the_modules_built_on_it():
    assert script_imports("env_rollout") == set(), "env_rollout.py imports a module built on it"


def test_the_scripts_import_one_way():
    """No module of the lab imports one that imports it back, directly or through others; and none
    puts itself into sys.modules under another name to make two copies one."""
    graph = {name: script_imports(name) for name in SCRIPTS}
    assert graph["modes"] >= {"env_rollout", "trl_on_cpu"} and "env_rollout" in graph["trl_on_cpu"], (
        "the walk is broken: modes.py imports the lesson and trl_on_cpu, trl_on_cpu the lesson"
    )

    def reaches(start: str, goal: str, seen: set) -> bool:
        return any(name == goal or (name not in seen and reaches(name, goal, seen | {name})) for name in graph[start])

    assert sorted(name for name in graph if reaches(name, name, set())) == []
    for name in SCRIPTS:
        with open(os.path.join(ROOT, name + ".py"), encoding="utf-8") as file:
            assert "sys.modules.setdefault" not in file.read(), name


def labkit_imports(path: str) -> set[str]:
    """The labkit modules this file imports, anywhere in it (from labkit import x, from labkit.x import y)."""
    found = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "labkit":
            parts = node.module.split(".")
            found |= {parts[1]} if len(parts) > 1 else {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[1] for alias in node.names if alias.name.startswith("labkit.")}
    return found


def test_labkit_modules_import_one_way():
    """No labkit module imports one that imports it back, directly or through others."""
    graph = {os.path.basename(path)[:-3]: labkit_imports(path) for path in LABKIT_FILES}
    assert graph["recipes"] >= {"trl_glue"}, "the walk is broken: recipes.py imports trl_glue"

    def reaches(start: str, goal: str, seen: set) -> bool:
        return any(name == goal or (name not in seen and reaches(name, goal, seen | {name})) for name in graph[start])

    circles = sorted(name for name in graph if reaches(name, name, set()))
    assert circles == [], f"labkit modules in an import circle: {circles}"
