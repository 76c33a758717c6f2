"""Which values a setting takes, checked in one place.

A setting says what it accepts once, where it is declared:
- the settings of the modes argparse reads, in their dataclass field's metadata (env_rollout.option():
  at_least= with at_most= and why=, positive=, non_negative=, fraction=);
- the settings of the modes TRL's parser reads, in their class's RANGES, which may also name GRPOConfig
  fields (TRL's parser hands a field's metadata to argparse, which would refuse at_least=);
- TRL's GRPOConfig fields that every run of the lab demands, in TRAINING below.
The small modes' flags (labkit/command_line.py, through argparse) and the TRL-parsed runs
(labkit/recipes.py, after TRL's parser) are both checked here."""

import dataclasses
import math

# GRPOConfig values TRL's parser takes but no run can use: refused before anything is loaded.
TRAINING = {
    "seed": {"at_least": 0, "at_most": 2**32 - 1, "note": " (numpy's seeds)"},
    "learning_rate": {"positive": True},
    "beta": {"non_negative": True},
    "temperature": {"positive": True},
    "max_grad_norm": {"non_negative": True, "note": " (0: no clipping)"},
    "min_p": {"from_to": (0, 1), "note": " (0: no token dropped)"},
}


def wanted(accepts: dict) -> str | None:
    """What a setting takes, in words ('a whole number >= 1'), or None where any value of its type will do."""
    if "at_least" in accepts:
        low, high = accepts["at_least"], accepts.get("at_most")
        words = f"a whole number >= {low}" if high is None else f"a whole number from {low} to {high}"
    elif accepts.get("positive"):
        words = "a positive number"
    elif accepts.get("non_negative"):
        words = "a number >= 0"
    elif accepts.get("fraction"):
        words = "a fraction above 0 and below 1"
    elif "from_to" in accepts:
        words = "a number from {} to {}".format(*accepts["from_to"])
    else:
        return None
    return words + accepts.get("note", "")


def accepted(value, accepts: dict) -> bool:
    if "at_least" in accepts:
        high = accepts.get("at_most")
        return value >= accepts["at_least"] and (high is None or value <= high)
    if not math.isfinite(value):
        return False
    if accepts.get("positive"):
        return value > 0
    if accepts.get("non_negative"):
        return value >= 0
    if accepts.get("fraction"):
        return 0 < value < 1
    if "from_to" in accepts:
        low, high = accepts["from_to"]
        return low <= value <= high
    return True


def must_be(value, accepts: dict) -> str | None:
    """'must be <what it takes>, got <value>' where the setting does not take `value`; None where it does."""
    if value is None or wanted(accepts) is None or accepted(value, accepts):
        return None
    return f"must be {wanted(accepts)}, got {value}{accepts.get('why', '')}"


def refusal(flag: str, value, accepts: dict) -> str | None:
    """The one line that refuses `value` for `flag`, or None if the setting takes it."""
    return None if (words := must_be(value, accepts)) is None else f"{flag} {words}"


def check_parsed(*parsed) -> None:
    """ValueError for the first value out of range in what TRL's parser read: (settings, GRPOConfig[,
    ModelConfig]). A setting of the lab's is named by its dashed flag, a GRPOConfig field by TRL's name
    (and the lab's alias for it, if any)."""
    settings, training = parsed[0], parsed[1]
    own = {field.name for field in dataclasses.fields(settings)}
    aliases = {new: old for old, new in getattr(settings, "RENAMED_FLAGS", {}).items()}
    for name, accepts in {**TRAINING, **getattr(settings, "RANGES", {})}.items():
        if name in own:
            line = refusal("--" + name.replace("_", "-"), getattr(settings, name), accepts)
        else:
            flag = f"--{name}" + (f" ({aliases[f'--{name}']})" if f"--{name}" in aliases else "")
            line = refusal(flag, getattr(training, name, None), accepts)
        if line:
            raise ValueError(line)
