"""`--full`'s settings, read by TRL's own parser (TrlParser, over GRPOConfig, ModelConfig and the lab's
own settings dataclass) from the recipe files in recipes/, and --dry-run's printout of them. --learn
and --rehearse read theirs the same way (parse_cpu_mode), over --full's recipe and their own.

Layers, each over the last, as in TRL's example scripts with `--config`:
1. recipes/wordle_grpo.yaml: the Wordle recipe, shared by every tier;
2. recipes/<tier>.yaml: the model, its LoRA and vLLM's share of the GPU (--tier t1, the default, or t2);
3. recipes/tiny.yaml with --tiny, or recipes/smollm2.yaml with --smollm2: a CPU scale;
4. the user's --config FILE.yaml, if any;
5. the flags: any field of GRPOConfig (--beta 0.02, --loss_type dr_grpo), of ModelConfig
   (--lora_r 16) or of the lab's settings, spelled with underscores or dashes.
Where the run happens is not a recipe's: bf16 and use_cpu follow the machine (a CUDA GPU, or not)
unless a flag sets them. Nothing here imports the lesson."""

import argparse
import dataclasses
import os
import sys

from labkit import ranges
from labkit.trl_glue import RENAMED_FIELDS, current_names
from labkit.wordle_sessions import env_url_refusal

RECIPES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "recipes")
SHARED_RECIPE = "wordle_grpo"
TIERS = ("t1", "t2")
CPU_SCALES = ("tiny", "smollm2")  # --tiny, --smollm2: a recipe each, over the tier's

# The flags README and docs named before TRL's parser read --full's settings, and TRL's spelling of
# each. --vllm-mode none has no single field in TRL: it is use_vllm false.
RENAMED_FLAGS = {
    "--model": "--model_name_or_path",
    "--lora-rank": "--lora_r",
    "--vllm-server-url": "--vllm_server_base_url",
}


class RecipeError(ValueError):
    """A recipe file or a flag of --full that cannot be used; the message says which and why."""


class FlagReader(argparse.ArgumentParser):
    """An argparse parser that reads a few flags before TRL's parser does, and says nothing itself: what
    it cannot read is a RecipeError (one line), not argparse's usage block and exit."""

    def error(self, message: str):
        raise RecipeError(message)


class UnknownFlags(RecipeError):
    """Words no parser of the mode takes (`words`): the command line says which mode a flag belongs to."""

    def __init__(self, words: list[str]):
        super().__init__(f"unrecognized arguments: {' '.join(words)}")
        self.words = words


def said_yes(value) -> bool:
    """A switch's value as a flag or a recipe gives it (`--tiny`, `--tiny true`, `use_vllm: true`), read
    before TRL's parser, which takes the same spellings."""
    return str(value).lower() in ("true", "1", "yes")


def renamed_field_flags() -> dict:
    """The flags of RENAMED_FIELDS, both spellings, under the name the installed GRPOConfig takes."""
    flags = {}
    for old in RENAMED_FIELDS:
        (new,) = current_names({old: None})
        if new != old:
            flags.update({f"--{old}": f"--{new}", f"--{old.replace('_', '-')}": f"--{new}"})
    return flags


def read_recipe(path: str) -> dict:
    import yaml

    try:
        with open(path, encoding="utf-8") as file:
            recipe = yaml.safe_load(file) or {}
    except OSError as error:
        raise RecipeError(f"cannot read the recipe {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise RecipeError(
            f"{path} is not UTF-8 text (byte {error.object[error.start]:#04x} at offset {error.start}): save it as UTF-8"
        ) from None
    except yaml.YAMLError as error:
        raise RecipeError(f"{path} is not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(recipe, dict):
        raise RecipeError(f"{path} must hold a YAML mapping of setting: value")
    return recipe


def recipe_layer(name: str) -> dict:
    """recipes/<name>.yaml as a mapping."""
    return read_recipe(os.path.join(RECIPES, name + ".yaml"))


def spelled_as_trl(argv: list[str]) -> list[str]:
    """The flags with the spellings of RENAMED_FLAGS (and --vllm-mode none, --lora-rank 0) made TRL's."""
    spelled, words = [], iter(argv)
    for word in words:
        flag, has_value, value = word.partition("=")
        if flag in ("--vllm-mode", "--vllm_mode"):
            value = value if has_value else next(words, "")
            spelled += ["--use_vllm", "false"] if value == "none" else ["--use_vllm", "true", "--vllm_mode", value]
        elif flag == "--lora-rank":
            value = value if has_value else next(words, "")
            spelled += ["--use_peft", "false"] if value == "0" else ["--use_peft", "true", "--lora_r", value]
        else:
            spelled.append(renamed(word, RENAMED_FLAGS))
    return spelled


def renamed(word: str, names: dict) -> str:
    """A flag (or --flag=value) under its new name, if `names` renames it."""
    flag, has_value, value = word.partition("=")
    return names.get(flag, flag) + (f"={value}" if has_value else "")


def parse_full(argv: list[str], settings_class):
    """(settings, GRPOConfig, ModelConfig) for `--full` with these flags; RecipeError for a bad one."""
    import torch
    from trl import GRPOConfig, ModelConfig

    argv = spelled_as_trl(argv)
    chooser = FlagReader(add_help=False, allow_abbrev=False)
    chooser.add_argument("--tier", default="t1")
    for scale in CPU_SCALES:
        chooser.add_argument(f"--{scale}", nargs="?", const="true", default="false")
    chosen, _ = chooser.parse_known_args(argv)
    if chosen.tier not in TIERS:
        raise RecipeError(f"--tier must be one of {', '.join(TIERS)}, got {chosen.tier!r}")
    on_gpu = torch.cuda.is_available()
    scales = [scale for scale in CPU_SCALES if said_yes(getattr(chosen, scale))]
    flags = {word.partition("=")[0] for word in argv}
    # Where it runs, the machine's: bf16 on a CUDA GPU; on a CPU at the SmolLM2 scale, where the CPU has
    # bf16 units (measured there: docs/full.md, "Where a GRPO step's time goes"); float32 otherwise.
    bf16 = on_gpu or (scales == ["smollm2"] and "--bf16" not in flags and cpu_bf16_or_refusal())
    where = {"bf16": bf16, "use_cpu": not on_gpu}
    layers = [where, SHARED_RECIPE, chosen.tier] + scales
    if "--reward" in flags and flags & {"--reward_weights", "--reward-weights"}:
        raise RecipeError("--reward and --reward_weights both choose the training reward: pass one of them")
    return parse_with_recipes(
        argv, (settings_class, GRPOConfig, ModelConfig), layers, "env_rollout.py --full", RENAMED_FLAGS
    )


# torch.cpu's probes of the CPU's instructions, private to torch (tested on torch 2.13): AVX512-BF16 (AMD
# Zen 4 and later, Intel Cooper Lake) and AMX (Intel Sapphire Rapids and later) run bfloat16 matmuls in
# hardware; without them PyTorch emulates bfloat16, slower than float32, so float32 stays the default.
CPU_BF16_PROBES = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")


def cpu_has_bf16() -> bool | None:
    """Whether this CPU multiplies bfloat16 in hardware, as torch reports it; None where the installed
    torch no longer has the probes (cpu_bf16_or_refusal then stops the run, naming its version: a silent
    float32 would be a slower run, unexplained)."""
    import torch

    probes = [getattr(torch.cpu, name, None) for name in CPU_BF16_PROBES]
    if not all(callable(probe) for probe in probes):
        return None
    return any(bool(probe()) for probe in probes)


BF16_EMULATED = (
    "note: --bf16 true on a CPU without bf16 units (torch reports neither AVX512-BF16 nor AMX): PyTorch emulates "
    "bfloat16 here, slower than float32 (--bf16 false)"
)


def cpu_bf16_or_refusal() -> bool:
    """cpu_has_bf16(), or a RecipeError (one line) where torch can no longer say."""
    import torch

    found = cpu_has_bf16()
    if found is None:
        raise RecipeError(
            f"torch {torch.__version__} no longer has torch.cpu.{' or '.join(CPU_BF16_PROBES)}, which tell this "
            "lab whether the CPU runs bfloat16 in hardware (tested on torch 2.13): choose with --bf16 true or "
            "--bf16 false"
        )
    return found


def parse_cpu_mode(argv: list[str], settings_class, prog: str):
    """(settings, GRPOConfig) for a CPU mode that runs --full's recipe at its own scale (--learn,
    --rehearse). Its layers are `settings_class.RECIPES`: of --full's (all but the last) only the GRPOConfig
    fields, not its model or Wordle settings; then the mode's own. `settings_class.RENAMED_FLAGS` are
    translated; `settings_class.RANGES` are the values its settings and GRPOConfig fields take."""
    from trl import GRPOConfig

    argv = [renamed(word, settings_class.RENAMED_FLAGS) for word in argv]
    layers = cpu_mode_layers(settings_class)
    return parse_with_recipes(argv, (settings_class, GRPOConfig), layers, prog, settings_class.RENAMED_FLAGS)


def cpu_mode_layers(settings_class) -> list:
    from trl import GRPOConfig

    training = {field.name for field in dataclasses.fields(GRPOConfig)}
    *shared, own = settings_class.RECIPES
    return [{k: v for k, v in current_names(recipe_layer(name)).items() if k in training} for name in shared] + [own]


def parse_with_recipes(argv, dataclass_types, layers, prog: str, renamed_flags: dict | None = None):
    """TRL's parser over `dataclass_types`, whose defaults are the recipe layers (names in recipes/, or
    mappings), each over the last; then --config FILE.yaml and the flags, as in TRL's example scripts:
    one parse, with every value's range (labkit/ranges.py) checked on what it read before TRL builds its
    dataclasses (GRPOConfig's own checks divide by num_generations) and on the dataclasses it built.
    `renamed_flags`: the lab's spellings of TRL's flags, named beside TRL's in a refusal."""
    parser = recipe_parser(dataclass_types, layers, prog)
    recipe = {}
    if "--config" in argv:
        index = argv.index("--config")
        if index + 1 >= len(argv):
            raise RecipeError("--config needs a YAML file: --config recipe.yaml")
        recipe = read_recipe(argv[index + 1])  # a clear line for a file that is missing or not YAML
        # TRL sets a renamed field under its old name only, which the new release then ignores.
        parser.set_defaults_with_config(**{k: v for k, v in current_names(recipe).items() if k not in recipe})
    argv = [renamed(word, renamed_field_flags()) for word in argv]
    stderr, sys.stderr = sys.stderr, _FirstLine(sys.stderr, prog)  # argparse's usage block, cut to its error
    try:
        ranges.check_values(values_read(parser, argv, recipe), dataclass_types[0], renamed_flags)
        *parsed, unknown = parser.parse_args_and_config(argv, return_remaining_strings=True)
        if unknown:
            raise UnknownFlags(unknown)
        ranges.check_parsed(*parsed, renamed_flags=renamed_flags)
        return tuple(parsed)
    except UnknownFlags:
        raise
    except ValueError as error:  # GRPOConfig's own checks, the settings' and unknown keys in --config's file
        raise RecipeError(str(error).strip().splitlines()[0]) from None
    finally:
        sys.stderr = stderr


def values_read(parser, argv: list[str], recipe: dict) -> dict:
    """What TRL's parser builds its dataclasses from (the layers, --config's `recipe`, the flags), field
    name: value, read without building them. TRL's parse_args_and_config sets the same defaults again."""
    parser.set_defaults_with_config(**current_names(recipe))
    if "--config" in argv:
        index = argv.index("--config")
        argv = argv[:index] + argv[index + 2 :]
    return vars(parser.parse_known_args(argv)[0])


def recipe_parser(dataclass_types, layers, prog: str):
    """TRL's parser over `dataclass_types` with the recipe layers as its defaults."""
    from trl import TrlParser

    parser = TrlParser(dataclass_types, prog=prog)
    for layer in layers:
        unknown = parser.set_defaults_with_config(
            **current_names(recipe_layer(layer) if isinstance(layer, str) else layer)
        )
        if unknown:
            raise RecipeError(f"recipes/{layer}.yaml sets what no parser knows: {' '.join(unknown)}")
    return parser


class _FirstLine:
    """A stream that keeps only argparse's error line ('...: error: ...'), not its long usage block."""

    def __init__(self, stream, prog: str):
        self.stream, self.prog = stream, prog

    def write(self, text: str) -> int:
        for line in text.splitlines(keepends=True):
            if ": error: " in line:
                self.stream.write(self.prog + line[line.index(": error: ") :])
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


# --dry-run: every setting the run would take, read back from the objects it would be built from.
ALWAYS_SHOWN = (
    "output_dir",
    "seed",
    "learning_rate",
    "lr_scheduler_type",
    "beta",
    "loss_type",
    "temperature",
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "max_completion_length",
    "max_steps",
    "use_vllm",
    "vllm_mode",
    "bf16",
    "activation_checkpointing",
    "gradient_checkpointing",
)


def print_dry_run(settings, args, model_args, reward: tuple[str, list]) -> int:
    """The dry run: the settings, and `reward`, the training reward (env_rollout.training_reward). What no
    run could take is refused before it, by refuse_what_no_run_takes (modes.py), as before a run."""
    from trl import get_peft_config

    print("\n".join(dry_run_lines(settings, args, model_args, get_peft_config(model_args), reward)))
    return 0


def pinned_revision(model_args) -> bool:
    return model_args.model_revision not in (None, "main")


def refuse_unused_model_flags(args, model_args) -> None:
    """ModelConfig's flags that this run could not honour, refused in one line rather than ignored."""
    if model_args.load_in_4bit or model_args.load_in_8bit:
        raise SystemExit(
            "--load_in_4bit/--load_in_8bit: this run does not quantize. Tier t1's plan fits bf16 weights on a 24 GB "
            'card (docs/full.md, "The 24 GB plan"), and vLLM colocated cannot load TRL\'s in-flight 8-bit weights'
        )
    if pinned_revision(model_args) and args.use_vllm:
        raise SystemExit(
            f"--model_revision {model_args.model_revision}: TRL starts vLLM from the model's name alone, with no "
            "revision, so vLLM would load 'main'. Download that revision into a folder (huggingface-cli download "
            f"{model_args.model_name_or_path} --revision {model_args.model_revision} --local-dir DIR) and pass "
            "--model_name_or_path DIR"
        )


def model_init_kwargs(model_args, on_gpu: bool, bf16: bool = False) -> dict:
    """What TRL's GRPOTrainer loads the model with (GRPOConfig.model_init_kwargs), from ModelConfig:
    its dtype (float32 unless LoRA on a CUDA GPU or, with `bf16`, on a CPU: there the frozen base takes
    the recipe's dtype and the adapter stays float32, as peft keeps it; bf16 weights would round full
    updates away), its revision and its attention. trust_remote_code is GRPOConfig's own, which TRL
    passes to both the model and vLLM; quantization is refused (refuse_what_cannot_run)."""
    kwargs = {"dtype": model_args.dtype if (on_gpu or bf16) and model_args.use_peft else "float32"}
    if pinned_revision(model_args):
        kwargs["revision"] = model_args.model_revision
    if model_args.attn_implementation:
        kwargs["attn_implementation"] = model_args.attn_implementation
    return kwargs


def dry_run_lines(settings, args, model_args, peft_config, reward=None) -> list[str]:
    """`name = value` lines: the lab's settings, the training reward (`reward`: where its weights come
    from, and (function, weight) pairs), the model and its LoRA, and the GRPOConfig fields that matter
    most or differ from TRL's defaults (the rest are TRL's defaults)."""
    from trl import GRPOConfig

    lines = ["# the lab's own settings (WordleSettings)"]
    lines += [f"{field.name} = {getattr(settings, field.name)}" for field in dataclasses.fields(settings)]
    if reward:
        source, weights = reward
        lines.append(
            f"# the training reward ({source}): each reward function times its weight (0: logged, not trained "
            "on); get_reward is WordleEnv's, the game's own, which TRL adds with weight 1"
        )
        lines += [f"reward_weight_{name.rpartition('.')[2]} = {weight:g}" for name, weight in weights]
    lines.append("# the model (TRL's ModelConfig) and its LoRA adapter (peft's LoraConfig, from it)")
    lines += [f"model_name_or_path = {model_args.model_name_or_path}", f"dtype = {model_args.dtype}"]
    lines.append(f"# on a CUDA GPU the model is loaded with {model_init_kwargs(model_args, on_gpu=True)}")
    if args.use_cpu:
        lines.append(f"# on this CPU (bf16 = {args.bf16}) with {model_init_kwargs(model_args, False, args.bf16)}")
    if args.use_vllm:
        lines.append(
            f"# vLLM ({args.vllm_mode}) starts from {model_args.model_name_or_path} (the name alone, as TRL passes it), "
            f"trust_remote_code = {args.trust_remote_code}"
        )
    if peft_config is None:
        lines.append("lora = none: every weight is trained")
    else:
        modules = peft_config.target_modules
        modules = modules if isinstance(modules, str) else ",".join(sorted(modules))
        lines += [
            f"lora_r = {peft_config.r}",
            f"lora_alpha = {peft_config.lora_alpha}",
            f"lora_dropout = {peft_config.lora_dropout}",
            f"lora_target_modules = {modules}",
        ]
    # TRL's defaults (its gradient_checkpointing default, True, given under today's name: no warning).
    default = GRPOConfig(
        output_dir=args.output_dir,
        use_cpu=args.use_cpu,
        bf16=args.bf16,
        **current_names({"gradient_checkpointing": True}),
    )
    lines.append("# TRL's GRPOConfig: the fields below; every other field is TRL's default")
    for field in dataclasses.fields(args):
        value = getattr(args, field.name)
        if field.name in ALWAYS_SHOWN or (field.init and value != getattr(default, field.name)):
            lines.append(f"{field.name} = {getattr(value, 'value', value)}")  # an enum as its value
    if args.use_cpu:
        lines.append(
            "# this machine has no CUDA GPU: on one, the run takes bf16 = True and use_cpu = False; on a CPU, "
            "bf16 = True at the SmolLM2 scale where torch reports the CPU's bf16 units (--bf16 chooses)"
        )
    return lines


def print_full_help(settings_class) -> None:
    """--full --help: what the layers are, then every flag TRL's parser takes."""
    from trl import GRPOConfig, ModelConfig, TrlParser

    print(__doc__.split("\n\n", 1)[1].split("Nothing here")[0].rstrip())
    print()
    TrlParser((settings_class, GRPOConfig, ModelConfig), prog="env_rollout.py --full").print_help()


def print_cpu_mode_help(settings_class, prog: str) -> None:
    """--learn --help (or --rehearse): the mode, then every flag, with the recipes' values as defaults."""
    from trl import GRPOConfig

    print(
        f"{settings_class.__doc__}\nRecipes, each over the last: "
        + ", ".join(f"recipes/{name}.yaml" for name in settings_class.RECIPES)
    )
    print()
    recipe_parser((settings_class, GRPOConfig), cpu_mode_layers(settings_class), prog).print_help()


def grpo_config(layers: list[str], **overrides):
    """TRL's GRPOConfig from recipe files (names in recipes/, each over the last) and `overrides`,
    with no flags: how the CPU modes (--rehearse, --learn, --show-mask, the benchmarks) run --full's
    recipe at their own scale. Keys of ModelConfig and of the lab's settings in the files are skipped."""
    from trl import GRPOConfig

    values = {}
    for layer in layers:
        values.update(recipe_layer(layer))
    values = current_names({**values, **overrides})
    fields = {field.name for field in dataclasses.fields(GRPOConfig) if field.init}
    return GRPOConfig(**{name: value for name, value in values.items() if name in fields})


COLOCATE_NEEDS_CUDA = (
    "--full: vLLM colocated (the default) needs a CUDA GPU, and this machine has none. To debug the path "
    "on a CPU, slowly, pass --vllm-mode none; to rehearse it end to end with a tiny model, --tiny."
)


def colocated_without_cuda(argv: list[str]) -> bool:
    """Whether these --full flags ask for vLLM colocated on a machine without CUDA: read from the recipe
    files and the flags alone, so that the refusal comes in seconds, before TRL is imported (TRL's parser
    reads the same layers again after it; refuse_what_cannot_run checks the parsed settings once more).
    False where the flags are not plain enough to tell: the parsed check then answers."""
    import torch

    if torch.cuda.is_available():
        return False
    reader = FlagReader(add_help=False, allow_abbrev=False)
    reader.add_argument("--tier", default="t1")
    reader.add_argument("--config")
    for name in ("dry_run", "use_vllm", *CPU_SCALES):
        reader.add_argument(f"--{name}", f"--{name.replace('_', '-')}", nargs="?", const="true", default=None)
    reader.add_argument("--vllm_mode")
    reader.add_argument("-h", "--help", action="store_true")
    try:
        flags, _ = reader.parse_known_args(spelled_as_trl(argv))
        if flags.help or flags.tier not in TIERS or said_yes(flags.dry_run):
            return False
        if any(said_yes(getattr(flags, scale)) for scale in CPU_SCALES):
            return False  # a CPU scale runs vLLM colocated on vLLM's CPU build (make rehearse-vllm)
        recipe = {}
        for layer in [SHARED_RECIPE, flags.tier]:
            recipe.update(recipe_layer(layer))
        if flags.config:
            recipe.update(read_recipe(flags.config))
    except RecipeError:  # what TRL's parser will report in its own words
        return False
    use_vllm = recipe.get("use_vllm") if flags.use_vllm is None else flags.use_vllm
    mode = flags.vllm_mode or recipe.get("vllm_mode")  # unset: TRL's default, which only TRL knows
    return said_yes(use_vllm) and mode == "colocate"


# Full fine-tuning in float32 (bf16 weights would round the updates away): weights, gradients and
# Adam's two moments, 16 bytes a weight, before activations; the tiers' cards, in GB.
FULL_FINE_TUNING_GB = {"Qwen/Qwen3-1.7B": 27.5, "Qwen/Qwen3-4B": 64.3}
TIER_CARD_GB = {"t1": 24, "t2": 80}


def full_fine_tuning_refusal(tier: str, model_args, args) -> str | None:
    """Why --use_peft false cannot fit this tier's card with this model, and what would; None if it fits
    (or the model is not one whose size the lab knows)."""
    need = FULL_FINE_TUNING_GB.get(model_args.model_name_or_path)
    if need is None:
        return None
    colocated = args.use_vllm and args.vllm_mode == "colocate"
    share = args.vllm_gpu_memory_utilization if colocated else 0.0

    def room(card: float) -> float:
        return card * (1 - share)

    if need <= room(TIER_CARD_GB[tier]):
        return None
    beside = (
        f"the {room(TIER_CARD_GB[tier]):.0f} GB the {TIER_CARD_GB[tier]} GB card leaves beside vLLM"
        if colocated
        else f"the {TIER_CARD_GB[tier]} GB card"
    )
    larger = [other for other, card in TIER_CARD_GB.items() if need <= room(card)]
    advice = (
        f", or a larger card: --tier {larger[0]} --model_name_or_path {model_args.model_name_or_path} --use_peft false "
        "--warm-start-games 0 (the warm start trains a LoRA adapter)."
        if larger
        else "; no tier's card holds it."
    )
    return (
        f"--use_peft false (full fine-tuning) does not fit tier {tier}: float32 weights, gradients and Adam moments "
        f"of {model_args.model_name_or_path} take about {need} GB, more than {beside}. Train LoRA adapters "
        f"(the recipe's){advice}"
    )


def refuse_what_no_run_takes(settings, args, model_args) -> None:
    """Stop, in one line, settings that no machine could run: the dry run calls this as the run does (the
    command line, before either), so that the one passes exactly what the other would."""
    unset = [field.name for field in dataclasses.fields(settings) if getattr(settings, field.name) is None]
    if unset:
        raise SystemExit(f"--full: {', '.join(unset)} unset: the recipes (recipes/wordle_grpo.yaml) set them")
    if not model_args.use_peft and (refusal := full_fine_tuning_refusal(settings.tier, model_args, args)):
        raise SystemExit(refusal)
    refuse_unused_model_flags(args, model_args)
    if settings.warm_start_games and not model_args.use_peft:
        raise SystemExit("--warm-start-games: the warm start trains the LoRA adapter GRPO goes on with (--use_peft)")
    if refusal := env_url_refusal(settings.env_url):
        raise SystemExit(refusal)


def refuse_a_model_at_a_cpu_scale(settings, model_args) -> None:
    """Stop, in one line, a model named at a CPU scale, which brings its own (--tiny builds one, --smollm2
    runs SmolLM2-135M-Instruct) and would train that one instead, silently. Asked of the command line's
    settings (modes.py, for the dry run and the run): the scale then hands run_full its own model."""
    scale = next((scale for scale in CPU_SCALES if getattr(settings, scale)), None)
    if scale is None:
        return
    own = "builds its own tiny Qwen3" if scale == "tiny" else "runs SmolLM2-135M-Instruct"
    # The tier's model, unless a flag or --config named another.
    if model_args.model_name_or_path != recipe_layer(settings.tier).get("model_name_or_path"):
        raise SystemExit(
            f"--model_name_or_path {model_args.model_name_or_path}: --{scale} {own} and takes no other model; "
            f"drop the flag, or drop --{scale} to train that model (on a GPU)"
        )
    if pinned_revision(model_args):
        raise SystemExit(
            f"--model_revision {model_args.model_revision}: --{scale} {own} and takes no revision; drop the flag"
        )


def refuse_what_cannot_run(settings, args, model_args, trainer_class=None):
    """Stop, in seconds and before TRL, the game or a model is loaded, a run that cannot go on here (these
    settings, this machine, this output folder); return the checkpoint a --resume continues from: the
    newest complete one (labkit/runs.py), None to start afresh."""
    import torch

    from labkit import runs

    refuse_what_no_run_takes(settings, args, model_args)
    on_cpu = not torch.cuda.is_available() and not getattr(trainer_class, "vllm_on_cpu", False)
    if args.use_vllm and args.vllm_mode == "colocate" and on_cpu:
        raise SystemExit(COLOCATE_NEEDS_CUDA)
    if torch.cuda.is_available() and not torch.cuda.is_bf16_supported(including_emulation=False):
        raise SystemExit(
            f"--full trains in bfloat16, which this GPU ({torch.cuda.get_device_name(0)}) does not support: "
            "it needs an Ampere card or newer (A10, A100, L4, RTX 30xx/40xx, H100). Rehearse on a CPU meanwhile: "
            "make rehearse-full"
        )
    if refusal := runs.folder_refusal(args.output_dir, "--output_dir"):
        raise SystemExit(refusal)
    if args.use_cpu and args.bf16 and cpu_has_bf16() is False:  # chosen: a torch without the probes is not asked
        print(BF16_EMULATED, file=sys.stderr)
    held = runs.holds_run(args.output_dir)
    if settings.resume and not held:
        raise SystemExit(
            f"--resume: no checkpoint (nor warm start) in {args.output_dir}; run without --resume to start"
        )
    if held and not settings.resume:
        raise SystemExit(f"{args.output_dir} holds a run: pass --resume to continue it, or another --output_dir")
    if args.beta > 0 and model_args.use_peft and settings.warm_start_games:
        print(BETA_AFTER_A_LORA_WARM_START.format(beta=args.beta), file=sys.stderr)
    return runs.last_complete_checkpoint(args.output_dir)


# TRL's reference model, with a LoRA adapter, is the base with the adapter switched off (peft's
# disable_adapter): the warm start lives in the adapter, so the KL term measures the distance from the
# cold model, not from the warm start.
BETA_AFTER_A_LORA_WARM_START = (
    "note: --beta {beta} with a LoRA warm start: TRL's reference model is the base without the adapter, so the "
    'KL term pulls the policy back towards the cold model, away from the warm start (docs/full.md, "Two stages"); '
    "--beta 0 (TRL's default, the recipe's) keeps no reference"
)
