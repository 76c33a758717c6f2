"""The benchmark scripts run (their figures are read by people, not asserted here)."""

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
    assert re.search(r"^--learn .* on torch \S+ \((CPU|CUDA) build\), 2 runs at a time$", result.stdout, re.M)
