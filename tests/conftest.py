import inspect
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# The real Wordle (OpenEnv's TextArena package and the NLTK data it reads), where the course's kit
# lies beside the checkout; `make test` installs its wheel. Tests of the real game skip without it.
WORDLE_KIT = os.path.join(os.path.dirname(ROOT), "shared", "wordle-kit")
if os.path.isdir(os.path.join(WORDLE_KIT, "nltk_data")):
    os.environ.setdefault("NLTK_DATA", os.path.join(WORDLE_KIT, "nltk_data"))
    os.environ.setdefault("TEXTARENA_DOWNLOAD_NLTK", "0")  # offline: do not try to download the word lists


def run_script(
    *args: str, timeout: float = 300, env: dict | None = None, script: str = "env_rollout.py"
) -> subprocess.CompletedProcess:
    """Run one of the project's scripts as a user would, from the repository root."""
    return subprocess.run(
        [sys.executable, os.path.join(ROOT, script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture(scope="session")
def smoke_run() -> subprocess.CompletedProcess:
    """One default `--smoke` run, shared by the tests that read its output."""
    return run_script("--smoke")


def tool_names(environment_class) -> list[str]:
    """The methods TRL offers the model as tools: public functions other than reset and get_reward."""
    return [
        name
        for name, _ in inspect.getmembers(environment_class, predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]
