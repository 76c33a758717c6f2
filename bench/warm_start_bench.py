"""Benchmark of the warm start (stage 1 of --full) at the tiny model's scale, on a CPU: does GRPO after
the warm start get groups that differ, where the cold model's groups all score alike?

    python bench/warm_start_bench.py [--seeds 0 1 2] [--flags ...]

For each seed it runs `env_rollout.py --full --tiny --seed S` twice, as a user would: with the tiny
recipe's warm start, and with `--warm-start-games 0` (the pure-RL recipe). From each run it reads TRL's
own log (the trainer_state.json of the last checkpoint): `frac_reward_zero_std`, the share of GRPO
groups whose rollouts all scored the same (they teach nothing), over the GRPO steps; and from the
run's `held-out games:` line the invalid-move rate after GRPO; and, to say why groups scored alike, the
mean reward of GRPO's rollouts and their tool calls. It prints each run's figures and the
medians over the seeds, warm against cold. Figures, not verdicts: it exits 0 whatever they are.
A tiny model with random weights solves nothing either way; what differs is whether GRPO has
anything to compare.
"""

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELD_OUT = re.compile(r"after GRPO solve_rate=(?P<solve>[\d.]+) invalid_move_rate=(?P<invalid>[\d.]+)")
WARM_START = re.compile(r"^warm start: .*$", re.M)


def one_run(seed: int, cold: bool, flags: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="warm-start-bench-") as folder:
        output_dir = os.path.join(folder, "tiny")
        command = [
            sys.executable,
            "env_rollout.py",
            "--full",
            "--tiny",
            "--seed",
            str(seed),
            "--output_dir",
            output_dir,
        ]
        command += (["--warm-start-games", "0"] if cold else []) + flags
        started = time.perf_counter()
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if result.returncode:
            return {"error": (result.stderr or result.stdout).strip().splitlines()[-1:], "wall": wall}
        states = sorted(glob.glob(os.path.join(output_dir, "run", "checkpoint-*", "trainer_state.json")))
        with open(states[-1], encoding="utf-8") as file:
            history = json.load(file)["log_history"]
    steps = [entry for entry in history if "frac_reward_zero_std" in entry]  # GRPO's logs, not evaluate's
    zero_std = [entry["frac_reward_zero_std"] for entry in steps]
    held_out = HELD_OUT.search(result.stdout)
    warm = WARM_START.search(result.stdout)
    return {
        "zero_std": statistics.mean(zero_std) if zero_std else float("nan"),
        "invalid": float(held_out["invalid"]) if held_out else float("nan"),
        "solve": float(held_out["solve"]) if held_out else float("nan"),
        # Why groups score alike: the reward a rollout got, and the tool calls it made (6 valid guesses
        # or a win end a game; before that the reward is 0).
        "reward": statistics.mean(entry["reward"] for entry in steps) if steps else float("nan"),
        "calls": statistics.mean(entry["tools/call_frequency"] for entry in steps) if steps else float("nan"),
        "warm_start": warm[0] if warm else "warm start: skipped",
        "wall": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--flags", nargs=argparse.REMAINDER, default=[], help="more flags for every run")
    options = parser.parse_args()
    print(f"--full --tiny, warm start (recipes/tiny.yaml) against --warm-start-games 0, seeds {options.seeds}")
    print("seed  run   frac_reward_zero_std  invalid_move_rate  solve_rate  reward  calls   wall s")
    figures = {"warm": [], "cold": []}
    for seed in options.seeds:
        for name in ("warm", "cold"):
            run = one_run(seed, name == "cold", options.flags)
            if "error" in run:
                print(f"{seed:>4}  {name}  FAILED: {run['error']}")
                continue
            figures[name].append(run)
            print(
                f"{seed:>4}  {name}  {run['zero_std']:>20.3f}  {run['invalid']:>17.3f}  {run['solve']:>10.3f}  "
                f"{run['reward']:>6.3f}  {run['calls']:>5.2f}  {run['wall']:>7.0f}"
            )
            if name == "warm":
                print(f"      {run['warm_start']}")
    for name, runs in figures.items():
        if runs:
            print(
                f"median over {len(runs)} seeds, {name}: frac_reward_zero_std "
                f"{statistics.median(r['zero_std'] for r in runs):.3f}, invalid_move_rate after GRPO "
                f"{statistics.median(r['invalid'] for r in runs):.3f}"
            )


if __name__ == "__main__":
    main()
