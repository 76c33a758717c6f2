"""The GPU check: --full's figures on a GPU node, in one command of a few minutes (`make gpu-check`).

    make gpu-pack                              # on the CPU machine: what the GPU machine lacks, in gpu-pack/
    make gpu-check GPU_CHECK_OUT=$OUT          # on the GPU node, with gpu-pack/ copied beside the checkout
    make gpu-check DEVICE=cpu                  # the same path on a CPU with a tiny shape (tests/test_gpu_check.py)

On a random-weight model of Qwen3-1.7B's shape in bf16 with tier t1's LoRA, held to a 24 GB card
(no weights can be carried), it measures, each part in a process of its own so that one that fails
or runs out of memory leaves the others' figures:

(a) bench/gpu_memory.py, both stages (the warm start and GRPO) at their worst-case lengths;
(b) run_full itself, env_rollout.py's --full path: a 2-step warm start, then 2 GRPO steps against the
    in-process game on Qwen3's tokenizer with transformers generation (`--vllm-mode none`: vLLM cannot
    be carried), stopped as by Ctrl-C after checkpoint-1 and resumed from it;
(c) if the time budget leaves room, (a)'s GRPO figure for tier t2's shape, Qwen3-4B, at 80 GB.

Each figure is one line `gpu check: ...`, printed and written to OUT/gpu_check.txt with the versions
and the device, and a line that says what the memory figures cover (the training side: the model, the
LoRA adapter, its gradients and optimizer state, activations, transformers generation's KV cache) and
what they do not (vLLM's share: vLLM is not installed on the node); each part's whole output goes to
OUT/<part>.log, to read when a figure is missing.
"""

import argparse
import dataclasses
import datetime
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
MEMORY_SCRIPT = os.path.join(ROOT, "bench", "gpu_memory.py")

# What each device runs: the tiers' shapes and cards on a GPU; on a CPU the tiny shape, a check of
# the path (its cap is not enforced there, only named).
PLANS = {
    "cuda": {"t1": ("qwen3-1.7b", 24.0), "t2": ("qwen3-4b", 80.0), "memory_steps": 2},
    "cpu": {"t1": ("tiny", 24.0), "t2": ("tiny", 80.0), "memory_steps": 1},
}
# run_full at the CPU's toy size: 2 rollouts a step (1 prompt, G = 2) of up to 16 tokens, 1 game a warm-start step.
CPU_RUN_FULL = {
    "gradient_accumulation_steps": 2,
    "num_generations": 2,
    "max_completion_length": 16,
    "warm_start_batch": 1,
}
T2_NEEDS_S = 240  # (c) starts only with this much of the budget left (Qwen3-4B: load, one step at 80 GB)


def versions_line(device: str) -> str:
    import peft
    import torch
    import transformers
    import trl

    where = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    return (
        f"gpu check: {where}, torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}, "
        f"peft {peft.__version__}, {datetime.date.today().isoformat()}"
    )


def run_part(name: str, command: list[str], out_dir: str, timeout_s: float) -> tuple[list[str], str]:
    """Run one part in its own process; (its `figure:` lines, why it failed or "")."""
    log = os.path.join(out_dir, f"{name}.log")
    try:
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=max(1, timeout_s))
        output, failure = result.stdout + result.stderr, "" if result.returncode == 0 else f"exit {result.returncode}"
    except subprocess.TimeoutExpired as stopped:
        output = (stopped.stdout or b"").decode(errors="replace") + (stopped.stderr or b"").decode(errors="replace")
        failure = f"stopped at the time budget ({timeout_s:.0f} s)"
    with open(log, "w", encoding="utf-8") as file:
        file.write(output)
    figures = [line[len("figure: ") :] for line in output.splitlines() if line.startswith("figure: ")]
    if failure and not figures:
        last = next((line for line in reversed(output.splitlines()) if line.strip()), "no output")
        failure += f": {last.strip()[:300]}"
    return figures, failure


def memory_command(shape: str, tier: str, cap_gb: float, device: str, steps: int, tokenizer, stages) -> list[str]:
    command = [sys.executable, MEMORY_SCRIPT, "--shape", shape, "--tier", tier, "--cap-gb", str(cap_gb)]
    command += ["--device", device, "--steps", str(steps), "--stages", *stages]
    return command + (["--tokenizer", tokenizer] if tokenizer else [])


def check(options) -> int:
    plan, device = PLANS[options.device], options.device
    os.makedirs(options.out, exist_ok=True)
    started = time.perf_counter()
    from bench.gpu_memory import MEMORY_COVERS

    lines = [versions_line(device), f"gpu check: {MEMORY_COVERS}"]
    print("\n".join(lines), flush=True)
    figures = 0

    def left() -> float:
        return options.budget_s - (time.perf_counter() - started)

    def record(part: str, measured: list[str], failure: str) -> None:
        nonlocal figures
        figures += len(measured)
        failed = [f"{part} FAILED ({failure}); its output: {part}.log"] if failure else []
        for figure in measured + failed:
            lines.append(f"gpu check: {figure}")
            print(lines[-1], flush=True)

    shape, cap_gb = plan["t1"]
    steps = plan["memory_steps"]
    command = memory_command(shape, "t1", cap_gb, device, steps, options.tokenizer, ["warm-start", "grpo"])
    record("t1-memory", *run_part("t1-memory", command, options.out, left()))

    command = [sys.executable, __file__, "--part", "run-full", "--device", device, "--out", options.out]
    command += ["--tokenizer", options.tokenizer] if options.tokenizer else []
    record("t1-run-full", *run_part("t1-run-full", command, options.out, left()))

    shape, cap_gb = plan["t2"]
    if left() >= (T2_NEEDS_S if device == "cuda" else 0):
        command = memory_command(shape, "t2", cap_gb, device, 1, options.tokenizer, ["grpo"])
        record("t2-memory", *run_part("t2-memory", command, options.out, left()))
    else:
        record("t2-memory", [f"t2 {shape} {device} GRPO: skipped, {left():.0f} s of the budget left"], "")

    failed = sum("FAILED" in line for line in lines)
    lines.append(f"gpu check: done in {time.perf_counter() - started:.0f} s, {figures} figures, {failed} failed")
    print(lines[-1])
    with open(os.path.join(options.out, "gpu_check.txt"), "w", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    return 1 if failed else 0


def step_timer_trainer(trainer_class=None):
    """GRPOTrainer (or `trainer_class`) whose optimizer steps are timed into STEP_SECONDS."""
    from trl import GRPOTrainer

    class Timed(trainer_class or GRPOTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.add_callback(STEP_TIMER)

    return Timed


STEP_TIMER = None  # one timer over both runs of part (b), set in run_full_part


def run_full_part(options) -> int:
    """(b): run_full on a random-weight model saved to a folder, as a user's --model_name_or_path would
    be; interrupted after checkpoint-1 as by Ctrl-C, then resumed to step 2."""
    global STEP_TIMER
    import torch

    import env_rollout
    from bench import gpu_memory
    from labkit import recipes
    from trl_on_cpu import ctrl_c_after_checkpoint

    device = options.device
    shape, cap_gb = PLANS[device]["t1"]
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if device == "cuda":
        gpu_memory.cap_memory(cap_gb)
    tokenizer = gpu_memory.load_tokenizer(options.tokenizer)
    STEP_TIMER = gpu_memory.step_timer()
    with tempfile.TemporaryDirectory() as work:  # the model's gigabytes stay out of OUT
        model_dir, run_dir = os.path.join(work, "model"), os.path.join(work, "run")
        dtype = torch.bfloat16 if device == "cuda" else torch.float32  # run_full loads LoRA's base in bf16 on a GPU
        gpu_memory.random_model(shape, tokenizer, dtype).save_pretrained(model_dir)
        tokenizer.save_pretrained(model_dir)
        flags = ["--tier", "t1", "--model_name_or_path", model_dir, "--output_dir", run_dir, "--use_vllm", "false"]
        flags += ["--max_steps", "2", "--save_steps", "1", "--warm_start_steps", "2", "--eval_games", "0"]
        flags += ["--log_completions", "false", "--disable_tqdm", "true", "--report_to", "none"]
        flags += [f"--{k}={v}" for k, v in CPU_RUN_FULL.items()] if device == "cpu" else []
        settings, args, model_args = recipes.parse_full(flags, env_rollout.WordleSettings)
        # Just enough games and prompts for two steps of each stage.
        settings = dataclasses.replace(settings, warm_start_games=2 * settings.warm_start_batch, episodes=16)
        gpu_memory.reset_peak(device)
        started = time.perf_counter()
        try:
            env_rollout.run_full(settings, args, model_args, ctrl_c_after_checkpoint(step_timer_trainer(), 1))
            raise SystemExit("the first run was not interrupted after checkpoint-1")
        except SystemExit as interrupted:
            if not str(interrupted).startswith("interrupted; last checkpoint:"):
                raise
        first_steps = len(STEP_TIMER.seconds)
        result = env_rollout.run_full(
            dataclasses.replace(settings, resume=True), args, model_args, step_timer_trainer()
        )
        seconds = time.perf_counter() - started
    trainer = result["trainer"]
    if trainer.state.global_step != 2 or result["resumed_from"] != "checkpoint-1" or first_steps != 1:
        raise SystemExit(
            f"run_full: ran to step {trainer.state.global_step}, resumed from {result['resumed_from']}, "
            f"{first_steps} steps before the interruption (wanted 2, checkpoint-1, 1)"
        )
    warm = result["warm_start"]
    step_times = " and ".join(f"{s:.1f}" for s in STEP_TIMER.seconds)
    rollouts = args.per_device_train_batch_size * args.gradient_accumulation_steps
    print(
        f"figure: t1 {shape} {device} run_full: a {warm['steps']}-step warm start, then GRPO steps of {rollouts} "
        f"rollouts (up to {args.max_completion_length} tokens) in {step_times} s, stopped after checkpoint-1 and "
        f"resumed to step 2; {gpu_memory.memory_text(gpu_memory.peak_gb(device), cap_gb)}; {seconds:.0f} s in all"
    )
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=sorted(PLANS), default="cuda")
    parser.add_argument("--out", default=os.path.join(ROOT, "gpu-check-out"), help="where the figures are written")
    parser.add_argument(
        "--tokenizer", help="a folder with Qwen3's tokenizer files (the GPU pack's; default: built offline)"
    )
    parser.add_argument("--budget-s", type=float, default=420, help="seconds for all parts: what is late is stopped")
    parser.add_argument("--part", choices=["run-full"], help=argparse.SUPPRESS)  # (b), in its own process
    options = parser.parse_args()
    import torch

    if options.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu check: no CUDA GPU here; on a CPU, run `make gpu-check DEVICE=cpu`")
    if options.budget_s <= 0:
        raise SystemExit(f"gpu check: --budget-s must be positive, got {options.budget_s}")
    sys.exit(run_full_part(options) if options.part else check(options))


if __name__ == "__main__":
    main()
