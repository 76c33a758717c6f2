"""Store lab.ipynb's outputs in the file, so that it reads with its figures without being run (GitHub and
any notebook viewer show them). Jupyter is not among the lab's dependencies, so the code cells run here
as tests/test_notebook.py runs them: in order, in one fresh Python process beside the notebook, with
matplotlib's non-interactive backend; each cell's printed text and each figure it shows are caught.

    python bench/notebook_outputs.py           # rewrites lab.ipynb's outputs; its cells are unchanged
    python bench/notebook_outputs.py --check   # exit 1 if the stored outputs are not what the cells print

The stored text is compared with a fresh run's after blanking the figures that move from run to run
(seconds) and the images themselves (bytes differ between matplotlib versions).
"""

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "lab.ipynb")

RUNNER = r"""
import base64, contextlib, io, json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
figures = []
def show(*args, **kwargs):
    for number in plt.get_fignums():
        image = io.BytesIO()
        plt.figure(number).savefig(image, format="png", dpi=80)
        figures.append(base64.b64encode(image.getvalue()).decode("ascii"))
    plt.close("all")
plt.show = show
cells = [cell for cell in json.load(open(sys.argv[1], encoding="utf-8"))["cells"] if cell["cell_type"] == "code"]
namespace = {"__name__": "__main__"}
results = []
for index, cell in enumerate(cells):
    text, figures[:] = io.StringIO(), []
    with contextlib.redirect_stdout(text):
        exec(compile("".join(cell["source"]), f"lab.ipynb, code cell {index}", "exec"), namespace)
    results.append({"text": text.getvalue(), "figures": list(figures)})
print(json.dumps(results))
"""

SECONDS = re.compile(r"\d+(\.\d+)? s\b")  # a wall time a cell prints


def run_cells(path: str = NOTEBOOK) -> list[dict]:
    """Each code cell's printed text and shown figures (PNG, base64), from one fresh run in order."""
    env = {**os.environ, "MPLBACKEND": "Agg", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", RUNNER, path], cwd=os.path.dirname(path), capture_output=True,
                          text=True, timeout=600, env=env)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the notebook failed to run:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def outputs(result: dict) -> list[dict]:
    """A cell's result as nbformat 4 outputs: its text as one stream, then each figure."""
    stored = []
    if result["text"]:
        stored.append({"name": "stdout", "output_type": "stream", "text": result["text"].splitlines(keepends=True)})
    for image in result["figures"]:
        stored.append(
            {"data": {"image/png": image, "text/plain": ["<Figure>"]}, "metadata": {}, "output_type": "display_data"}
        )
    return stored


def stored_text(cell: dict) -> str:
    return "".join("".join(out["text"]) for out in cell["outputs"] if out["output_type"] == "stream")


def differences(notebook: dict, results: list[dict]) -> list[str]:
    """The code cells whose stored outputs are not what a fresh run printed and drew (seconds blanked)."""
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    found = []
    for index, (cell, result) in enumerate(zip(code, results, strict=True)):
        if SECONDS.sub("N s", stored_text(cell)) != SECONDS.sub("N s", result["text"]):
            found.append(f"code cell {index}: its stored text is not what it prints")
        images = sum("image/png" in out.get("data", {}) for out in cell["outputs"])
        if images != len(result["figures"]):
            found.append(f"code cell {index}: {images} stored figures, {len(result['figures'])} drawn")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    check = parser.parse_args().check
    with open(NOTEBOOK, encoding="utf-8") as file:
        notebook = json.load(file)
    results = run_cells()
    if check:
        found = differences(notebook, results)
        print("\n".join(found) or "lab.ipynb's stored outputs are what its cells print")
        raise SystemExit(1 if found else 0)
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    for count, (cell, result) in enumerate(zip(code, results, strict=True), start=1):
        cell["outputs"], cell["execution_count"] = outputs(result), count
    with open(NOTEBOOK, "w", encoding="utf-8") as file:
        json.dump(notebook, file, indent=1, ensure_ascii=False)
        file.write("\n")
    figures = sum(len(result["figures"]) for result in results)
    print(f"lab.ipynb: outputs of {len(code)} code cells stored, {figures} figures")


if __name__ == "__main__":
    main()
