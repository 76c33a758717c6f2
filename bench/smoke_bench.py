"""Benchmark of the smoke lab: does it learn on every seed, and how fast is it?

    python bench/smoke_bench.py [--seeds 200] [--runs 5]

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

EVERY_SEED_BAR = 0.85  # the smoke's final success, on every seed
MEDIAN_BAR = 0.87  # the median of that success over the seeds
TRAINING_SECONDS_BAR = 0.3  # median training time of one seed
BEYOND_TORCH_BAR = 0.5  # seconds `--smoke` may take beyond `python -c "import torch"`


def wall_seconds(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200, help="training seeds 0..seeds-1")
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
    below = sum(after < EVERY_SEED_BAR for after in afters)
    print(f"  before: median {statistics.median(befores):.3f}")
    print(f"  after:  median {statistics.median(afters):.3f} (bar >= {MEDIAN_BAR})")
    print(f"  worst seed: {worst}, after {afters[worst]:.3f} (bar >= {EVERY_SEED_BAR} on every seed)")
    print(f"  seeds below {EVERY_SEED_BAR}: {below} of {options.seeds} (bar 0)")
    print(
        f"  training seconds: median {statistics.median(train_seconds):.3f} over {options.seeds} seeds "
        f"(bar <= {TRAINING_SECONDS_BAR})"
    )

    # Both commands exit normally, so both pay the interpreter's teardown; their difference is what
    # the lesson itself costs. Alternating them puts both under the same load on a shared machine.
    python = sys.executable
    smoke, torch_import = [], []
    for _ in range(options.runs):
        smoke.append(wall_seconds([python, "env_rollout.py", "--smoke"]))
        torch_import.append(wall_seconds([python, "-c", "import torch"]))
    beyond = statistics.median(smoke) - statistics.median(torch_import)
    print(f"speed, median of {options.runs} runs each, alternating:")
    print(
        f"  `python env_rollout.py --smoke`: {statistics.median(smoke):.2f} s  runs: {', '.join(f'{t:.2f}' for t in smoke)}"
    )
    print(
        f'  `python -c "import torch"`:     {statistics.median(torch_import):.2f} s  runs: '
        f"{', '.join(f'{t:.2f}' for t in torch_import)}"
    )
    print(f"  smoke beyond importing torch:    {beyond:.2f} s (bar <= {BEYOND_TORCH_BAR})")
    print(f"  (torch {torch.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
