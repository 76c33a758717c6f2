"""Which values a setting takes, checked in one place.

A setting says what it accepts once, where it is declared:
- the settings of the modes argparse reads, in their dataclass field's metadata (env_rollout.option():
  at_least= with at_most= and why=, positive=, non_negative=, fraction=);
- the settings of the modes TRL's parser reads, in their class's RANGES, which may also name GRPOConfig
  fields (TRL's parser hands a field's metadata to argparse, which would refuse at_least=);
- TRL's GRPOConfig and ModelConfig fields that every run of the lab demands, in TRAINING below.
The small modes' flags (labkit/command_line.py, through argparse) and the TRL-parsed runs
(labkit/recipes.py, before TRL builds its dataclasses and after) are both checked here: the dry run
and the run read their settings through the same parse, so the one refuses exactly what the other would."""

import dataclasses
import math

# GRPOConfig and ModelConfig values TRL's parser takes but no run can use: refused before anything is
# loaded. Without these, a batch of 0 or a rank of -1 passes the parser and crashes the run after the model
# load, and 0 generations divides by zero inside GRPOConfig itself.
TRAINING = {
    "seed": {"at_least": 0, "at_most": 2**32 - 1, "note": " (numpy's seeds)"},
    "learning_rate": {"positive": True},
    "beta": {"non_negative": True},
    "temperature": {"positive": True},
    "max_grad_norm": {"non_negative": True, "note": " (0: no clipping)"},
    "min_p": {"from_to": (0, 1), "note": " (0: no token dropped)"},
    "per_device_train_batch_size": {"at_least": 1},
    "gradient_accumulation_steps": {"at_least": 1},
    "num_generations": {"at_least": 2, "note": " (GRPO measures each rollout against its group)"},
    "max_completion_length": {"at_least": 1},
    "vllm_mode": {"choices": ("colocate", "server"), "note": " (--vllm-mode none: no vLLM)"},
    "lora_r": {"at_least": 1, "note": " (--lora-rank 0: no LoRA, every weight trained)"},  # ModelConfig's
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
    elif "choices" in accepts:
        words = "one of " + ", ".join(accepts["choices"])
    else:
        return None
    return words + accepts.get("note", "")


def accepted(value, accepts: dict) -> bool:
    if "choices" in accepts:
        return value in accepts["choices"]
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


def check_values(values: dict, settings_class, renamed_flags: dict | None = None) -> None:
    """ValueError for the first value out of range among what TRL's parser read, `values` (field name:
    value, of the lab's settings, GRPOConfig and ModelConfig alike). The ranges are TRAINING's and
    `settings_class.RANGES`; a range with only_with= applies only while that setting is set (not 0).
    A setting of the lab's is named by its dashed flag, a TRL field by TRL's name (and the lab's alias for
    it in `renamed_flags`, if any)."""
    own = {field.name for field in dataclasses.fields(settings_class)}
    aliases = {new: old for old, new in (renamed_flags or {}).items()}
    for name, accepts in {**TRAINING, **getattr(settings_class, "RANGES", {})}.items():
        value = values.get(name)
        if isinstance(value, str) and "choices" not in accepts:
            continue  # a number not yet read from its text: TRL's parser says what is wrong with it
        if "only_with" in accepts and not values.get(accepts["only_with"]):
            continue
        if name in own:
            flag = "--" + name.replace("_", "-")
        else:
            flag = f"--{name}" + (f" ({aliases[f'--{name}']})" if f"--{name}" in aliases else "")
        if line := refusal(flag, value, accepts):
            if other := accepts.get("only_with"):
                line += f" (with --{other.replace('_', '-')} {values[other]})"
            raise ValueError(line)
    if line := reporters_refusal(values.get("report_to")):
        raise ValueError(line)


def check_parsed(*parsed, renamed_flags: dict | None = None) -> None:
    """check_values over the dataclasses TRL's parser built: (settings, GRPOConfig[, ModelConfig])."""
    values = {name: value for config in parsed for name, value in vars(config).items()}
    check_values(values, type(parsed[0]), renamed_flags)


def reporters_refusal(report_to) -> str | None:
    """transformers' own check of --report_to's names, which Trainer makes only when it is built (after the
    model load): one line, or None where every name is one transformers knows."""
    if report_to in (None, "none", "all", []):
        return None
    from transformers.integrations import get_reporting_integration_callbacks

    try:
        get_reporting_integration_callbacks(report_to)
    except ValueError as error:
        return f"--report_to: {str(error).rstrip('.')}, or none, or all"
    return None
