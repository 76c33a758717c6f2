"""lab.ipynb runs top to bottom, so that it cannot rot.

Jupyter is not among the test dependencies, so the test executes every code cell of the notebook in
order with plain Python, in one process of its own started beside it (where Jupyter starts a notebook),
with matplotlib's non-interactive backend. plt.show() is replaced by a counter: the notebook must draw
its figures (the learning curve and the zero-advantage bars) and print the smoke run's last line.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import ROOT

NOTEBOOK = os.path.join(ROOT, "lab.ipynb")

RUNNER = """
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
shown = []
def show(*args, **kwargs):
    shown.append(len(plt.get_fignums()))
    plt.close("all")
plt.show = show
cells = [
    "".join(cell["source"])
    for cell in json.load(open({path!r}, encoding="utf-8"))["cells"]
    if cell["cell_type"] == "code"
]
namespace = {{"__name__": "__main__"}}
for index, source in enumerate(cells):
    print(f"--- code cell {{index}}", flush=True)
    exec(compile(source, f"lab.ipynb, code cell {{index}}", "exec"), namespace)
print("FIGURES", json.dumps(shown))
"""


def test_the_notebook_is_valid_json_with_code_and_markdown():
    with open(NOTEBOOK, encoding="utf-8") as file:
        notebook = json.load(file)
    assert notebook["nbformat"] == 4
    kinds = [cell["cell_type"] for cell in notebook["cells"]]
    assert kinds.count("code") >= 8 and kinds.count("markdown") >= 8
    # Handed out clean: no stored outputs, nothing executed.
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None
    # It imports the lesson rather than copying it.
    code = "".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code")
    assert "import env_rollout as lab" in code
    assert "def group_advantages" not in code and "class GuessEnv" not in code


@pytest.mark.slow
def test_every_code_cell_runs_in_order_on_a_cpu():
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", RUNNER.format(path=NOTEBOOK)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MPLBACKEND": "Agg", "CUDA_VISIBLE_DEVICES": ""},
    )
    seconds = time.perf_counter() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    shown = json.loads(out.rsplit("FIGURES", 1)[1])
    assert len(shown) >= 2 and all(count >= 1 for count in shown), shown
    assert "optimum 0.875, random 0.330" in out
    assert out.rstrip().splitlines()[-2] == "smoke ok", out[-2000:]
    assert seconds < 120, f"the notebook took {seconds:.0f} s"
