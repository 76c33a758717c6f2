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
        [sys.executable, script, "--seeds", "0", "--scale", *scale], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"^   0  0\.\d{3}   0\.\d{3}  [+-]0\.\d{3} .* (met|NOT met)$", result.stdout, re.M), result.stdout
    assert "wall seconds: median" in result.stdout
