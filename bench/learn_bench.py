"""Benchmark of --learn: does the tiny transformer learn on every seed, within the time bar?

    python bench/learn_bench.py [--seeds 0 1 2] [--scale --learn-steps 2 ...]

Runs `env_rollout.py --learn --seed S` as a user would, one seed after another (a run uses one
core; running two at once would slow both), and prints each run's figures next to the bars:
after >= 0.70, after - before >= 0.25, on >= 200 evaluation episodes, whole mode <= 600 s.
Exits 0 whatever the figures are; read them. About 5 minutes a seed on a laptop core.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = re.compile(r"^tiny model success before=(\d\.\d+) after=(\d\.\d+)", re.M)
MALFORMED = re.compile(r"^malformed tool calls per episode before=(\d\.\d+) after=(\d\.\d+)", re.M)
CURVE = re.compile(r"batch success first (\d\.\d+) last (\d\.\d+)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds to run")
    parser.add_argument("--scale", nargs=argparse.REMAINDER, default=[], help="flags passed on (for a toy-size check)")
    options = parser.parse_args()
    print("seed  before  after  gain   malformed/ep before->after  batch success first->last  wall s  bar")
    walls = []
    for seed in options.seeds:
        started = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "env_rollout.py", "--learn", "--seed", str(seed), *options.scale],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - started
        walls.append(wall)
        result, malformed, curve = RESULT.search(run.stdout), MALFORMED.search(run.stdout), CURVE.search(run.stdout)
        if run.returncode or not (result and malformed and curve):
            print(f"{seed:>4}  FAILED (exit {run.returncode}): {run.stderr[-500:]}")
            continue
        before, after = map(float, result.groups())
        met = after >= 0.70 and after - before >= 0.25 and wall <= 600
        print(
            f"{seed:>4}  {before:.3f}   {after:.3f}  {after - before:+.3f}  {malformed[1]} -> {malformed[2]}"
            f"               {curve[1]} -> {curve[2]}                  {wall:6.0f}  {'met' if met else 'NOT met'}"
        )
    print(f"wall seconds: median {statistics.median(walls):.0f} over {len(walls)} runs (bar <= 600 each)")
    print(f"(400 evaluation episodes each side; python {sys.version.split()[0]}, {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
