"""Benchmark of --learn: does the tiny transformer learn on every seed, within the time bar?

    python bench/learn_bench.py [--seeds 0 1 2 3 4 5 6 7] [--jobs 2] [--logs DIR] [--flags --no-mask ...]

Runs `env_rollout.py --learn --seed S` as a user would, `--jobs` runs at a time (a run uses one
core), and prints each run's figures next to the bars: after >= 0.70 and after - before >= 0.25 on
400 evaluation episodes, each run <= 600 s of wall time. It says which torch, trl and transformers it ran on: the bars
hold for the torch that `make test` installs and for the CPU build torch==2.13.0 (README).
Exits 0 whatever the figures are; read them. About 5 minutes a run on a laptop core (300 steps).
"""

import argparse
import concurrent.futures
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BAR_AFTER, BAR_GAIN, BAR_EPISODES, BAR_WALL_S = 0.70, 0.25, 400, 600
FIGURES = {
    "success": re.compile(r"^tiny model success before=(\d\.\d+) after=(\d\.\d+)", re.M),
    "wasted": re.compile(r"^tool calls that played no guess per episode before=(\d\.\d+) after=(\d\.\d+)", re.M),
    "written": re.compile(r"^tool responses written by the model per episode before=(\d\.\d+) after=(\d\.\d+)", re.M),
    "curve": re.compile(r"batch success first (\d\.\d+) last (\d\.\d+)"),
    "episodes": re.compile(r"^learn: (\d+) evaluation episodes each side", re.M),
}


def run_seed(seed: int, flags: list[str], logs: str | None) -> tuple[int, float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    run = subprocess.run(
        [sys.executable, "env_rollout.py", "--learn", "--seed", str(seed), *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    if logs:
        with open(os.path.join(logs, f"learn-seed{seed}.log"), "w") as log:
            log.write(run.stdout + run.stderr)
    return seed, wall, run


def report(seed: int, wall: float, run: subprocess.CompletedProcess) -> bool | None:
    """Print one row; True if the run met every bar, False if not, None if it failed."""
    found = {name: pattern.search(run.stdout) for name, pattern in FIGURES.items()}
    if run.returncode or not all(found.values()):
        print(f"{seed:>4}  FAILED (exit {run.returncode}): {run.stderr[-500:]}", flush=True)
        return None
    before, after = map(float, found["success"].groups())
    episodes = int(found["episodes"][1])
    met = after >= BAR_AFTER and after - before >= BAR_GAIN and wall <= BAR_WALL_S
    verdict = ("met" if met else "NOT met") + (
        "" if episodes >= BAR_EPISODES else f" ({episodes} episodes, not {BAR_EPISODES})"
    )
    wasted, written, curve = found["wasted"], found["written"], found["curve"]
    print(
        f"{seed:>4}  {before:.3f}   {after:.3f}  {after - before:+.3f}  {wasted[1]} -> {wasted[2]}"
        f"     {written[1]} -> {written[2]}    {curve[1]} -> {curve[2]}    {wall:6.0f}  {verdict}",
        flush=True,
    )
    return met and episodes >= BAR_EPISODES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)), help="seeds to run (default 0..7)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2: one per core of a laptop)")
    parser.add_argument("--logs", metavar="DIR", help="keep each run's whole output (TRL's log of every step) here")
    parser.add_argument("--flags", nargs=argparse.REMAINDER, default=[], help="flags passed on to every --learn run")
    options = parser.parse_args()
    if options.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {options.jobs}")
    if options.logs:
        os.makedirs(options.logs, exist_ok=True)
    # Only to say what the runs use: they run on this same interpreter.
    import torch
    import transformers
    import trl

    build = "CUDA build" if torch.version.cuda else "CPU build"
    versions = f"torch {torch.__version__} ({build}), trl {trl.__version__}, transformers {transformers.__version__}"
    print(f"--learn {' '.join(options.flags)} on {versions}, {options.jobs} runs at a time")
    print("seed  before  after  gain    wasted calls/ep    written/ep        batch success     wall s  bar")
    walls, verdicts = [], []
    with concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs) as pool:
        for seed, wall, run in pool.map(lambda seed: run_seed(seed, options.flags, options.logs), options.seeds):
            walls.append(wall)
            verdicts.append(report(seed, wall, run))
    print(
        f"bars met on {verdicts.count(True)} of {len(verdicts)} seeds (after >= {BAR_AFTER}, gain >= {BAR_GAIN}, "
        f"{BAR_EPISODES} evaluation episodes, wall <= {BAR_WALL_S} s); wall seconds: median "
        f"{statistics.median(walls):.0f}, max {max(walls):.0f}"
    )
    print(f"(python {sys.version.split()[0]}, {versions}, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
