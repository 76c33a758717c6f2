"""A run's folder, as --resume reads it: its newest *complete* checkpoint, whether it holds a run at all,
and the stop that Ctrl-C makes of a run (one line, exit status 130).

transformers' get_last_checkpoint takes the highest-numbered checkpoint-N folder, whole or not: a
process killed while saving leaves a folder that Trainer cannot resume from. Trainer writes a
checkpoint's weights first and its trainer_state.json last, so a checkpoint whose trainer_state.json
reads back whole, beside its weights, was finished."""

import json
import os
import re

CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")  # transformers' PREFIX_CHECKPOINT_DIR, as its own pattern reads it
# What save_model writes: a LoRA adapter (peft), or the whole model (safetensors, sharded or not, or torch's).
WEIGHTS = (
    "adapter_model.safetensors",
    "adapter_model.bin",
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
)
HELD_OUT_FILE = "held_out.json"  # the held-out figures of each stage a run has played, for --resume
INTERRUPTED_STATUS = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C


class Interrupted(SystemExit):
    """Ctrl-C, stopped with the line that says what is kept and how to go on (the command line prints it
    and exits with INTERRUPTED_STATUS). A SystemExit: code that called the run and does not catch it still
    stops with that line."""


def complete_checkpoint(path: str) -> bool:
    """Whether `path` is a checkpoint Trainer finished writing: its weights, and its trainer state (the
    last file written) whole."""
    if not any(os.path.isfile(os.path.join(path, name)) for name in WEIGHTS):
        return False
    try:
        with open(os.path.join(path, "trainer_state.json"), encoding="utf-8") as file:
            return isinstance(json.load(file), dict)
    except (OSError, ValueError):  # missing, or cut off mid-write
        return False


def last_complete_checkpoint(folder: str) -> str | None:
    """The newest checkpoint-N folder in `folder` that is complete (a half-written newer one is passed
    over), or None: where --resume continues from."""
    if not os.path.isdir(folder):
        return None
    steps = sorted((int(match.group(1)), name) for name in os.listdir(folder) if (match := CHECKPOINT.match(name)))
    for _, name in reversed(steps):
        if complete_checkpoint(os.path.join(folder, name)):
            return os.path.join(folder, name)
    return None


def holds_run(folder: str) -> bool:
    """Whether `folder` holds a run --resume can continue: a complete checkpoint, or a finished warm start."""
    from labkit.warm_start import finished_warm_start

    return last_complete_checkpoint(folder) is not None or finished_warm_start(folder) is not None


def saved_held_out(folder: str, games: int) -> dict:
    """The held-out figures the run in `folder` saved, by stage, if they were played on `games` games."""
    try:
        with open(os.path.join(folder, HELD_OUT_FILE), encoding="utf-8") as file:
            saved = json.load(file)
    except (OSError, ValueError):  # none yet, or cut off mid-write: play them again
        return {}
    return saved.get("stages", {}) if isinstance(saved, dict) and saved.get("games") == games else {}


def save_held_out(folder: str, games: int, stage: str, figures: dict) -> None:
    """Add one stage's figures to the run's file, written whole or not at all (a temporary file, renamed)."""
    stages = {**saved_held_out(folder, games), stage: figures}
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, HELD_OUT_FILE)
    with open(path + ".partial", "w", encoding="utf-8") as file:
        json.dump({"games": games, "stages": stages}, file)
    os.replace(path + ".partial", path)
