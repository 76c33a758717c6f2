"""A run's folder, as --resume reads it: its newest *complete* checkpoint, whether it holds a run at all,
and the stop that Ctrl-C makes of a run (one line, exit status 130).

transformers' get_last_checkpoint takes the highest-numbered checkpoint-N folder, whole or not: a
process killed while saving leaves a folder that Trainer cannot resume from. Trainer writes a
checkpoint's weights first and its trainer_state.json last, so a checkpoint whose trainer_state.json
reads back whole, beside its weights, was finished."""

import errno
import json
import os
import re
import shutil
import tempfile

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
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # no room left: on the device, or in the user's quota
# Below this, a disk is taken as full when torch's writer fails without saying why (disk_full).
NO_ROOM_BYTES = 16 * 2**20


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


def folder_refusal(folder: str, flag: str) -> str | None:
    """Why a run cannot write into `folder`, in one line, found before anything is loaded and with nothing
    left made: it is a file, lies under one, or its nearest existing folder takes no file. None where it can."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        return f"{flag} {folder} is a file, not a folder: pass another {flag}"
    existing = os.path.abspath(folder)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"{flag} {folder}: {existing} is a file, not a folder: pass another {flag}"
    if why := unwritable(existing):
        return f"{flag} {folder}: nothing can be written in {existing} ({why}): pass another {flag}"
    return None


def unwritable(folder: str) -> str | None:
    """Why no file can be written in the existing `folder` (the system's words), or None where one can."""
    try:  # a file made and removed at once: os.access says yes to root where nothing can be written (/proc)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        return error.strerror
    return None


def disk_full(error: BaseException, folders: list[str]) -> str | None:
    """What a write that failed for want of room says (its reason and the file it was writing), where
    `error` or what caused it is one; None where it is not. torch's checkpoint writer says only that a
    write failed ('unexpected pos', 'file write failed'): that is a full disk where one of `folders`, those
    the run was writing in, has no room left."""
    causes, cause = [], error
    while cause is not None and cause not in causes:
        causes.append(cause)
        cause = cause.__cause__ or cause.__context__
    for cause in causes:
        if isinstance(cause, OSError) and cause.errno in DISK_FULL:
            return cause.strerror + (f", writing {cause.filename}" if cause.filename else "")
        if "No space left on device" in str(cause):  # a library's own wording (safetensors, tokenizers)
            return "No space left on device"
    if any(isinstance(cause, RuntimeError) and "inline_container" in str(cause) for cause in causes):
        for folder in folders:
            try:
                if shutil.disk_usage(folder).free < NO_ROOM_BYTES:
                    return f"No space left on device, writing in {folder}"
            except OSError:
                continue
    return None
