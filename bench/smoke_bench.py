"""Benchmark of the smoke lab: does it learn on every seed, and how fast is it?

    python bench/smoke_bench.py [--seeds 50] [--runs 5]

Prints figures, not verdicts alone: medians over several runs (shared machines are noisy), with the
bars from the issue next to them. Exits 0 whatever the figures are; read them.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import env_rollout  # noqa: E402


def wall_seconds(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50, help="training seeds 0..seeds-1")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each command")
    options = parser.parse_args()

    import torch

    torch.set_num_threads(1)  # as --smoke does
    print(f"learning over seeds 0..{options.seeds - 1} (default hyperparameters, 2000 evaluation episodes each)")
    afters, befores, train_seconds = [], [], []
    for seed in range(options.seeds):
        args = env_rollout.SmokeConfig(seed=seed)
        before, after, result = env_rollout.train_and_evaluate(args)
        befores.append(before)
        afters.append(after)
        train_seconds.append(result["seconds"])
    worst = min(range(options.seeds), key=lambda seed: afters[seed])
    below = sum(after < 0.85 for after in afters)
    print(f"  before: median {statistics.median(befores):.3f}")
    print(
        f"  after:  median {statistics.median(afters):.3f} (bar >= 0.87), min {min(afters):.3f} at seed {worst} (bar >= 0.85)"
    )
    print(f"  seeds below 0.85: {below} of {options.seeds} (bar 0)")
    print(f"  training seconds: median {statistics.median(train_seconds):.3f} over {options.seeds} seeds (bar <= 0.3)")

    python = sys.executable
    smoke = [wall_seconds([python, "env_rollout.py", "--smoke"]) for _ in range(options.runs)]
    torch_import = [wall_seconds([python, "-c", "import torch, os; os._exit(0)"]) for _ in range(options.runs)]
    torch_teardown = [wall_seconds([python, "-c", "import torch"]) for _ in range(options.runs)]
    bare = [wall_seconds([python, "-c", "pass"]) for _ in range(options.runs)]
    print(f"speed, median of {options.runs} runs each:")
    print(
        f"  whole `python env_rollout.py --smoke`: {statistics.median(smoke):.2f} s (bar <= 1.8)  runs: {', '.join(f'{t:.2f}' for t in smoke)}"
    )
    print(f"  importing torch (no teardown):        {statistics.median(torch_import):.2f} s")
    print(
        f"  importing torch, normal exit:         {statistics.median(torch_teardown):.2f} s  (--smoke skips the teardown)"
    )
    print(f"  bare interpreter start:               {statistics.median(bare):.2f} s")
    print(f"  smoke beyond importing torch:         {statistics.median(smoke) - statistics.median(torch_import):.2f} s")
    print(f"  (torch {torch.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
