"""The GPU check (bench/gpu_check.py) on a CPU with the tiny shape, as `make gpu-check DEVICE=cpu` runs
it (about 3 minutes on 2 cores), and the GPU pack's own steps (bench/gpu_pack.py) on a pack made here."""

import io
import os
import re
import subprocess
import sys
import tarfile
import zipfile

import pytest
from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import gpu_pack  # noqa: E402

FIGURES = {  # a figure line of each part, as a CPU prints it
    "t1 warm start": r"^gpu check: t1 tiny cpu warm start: no GPU memory figure on a CPU; (\d+) steps? of (\d+) games "
    r"\(the longest of \d+, up to (\d+) tokens\), (\d+\.\d) s a step$",
    "t1 GRPO": r"^gpu check: t1 tiny cpu GRPO: no GPU memory figure on a CPU; (\d+) rollouts of up to (\d+) tokens, "
    r"(\d+\.\d) s for the last of 1 step$",
    "t1 run_full": r"^gpu check: t1 tiny cpu run_full: a 2-step warm start, then GRPO steps of (\d+) rollouts \(up to "
    r"(\d+) tokens\) in (\d+\.\d) and (\d+\.\d) s, stopped after checkpoint-1 and resumed to step 2; "
    r"no GPU memory figure on a CPU; \d+ s in all$",
    "t2 GRPO": r"^gpu check: t2 tiny cpu GRPO: no GPU memory figure on a CPU; (\d+) rollouts of up to (\d+) tokens, ",
}


@pytest.mark.slow
def test_gpu_check_on_a_cpu_prints_a_line_per_figure_and_writes_them(tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("textarena_env", reason="the real Wordle is not installed here; `make test` installs it")
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "gpu_check.py"), "--device", "cpu", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    printed = [line for line in result.stdout.splitlines() if line.startswith("gpu check: ")]
    assert re.match(r"^gpu check: CPU, torch \S+, transformers \S+, trl \S+, peft \S+, \d{4}-\d\d-\d\d$", printed[0])
    # What the memory figures cover, and that vLLM's share is not among them (vLLM is not on the node).
    assert (
        printed[1].startswith("gpu check: memory figures: the training side")
        and "not counted: vLLM's share" in printed[1]
    )
    for name, pattern in FIGURES.items():
        found = [re.match(pattern, line) for line in printed if re.match(pattern, line)]
        assert len(found) == 1, f"{name}: {printed}"
        assert all(int(value) > 0 for value in found[0].groups() if value.isdigit()), found[0].group(0)
    assert printed[-1].startswith("gpu check: done in ") and printed[-1].endswith(" 4 figures, 0 failed")
    written = (out / "gpu_check.txt").read_text().splitlines()
    assert written == printed  # the file the GPU machine sends back holds what was printed
    assert {"t1-memory.log", "t1-run-full.log", "t2-memory.log"} <= set(os.listdir(out))


def test_gpu_check_refuses_a_gpu_run_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "gpu_check.py")], capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0 and result.stderr.strip().splitlines()[-1] == (
        "gpu check: no CUDA GPU here; on a CPU, run `make gpu-check DEVICE=cpu`"
    )


def test_gpu_check_on_a_cpu_takes_the_nodes_route_when_given_the_nodes_python():
    """`make gpu-check DEVICE=cpu` runs in .venv; with GPU_PYTHON (make gpu-standin's stand-in node) it runs
    as on the node: the pack installed, then the check on the pack's site-packages, NLTK data and tokenizer."""

    def dry(*variables: str) -> list[str]:
        command = ["make", "-n", "--no-print-directory", "gpu-check", *variables]  # under `make test` too
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60).stdout.splitlines()

    here = dry("DEVICE=cpu")
    assert "--device cpu" in here[-1] and "--install" not in "\n".join(here) and "PYTHONPATH" not in here[-1]
    node = " ".join(dry("DEVICE=cpu", "GPU_PYTHON=/node/python", "GPU_PACK=/node/pack"))
    assert node.startswith("/node/python bench/gpu_pack.py --install /node/pack ")
    for part in ("PYTHONPATH=/node/pack/site-packages", "NLTK_DATA=/node/pack/nltk_data", "HF_HUB_OFFLINE=1"):
        assert part in node, node
    assert "/node/python bench/gpu_check.py --device cpu " in node and "--tokenizer /node/pack/qwen3-tokenizer" in node
    assert "--device cuda" in " ".join(dry("GPU_PYTHON=/node/python"))  # the node's own call: DEVICE=cuda


def test_the_standin_node_holds_the_nodes_package_list_as_it_names_it(tmp_path):
    listing = tmp_path / "packages.txt"
    listing.write_text("# the node's packages\nabsl-py\n\ntorch==2.11.0\ntorchaudio\nnvidia-cublas\n")
    wanted = ["absl-py", "torch==2.11.0", "torchaudio==2.11.0", "nvidia-cublas"]  # torchaudio at torch's release
    assert gpu_pack.node_requirements(str(listing)) == wanted


@pytest.mark.parametrize(
    "cuda, use_cpu, on_gpu", [(True, False, True), (True, True, False), (False, False, False)], ids=str
)
def test_the_warm_start_on_a_gpu_runs_trls_own_sft_loss(monkeypatch, cuda, use_cpu, on_gpu):
    """On CUDA the check's warm start trains with TRL's SFTTrainer itself, its own loss; the lab's
    CPU substitute (a loss at the labelled positions) serves only where no GPU is used."""
    pytest.importorskip("trl")
    import types

    import torch
    from trl import SFTTrainer

    from labkit import warm_start

    assert warm_start.sft_trainer_class(True) is SFTTrainer
    assert warm_start.sft_trainer_class(False).compute_loss is not SFTTrainer.compute_loss
    chosen = []

    class Chosen(Exception):
        pass

    def choose(gpu: bool):
        chosen.append(gpu)
        raise Chosen  # the choice is all this test reads: no trainer is built

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(warm_start, "sft_trainer_class", choose)
    with pytest.raises(Chosen):
        warm_start.train_warm_start(types.SimpleNamespace(), None, [], None, types.SimpleNamespace(use_cpu=use_cpu))
    assert chosen == [on_gpu]


def wheel(folder, project: str, files: dict[str, str]) -> str:
    """A small wheel of `project` 1.0 holding `files`, its RECORD listing them."""
    path = os.path.join(folder, f"{project}-1.0-py3-none-any.whl")
    info = f"{project}-1.0.dist-info"
    files = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def test_a_slimmed_wheel_loses_its_listed_parts_from_files_and_record(tmp_path):
    path = wheel(tmp_path, "gradio", {"gradio/__init__.py": "X = 1\n", "gradio/templates/app.js": "front end\n"})
    name, data = gpu_pack.stored_wheel(path)
    with zipfile.ZipFile(io.BytesIO(data)) as slimmed:
        names = slimmed.namelist()
        record = slimmed.read("gradio-1.0.dist-info/RECORD").decode()
        assert {entry.compress_type for entry in slimmed.infolist()} == {zipfile.ZIP_STORED}  # xz packs it
    assert name == os.path.basename(path) and "gradio/__init__.py" in names
    assert not any(entry.startswith("gradio/templates/") for entry in names) and "templates" not in record
    kept = wheel(tmp_path, "other", {"other/templates/app.js": "kept\n"})  # only SLIMMED's wheels are slimmed
    with zipfile.ZipFile(io.BytesIO(gpu_pack.stored_wheel(kept)[1])) as untouched:
        assert "other/templates/app.js" in untouched.namelist()


@pytest.mark.parametrize("pip", [True, False], ids=["with pip", "without pip"])
def test_the_pack_installs_offline_into_its_own_site_folder(tmp_path, monkeypatch, pip):
    monkeypatch.setattr(gpu_pack, "has_pip", lambda: pip)
    pack = tmp_path / "pack"
    pack.mkdir()
    path = wheel(tmp_path, "packed_probe", {"packed_probe/__init__.py": "ANSWER = 42\n"})
    with tarfile.open(pack / gpu_pack.ARCHIVE, "w:xz") as tar:
        tar.add(path, arcname=f"wheels/{os.path.basename(path)}")
    gpu_pack.install(str(pack))
    probe = subprocess.run(
        [sys.executable, "-c", "import packed_probe; print(packed_probe.ANSWER)"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(pack / "site-packages")},
    )
    assert probe.stdout.strip() == "42", probe.stderr
    gpu_pack.install(str(pack))  # a second call finds it installed and leaves it


def test_installing_without_a_pack_says_how_to_make_one(tmp_path):
    with pytest.raises(SystemExit, match=r"run `make gpu-pack` on the CPU machine and carry the folder"):
        gpu_pack.install(str(tmp_path))


NODE_LIBRARIES = {"torch", "transformers", "peft", "accelerate"}  # what the node is set up for (gpu_pack.py)
# What the check imports, each in a fresh interpreter: the in-process game (all three parts play it),
# TRL's trainers and the datasets they build.
CHECK_IMPORTS = (
    "import textarena_env.server.environment, env_rollout, trl, datasets; "
    "env_rollout.WordleEnv('local').reset(seed=0); from trl import GRPOTrainer, SFTTrainer"
)


def required_by(project: str) -> set[str]:
    """The installed distributions that require `project` (not as an optional extra)."""
    import importlib.metadata

    from packaging.requirements import Requirement

    return {
        gpu_pack.canonical(dist.metadata["Name"])
        for dist in importlib.metadata.distributions()
        for requirement in map(Requirement, dist.requires or [])
        if gpu_pack.canonical(requirement.name) == project and "extra" not in str(requirement.marker or "")
    }


def test_the_pack_and_the_node_hold_every_distribution_the_check_imports():
    """The offline node (its package list in ../shared) plus the pack must hold each distribution a part
    of the check imports: pydantic and its three companions were missing from both once, found by no test."""
    pytest.importorskip("textarena_env", reason="the real Wordle is not installed here; `make test` installs it")
    if not os.path.exists(gpu_pack.NODE_PACKAGES):
        pytest.skip(f"the node's package list is not beside the checkout ({gpu_pack.NODE_PACKAGES})")
    code = (
        f"{CHECK_IMPORTS}\n"
        "import sys, importlib.metadata as m\n"
        "owners = m.packages_distributions()\n"
        "print(sorted({d for name in list(sys.modules) for d in owners.get(name.split('.')[0], [])}))"
    )
    env = {**os.environ, "PYTHONPATH": ROOT}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    imported = {gpu_pack.canonical(name) for name in eval(result.stdout.strip().splitlines()[-1])}  # a list of str
    node = {
        gpu_pack.canonical(re.split(r"[=<>]", line)[0]) for line in gpu_pack.node_requirements(gpu_pack.NODE_PACKAGES)
    }
    packed = {gpu_pack.canonical(re.split(r"[=<>]", requirement)[0]) for requirement in gpu_pack.PACKED}
    packed.add(gpu_pack.canonical("openenv-textarena"))  # the kit's wheel
    assert {"torch", "transformers", "pydantic", "trl"} <= imported, "the walk is broken"
    # A dependency of the libraries the node is set up for (transformers here requires `kernels`) comes
    # with them there, at the node's versions: only what else the check imports must be in the pack.
    missing = sorted(name for name in imported - node - packed if not required_by(name) & NODE_LIBRARIES)
    assert missing == [], f"the check imports what neither the node nor the pack holds: {missing}"


def test_the_pack_takes_the_tested_sets_version_of_every_distribution_it_holds():
    """PACKED pins what the suite runs on (tests/constraints.txt, the GPU user's resolution): a pack at
    other versions would run the node's check on a set no test ran."""
    from labkit.trl_glue import tested_versions

    tested = {gpu_pack.canonical(name): version for name, version in tested_versions().items()}
    packed = dict((gpu_pack.canonical(name), version) for name, version in (pin.split("==") for pin in gpu_pack.PACKED))
    differing = {name: (version, tested.get(name)) for name, version in packed.items() if tested.get(name) != version}
    assert differing == {}, f"PACKED (first) and tests/constraints.txt (second) differ: {differing}"
