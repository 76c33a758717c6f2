"""Benchmark of idea 2's two remedies on a CPU, the warm start (stage 1 of --full) and the shaped reward:
does GRPO get groups that differ, where the cold model's, or the game's reward alone, score them alike?

    python bench/warm_start_bench.py [--scale smollm2|tiny] [--seeds 0 1 2] [--runs warm cold]
                                     [--rewards game shaped] [--flags ...]

For each seed and each reward (--reward game: the game's own; shaped: plus progress short of a win) it
runs `env_rollout.py --full --<scale> --seed S --reward R` twice, as a user would: with the scale's
recipe (recipes/smollm2.yaml: SmolLM2-135M-Instruct, a real pre-trained model, the default; or
recipes/tiny.yaml) and with `--warm-start-games 0` (the pure-RL recipe, cold). From each run it reads
TRL's own log (trainer_state.json of the last checkpoint) over the GRPO steps:
- frac_reward_zero_std: the share of GRPO groups whose rollouts all scored the same (they teach nothing),
  with the number of groups it is a share of;
- the share of rollouts with at least one tool call TRL read (tool_call_made), the valid guesses per
  game, the invalid-move rate, the mean reward and the solve rate;
- grad_norm per GRPO step (0: no group differed, nothing was learned);
and the run's `held-out games:` line (before, after the warm start, after GRPO). It prints each run's
figures and the medians over the seeds of each (start, reward). Figures, not verdicts: it exits 0
whatever they are. The held-out figures are the game's own whatever the training reward.
"""

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from labkit.plots import grpo_steps  # noqa: E402  (the same reading of TRL's log the run's figure makes)

HELD_OUT = re.compile(r"^held-out games: (?P<stages>.*)$", re.M)
STAGE = re.compile(r"(?P<stage>before|after warm start|after GRPO) (?P<figures>(?:\w+=[\d.]+ ?)+|skipped)")
WARM_START = re.compile(r"^warm start: .*$", re.M)
# TRL's per-step log keys, under the bench's names (rewards/<function>/mean: env_rollout.LOGGED_METRICS).
STEP_FIGURES = {
    "zero_std": "frac_reward_zero_std",
    "called": "rewards/tool_call_made/mean",
    "valid": "rewards/valid_guesses/mean",
    "invalid": "rewards/invalid_move_rate/mean",
    "reward": "reward",
    "solve": "rewards/solve_rate/mean",
}


def held_out_stages(stdout: str) -> dict:
    """{stage: {figure: value}} from the run's `held-out games:` line ({} for a skipped stage)."""
    line = HELD_OUT.search(stdout)
    stages = {}
    for match in STAGE.finditer(line["stages"] if line else ""):
        figures = match["figures"]
        stages[match["stage"]] = {} if figures == "skipped" else dict(f.split("=") for f in figures.split())
    return stages


def run_with_peak_memory(command: list[str], folder: str) -> tuple[subprocess.CompletedProcess, float]:
    """The command's result and its own peak resident memory in GiB, from os.wait4 (Linux: ru_maxrss in
    KiB). Not resource.RUSAGE_CHILDREN: that is the largest of every run waited for so far, so a cold
    run after a warm one would show the warm one's peak."""
    paths = [os.path.join(folder, name) for name in ("stdout.txt", "stderr.txt")]
    with open(paths[0], "w+", encoding="utf-8") as out, open(paths[1], "w+", encoding="utf-8") as err:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0), err.seek(0)
        result = subprocess.CompletedProcess(command, process.returncode, out.read(), err.read())
    return result, usage.ru_maxrss / 2**20


def one_run(scale: str, seed: int, cold: bool, reward: str, flags: list[str], figures: str | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="warm-start-bench-") as folder:
        output_dir = os.path.join(folder, scale)
        command = [sys.executable, "env_rollout.py", "--full", f"--{scale}", "--seed", str(seed), "--reward", reward]
        command += ["--output_dir", output_dir] + (["--warm-start-games", "0"] if cold else []) + flags
        started = time.perf_counter()
        result, peak_gib = run_with_peak_memory(command, folder)
        wall = time.perf_counter() - started
        if result.returncode:
            return {"error": (result.stderr or result.stdout).strip().splitlines()[-1:], "wall": wall}
        states = glob.glob(os.path.join(output_dir, "run", "checkpoint-*", "trainer_state.json"))
        newest = max(states, key=lambda path: int(path.split("checkpoint-")[1].split(os.sep)[0]))
        with open(newest, encoding="utf-8") as file:
            state = json.load(file)
        if figures:  # the run's own figure of its GRPO steps, kept (the run's folder is not)
            os.makedirs(figures, exist_ok=True)
            name = f"{scale}-{'cold' if cold else 'warm'}-{reward}-seed{seed}.png"
            shutil.copy(os.path.join(output_dir, "run", "grpo_steps.png"), os.path.join(figures, name))
    steps = grpo_steps(state["log_history"])  # GRPO's, not evaluate's
    run = {name: statistics.mean(entry[key] for entry in steps) for name, key in STEP_FIGURES.items()}
    warm = WARM_START.search(result.stdout)
    return {
        **run,
        "steps": len(steps),
        "grad_norms": [float(entry.get("grad_norm", 0.0)) for entry in steps],
        "held_out": held_out_stages(result.stdout),
        "warm_start": warm[0] if warm else "warm start: skipped",
        "wall": wall,
        "peak_gib": peak_gib,
    }


def groups_per_step(scale: str, flags: list[str]) -> tuple[int, int]:
    """(GRPO steps, groups a step) of the runs, from the recipe as --dry-run resolves it."""
    command = [sys.executable, "env_rollout.py", "--full", f"--{scale}", "--dry-run", *flags]
    lines = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    values = dict(line.split(" = ", 1) for line in lines if " = " in line)
    rollouts = int(values["per_device_train_batch_size"]) * int(values["gradient_accumulation_steps"])
    return int(values["max_steps"]), rollouts // int(values["num_generations"])


def held_out_text(stages: dict, figure: str) -> str:
    return " / ".join(stages.get(stage, {}).get(figure, "-") for stage in ("before", "after warm start", "after GRPO"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=["smollm2", "tiny"], default="smollm2")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", nargs="+", choices=["warm", "cold"], default=["warm", "cold"])
    parser.add_argument("--rewards", nargs="+", choices=["game", "shaped"], default=["game", "shaped"])
    parser.add_argument("--figures", metavar="DIR", help="keep each run's figure of its GRPO steps in DIR")
    parser.add_argument("--flags", nargs=argparse.REMAINDER, default=[], help="more flags for every run")
    options = parser.parse_args()
    steps, groups = groups_per_step(options.scale, options.flags)
    print(
        f"--full --{options.scale}, warm start (recipes/{options.scale}.yaml) against --warm-start-games 0, "
        f"--reward {' and '.join(options.rewards)}, seeds {options.seeds}; {steps} GRPO steps of {groups} groups: "
        f"frac_reward_zero_std is a share of {steps * groups} groups"
    )
    print(
        "held-out figures (the game's own): before / after warm start / after GRPO; reward: the training reward's mean"
    )
    print(
        "seed  run         zero_std  called  valid/game  invalid  reward  solve  grad_norm per step        wall s  peak GiB"
    )
    figures = {(name, reward): [] for reward in options.rewards for name in options.runs}
    for seed in options.seeds:
        for name, reward in figures:
            run = one_run(options.scale, seed, name == "cold", reward, options.flags, options.figures)
            label = f"{name} {reward:<6}"
            if "error" in run:
                print(f"{seed:>4}  {label}  FAILED: {run['error']}")
                continue
            figures[name, reward].append(run)
            norms = " ".join(f"{norm:.3g}" for norm in run["grad_norms"])
            print(
                f"{seed:>4}  {label}  {run['zero_std']:>8.3f}  {run['called']:>6.3f}  {run['valid']:>10.3f}  "
                f"{run['invalid']:>7.3f}  {run['reward']:>6.3f}  {run['solve']:>5.3f}  {norms:<24}  {run['wall']:>6.0f}  "
                f"{run['peak_gib']:>8.1f}"
            )
            print(f"      held-out valid_guess_made {held_out_text(run['held_out'], 'valid_guess_made')}")
            print(f"      held-out valid_guesses    {held_out_text(run['held_out'], 'valid_guesses')}")
            print(f"      held-out solve_rate       {held_out_text(run['held_out'], 'solve_rate')}")
            print(f"      held-out invalid_move_rate {held_out_text(run['held_out'], 'invalid_move_rate')}")
            if name == "warm":
                print(f"      {run['warm_start']}")
    for (name, reward), runs in figures.items():
        if runs:
            print(
                f"median over {len(runs)} seeds, {name} {reward}: frac_reward_zero_std "
                f"{statistics.median(r['zero_std'] for r in runs):.3f}, tool_call_made "
                f"{statistics.median(r['called'] for r in runs):.3f}, invalid_move_rate "
                f"{statistics.median(r['invalid'] for r in runs):.3f}; GRPO steps with grad_norm > 0, each run: "
                + ", ".join(f"{sum(norm > 0 for norm in r['grad_norms'])} of {len(r['grad_norms'])}" for r in runs)
            )


if __name__ == "__main__":
    main()
