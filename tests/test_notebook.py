"""lab.ipynb runs top to bottom, so that it cannot rot, and is stored with its outputs, so that it reads
with its figures unrun; what it stores is what its cells print today.

Jupyter is not among the test dependencies, so bench/notebook_outputs.py (which writes the stored
outputs) executes every code cell in order with plain Python, in one process of its own started beside
the notebook (where Jupyter starts it), with matplotlib's non-interactive backend, catching each cell's
text and figures.
"""

import json
import os
import time

import pytest
from conftest import ROOT, bench_module

NOTEBOOK = os.path.join(ROOT, "lab.ipynb")


def test_the_notebook_is_valid_json_with_code_and_markdown():
    with open(NOTEBOOK, encoding="utf-8") as file:
        notebook = json.load(file)
    assert notebook["nbformat"] == 4
    kinds = [cell["cell_type"] for cell in notebook["cells"]]
    assert kinds.count("code") >= 8 and kinds.count("markdown") >= 8
    # Stored run, top to bottom: every code cell executed in order, with what it printed or drew.
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert [cell["execution_count"] for cell in code] == list(range(1, len(code) + 1))
    assert all(cell["outputs"] for cell in code)
    images = [out for cell in code for out in cell["outputs"] if "image/png" in out.get("data", {})]
    assert len(images) >= 2  # the learning curve and the zero-advantage bars
    # It imports the lesson rather than copying it.
    code = "".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code")
    assert "import env_rollout as lab" in code
    assert "def group_advantages" not in code and "class GuessEnv" not in code


@pytest.mark.slow
def test_every_code_cell_runs_in_order_on_a_cpu_and_prints_what_the_notebook_stores():
    tool = bench_module("notebook_outputs")
    started = time.perf_counter()
    results = tool.run_cells(NOTEBOOK)
    seconds = time.perf_counter() - started
    out = "".join(result["text"] for result in results)
    assert sum(bool(result["figures"]) for result in results) >= 2  # the curve and the bars, drawn
    assert "optimum 0.875, random 0.330" in out
    assert out.rstrip().splitlines()[-1] == "smoke ok", out[-2000:]
    with open(NOTEBOOK, encoding="utf-8") as file:
        stored = json.load(file)
    assert tool.differences(stored, results) == [], "run: python bench/notebook_outputs.py"
    assert seconds < 120, f"the notebook took {seconds:.0f} s"
