"""The command line of env_rollout.py: a mode flag, then that mode's own flags.

--full's flags are TRL's: labkit/recipes.py reads them with TRL's parser. Every other mode has one
flag per field of its config dataclass, with the field's default and its one-line doc (the
`option()` metadata of env_rollout.py: help=, and what values it accepts: at_least=, positive=,
non_negative=, fraction=, choices=, metavar=, flag=False). A flag of another mode is refused,
naming the mode it belongs to. Nothing here imports the lesson: its config classes are handed in."""

import argparse
import dataclasses
import math
import sys

MODES = ("smoke", "full", "rehearse", "learn", "show-mask", "check")  # --check last: it takes a value


def int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {value}")
        return value

    return parse


def checked_float(text: str, accepted, wanted: str) -> float:
    """`text` as a finite float that `accepted(value)` allows, or an error saying it must be `wanted`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}") from None
    if not (math.isfinite(value) and accepted(value)):
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
    return value


VALUE_CHECKS = {
    "positive": lambda text: checked_float(text, lambda value: value > 0, "a positive number"),
    "non_negative": lambda text: checked_float(text, lambda value: value >= 0, "a number >= 0"),
    "fraction": lambda text: checked_float(text, lambda value: 0 < value < 1, "a fraction above 0 and below 1"),
}


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default only where it has one worth showing (not for switches or unset values)."""

    def _get_help_string(self, action):
        if action.default is None or action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction):
            return action.help
        return super()._get_help_string(action)


def config_parser(mode: str, config_class) -> argparse.ArgumentParser:
    """The flags of one mode, one per field of its config, with the field's default and doc."""
    parser = argparse.ArgumentParser(
        prog=f"env_rollout.py --{mode}" + (" MODULE:CLASS" if mode == "check" else ""),
        description=config_class.__doc__,
        formatter_class=HelpFormatter,
        allow_abbrev=False,
        add_help=False,
    )
    for field in dataclasses.fields(config_class):
        accepts = dict(field.metadata)
        if not accepts.pop("flag", True):
            continue  # given with the mode flag itself (--check TARGET)
        kwargs = {"default": field.default, "help": accepts.pop("help"), "dest": field.name}
        kwargs["metavar"] = accepts.pop("metavar", "N" if "at_least" in accepts else "X" if accepts else "TEXT")
        if isinstance(field.default, bool):
            kwargs["action"] = argparse.BooleanOptionalAction if field.default else "store_true"
            del kwargs["metavar"]
        elif "choices" in accepts:
            kwargs["choices"] = list(accepts.pop("choices"))
            del kwargs["metavar"]
        elif "at_least" in accepts:
            kwargs["type"] = int_at_least(accepts.pop("at_least"))
        elif accepts:
            kwargs["type"] = VALUE_CHECKS[next(iter(accepts))]
        parser.add_argument(flag_of(field.name), **kwargs)
    return parser


def mode_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="env_rollout.py",
        description="Agentic RL in one file: a tool environment, GRPO, observation masking.",
        allow_abbrev=False,
        add_help=False,
    )
    modes = parser.add_mutually_exclusive_group()
    for mode in MODES[:-1]:
        modes.add_argument(flag_of(mode), dest="mode", action="store_const", const=mode)
    modes.add_argument("--check", metavar="MODULE:CLASS", dest="check_target")
    parser.add_argument("-h", "--help", action="store_true")
    parser.set_defaults(mode="smoke")
    return parser


FULL_HELP = (
    "usage: env_rollout.py --full [--tier t1|t2] [--config recipe.yaml] [--dry-run] [--tiny] [any GRPOConfig or "
    "ModelConfig field, e.g. --beta 0.02 --loss_type dr_grpo]\n\n"
    "--full: Qwen3 + TRL's GRPOTrainer against OpenEnv Wordle. Its settings are TRL's GRPOConfig and ModelConfig,\n"
    "read by TRL's parser from recipes/wordle_grpo.yaml and recipes/<tier>.yaml (then --config, then the flags),\n"
    "and the lab's own WordleSettings. `env_rollout.py --full --help` lists every flag; `--full --dry-run` prints\n"
    "the settings a run would use."
)


def full_help(config_class_of) -> str:
    lines = [
        "usage: env_rollout.py [--smoke | --full | --rehearse | --learn | --show-mask | --check MODULE:CLASS] "
        "[flags of that mode]",
        "",
        "Agentic RL in one file: a tool environment, GRPO, observation masking.",
    ]
    for mode in MODES:
        text = FULL_HELP if mode == "full" else config_parser(mode, config_class_of(mode)).format_help()
        lines += ["", "=" * 100, text.rstrip()]
    return "\n".join(lines)


def full_flags(argv: list[str], settings_class):
    """(settings, GRPOConfig, ModelConfig) for --full, or one line on stderr and exit status 2."""
    from labkit import recipes

    try:
        return recipes.parse_full(argv, settings_class)
    except recipes.RecipeError as error:
        print(f"env_rollout.py --full: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def parse(argv: list[str], config_class_of):
    """(mode, config): the mode flag first, then that mode's own flags, read into its config. For
    --full the config is (WordleSettings, GRPOConfig, ModelConfig)."""
    chosen, rest = mode_parser().parse_known_args(argv)
    if chosen.check_target is not None:
        chosen.mode = "check"
    if chosen.help:  # one mode's flags when a mode was named, every mode's otherwise
        named = chosen.mode != "smoke" or "--smoke" in argv
        if chosen.mode == "full":
            from labkit import recipes

            recipes.print_full_help(config_class_of("full"))
        else:
            print(
                config_parser(chosen.mode, config_class_of(chosen.mode)).format_help()
                if named
                else full_help(config_class_of)
            )
        raise SystemExit(0)
    if chosen.mode == "full":
        return "full", full_flags(rest, config_class_of("full"))
    config_class = config_class_of(chosen.mode)
    parser = config_parser(chosen.mode, config_class)
    values, unknown = parser.parse_known_args(rest)
    for word in unknown:
        flag = word.split("=")[0]
        owners = [f"--{mode}" for mode in MODES if flag in map(flag_of, fields_of(config_class_of(mode)))]
        if owners:
            parser.error(f"{flag} belongs to {' and '.join(owners)}, not --{chosen.mode}")
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if chosen.mode == "check":
        values.target = chosen.check_target
    try:
        config = config_class(**vars(values))
    except ValueError as error:
        parser.error(str(error))
    if getattr(config, "plot", None):
        try:
            import matplotlib  # noqa: F401  (only --plot needs it)
        except ImportError:
            parser.error("--plot needs matplotlib, which is not installed: pip install matplotlib")
    return chosen.mode, config


def fields_of(config_class) -> list[str]:
    return [field.name for field in dataclasses.fields(config_class)]
