"""The command line of env_rollout.py: a mode flag, then that mode's own flags.

--full's flags, and those of --learn and --rehearse, are TRL's: labkit/recipes.py reads them with
TRL's parser over the recipes. Every other mode has one flag per field of its config dataclass, with the field's default and its one-line doc (the
`option()` metadata of env_rollout.py: help=, and what values it accepts: at_least= (at_most=, why=), positive=,
non_negative=, fraction=, choices=, metavar=, flag=False). A flag of another mode is refused,
naming the mode it belongs to. Nothing here imports the lesson: its config classes are handed in."""

import argparse
import dataclasses
import importlib.util
import os
import sys

from labkit import ranges, runs

MODES = ("smoke", "full", "rehearse", "learn", "show-mask", "check")  # --check last: it takes a value


def checked(accepts: dict):
    """An argparse type: the text as a whole number (at_least=) or a float, in the range `accepts`
    says (labkit/ranges.py), or an error saying what the flag takes."""
    kind = int if "at_least" in accepts else float

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {ranges.wanted(accepts)}, got {text!r}") from None
        if refused := ranges.must_be(value, accepts):
            raise argparse.ArgumentTypeError(refused)
        return value

    return parse


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


class OneLineParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (what was wrong, what is allowed), not a usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default only where it has one worth showing (not for switches or unset values)."""

    def _get_help_string(self, action):
        if action.default is None or action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction):
            return action.help
        return super()._get_help_string(action)


def config_parser(mode: str, config_class, prog: str | None = None) -> argparse.ArgumentParser:
    """The flags of one mode, one per field of its config, with the field's default and doc."""
    parser = OneLineParser(
        prog=prog or f"env_rollout.py --{mode}" + (" MODULE:CLASS" if mode == "check" else ""),
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
        elif ranges.wanted(accepts) is not None:
            kwargs["type"] = checked(accepts)
        parser.add_argument(flag_of(field.name), **kwargs)
    return parser


def mode_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
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
    "usage: env_rollout.py --full [--tier t1|t2] [--config recipe.yaml] [--dry-run] [--tiny | --smollm2] [any GRPOConfig or "
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
        config_class = config_class_of(mode)
        text = FULL_HELP if mode == "full" else config_parser(mode, config_class).format_help()
        if mode != "full" and read_by_trl(mode, config_class):
            renamed = ", ".join(f"{old} is {new}" for old, new in config_class.RENAMED_FLAGS.items())
            text += f"\nand any field of TRL's GRPOConfig as a flag ({renamed}); --{mode} --help lists them\n"
        lines += ["", "=" * 100, text.rstrip()]
    return "\n".join(lines)


def belongs_elsewhere(flag: str, modes: list[str], mode: str) -> str:
    """`--plot belongs to --smoke, --learn and --show-mask, not --rehearse`."""
    named = modes[0] if len(modes) == 1 else f"{', '.join(modes[:-1])} and {modes[-1]}"
    return f"{flag} belongs to {named}, not --{mode}"


def recipe_flags(mode: str, argv: list[str], config_class_of):
    """--full's (settings, GRPOConfig, ModelConfig), or a CPU mode's (settings, GRPOConfig), read by
    TRL's parser over the recipes; or one line on stderr and exit status 2."""
    from labkit import recipes

    try:
        if mode == "full":
            return recipes.parse_full(argv, config_class_of(mode))
        return recipes.parse_cpu_mode(argv, config_class_of(mode), f"env_rollout.py --{mode}")
    except recipes.RecipeError as error:
        for flag in (word.split("=")[0] for word in getattr(error, "words", []) if word.startswith("--")):
            if other := owners(flag, config_class_of):
                error = belongs_elsewhere(flag, other, mode)
                break
        print(f"env_rollout.py --{mode}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def read_by_trl(mode: str, config_class) -> bool:
    """Whether TRL's parser reads this mode's flags: --full, and the CPU modes that run its recipe."""
    return mode == "full" or hasattr(config_class, "RECIPES")


def parse(argv: list[str], config_class_of):
    """(mode, config): the mode flag first, then that mode's own flags, read into its config. For
    --full the config is (WordleSettings, GRPOConfig, ModelConfig)."""
    chosen, rest = mode_parser().parse_known_args(argv)
    if chosen.check_target is not None:
        chosen.mode = "check"
    needed = () if chosen.mode == "smoke" else ("transformers", "trl", "datasets")  # --smoke: torch alone
    needed += ("peft",) if chosen.mode == "full" else ()  # the recipes' LoRA adapter, --dry-run's printout too
    if missing := [name for name in needed if importlib.util.find_spec(name) is None]:
        print(
            f"env_rollout.py --{chosen.mode} needs {', '.join(missing)}, not installed in this Python ({sys.executable}). "
            f"`make test` installs them into .venv (`make smoke` installs only --smoke's torch); then run "
            f".venv/bin/python env_rollout.py --{chosen.mode}",
            file=sys.stderr,
        )
        raise SystemExit(1)
    if chosen.help:  # one mode's flags when a mode was named, every mode's otherwise
        named = chosen.mode != "smoke" or "--smoke" in argv
        if chosen.mode == "full":
            from labkit import recipes

            recipes.print_full_help(config_class_of("full"))
        elif read_by_trl(chosen.mode, config_class_of(chosen.mode)):
            from labkit import recipes

            recipes.print_cpu_mode_help(config_class_of(chosen.mode), f"env_rollout.py --{chosen.mode}")
        else:
            print(
                config_parser(chosen.mode, config_class_of(chosen.mode)).format_help()
                if named
                else full_help(config_class_of)
            )
        raise SystemExit(0)
    config_class = config_class_of(chosen.mode)
    if chosen.mode == "full":
        from labkit import recipes

        if recipes.colocated_without_cuda(rest):  # in seconds: before TRL's parser is imported
            raise SystemExit(recipes.COLOCATE_NEEDS_CUDA)
    if read_by_trl(chosen.mode, config_class):
        return chosen.mode, with_checked_plot(chosen.mode, recipe_flags(chosen.mode, rest, config_class_of))
    parser = config_parser(chosen.mode, config_class)
    values, unknown = parser.parse_known_args(rest)
    for word in unknown:
        flag = word.split("=")[0]
        if other := owners(flag, config_class_of):
            parser.error(belongs_elsewhere(flag, other, chosen.mode))
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if chosen.mode == "check":
        values.target = chosen.check_target
    try:
        config = config_class(**vars(values))
    except ValueError as error:
        parser.error(str(error))
    return chosen.mode, with_checked_plot(chosen.mode, config)


def with_checked_plot(mode: str, config):
    """The config with --plot's path checked before any work (and .png added where it has no
    extension, so that the name printed is the name written); or one line and exit status 2."""
    settings = config[0] if isinstance(config, tuple) else config
    if getattr(settings, "plot", None) is not None:
        try:
            settings.plot = plot_path(settings.plot)
        except ValueError as error:
            print(f"env_rollout.py --{mode}: error: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    return config


def plot_path(path: str) -> str:
    if not path.strip():
        raise ValueError("--plot needs a file name, like --plot curve.png")
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        raise ValueError("--plot needs matplotlib, which is not installed: pip install matplotlib") from None
    kinds = FigureCanvasBase.get_supported_filetypes()
    extension = os.path.splitext(path)[1]
    if not extension:
        path += ".png"
    elif extension[1:].lower() not in kinds:
        raise ValueError(f"--plot {path}: matplotlib writes {', '.join(sorted(kinds))}, not {extension}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--plot {path}: the folder {folder} does not exist")
    if why := runs.unwritable(folder):
        raise ValueError(f"--plot {path}: nothing can be written in the folder {folder} ({why})")
    if os.path.isdir(path):
        raise ValueError(f"--plot {path} is a folder: name a file in it, like {os.path.join(path, 'curve.png')}")
    try:  # the file itself: whether the file system takes its name (most take at most 255 bytes)
        if os.path.exists(path):
            open(path, "ab").close()  # appending nothing: the file an earlier run wrote is left as it was
        else:
            open(path, "xb").close()  # made and removed at once
            os.remove(path)
    except OSError as error:
        raise ValueError(f"--plot {path}: this file cannot be written ({error.strerror})") from None
    return path


def owners(flag: str, config_class_of) -> list[str]:
    """The modes whose own settings (not TRL's GRPOConfig) take this flag."""
    return [f"--{mode}" for mode in MODES if flag in flags_of(config_class_of(mode))]


def flags_of(config_class) -> list[str]:
    """A mode's own flags: one per field (and --no-X for a switch that is on), and its renamed ones."""
    fields = dataclasses.fields(config_class)
    switches_on = [field for field in fields if field.default is True]
    flags = [flag_of(field.name) for field in fields] + [flag_of("no_" + field.name) for field in switches_on]
    return flags + list(getattr(config_class, "RENAMED_FLAGS", {}))
