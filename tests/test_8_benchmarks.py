"""The benchmark scripts run (their figures are read by people, not asserted here)."""

import os
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
