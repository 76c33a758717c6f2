"""labkit/recipes.py: --full's settings, read by TRL's own parser (TrlParser over WordleSettings,
GRPOConfig and ModelConfig) from the recipe layers (recipes/wordle_grpo.yaml, then the tier's, then
tiny.yaml with --tiny, then --config FILE, then the flags), the old flag spellings, the refusals (one
line, exit status 2), and --full --dry-run's printout of what a run would use."""

import dataclasses
import os
import re

import pytest
from conftest import ROOT, run_cli

pytest.importorskip("trl")

import trl  # noqa: E402

import env_rollout  # noqa: E402
import trl_on_cpu  # noqa: E402
from labkit import recipes  # noqa: E402

# transformers 5.25 renamed gradient_checkpointing activation_checkpointing (the old name: a deprecated alias)


def full(*argv: str):
    """(WordleSettings, GRPOConfig, ModelConfig) for `--full` with these flags."""
    return recipes.parse_full(list(argv), env_rollout.WordleSettings)


def read_yaml(name: str) -> dict:
    return recipes.read_recipe(os.path.join(ROOT, "recipes", name + ".yaml"))


def checkpointing(args) -> bool:
    """Activation (gradient) checkpointing under whichever name the installed transformers takes."""
    return getattr(args, "activation_checkpointing", None) or args.gradient_checkpointing


# --- the layers --------------------------------------------------------------------------------------


def test_the_default_is_tier_t1_over_the_shared_recipe():
    settings, args, model_args = full()
    # The lab's own settings that the recipe sets (their dataclass defaults are unset: the recipe is their source).
    warm_start = (settings.warm_start_games, settings.warm_start_steps, settings.warm_start_batch)
    assert warm_start + (settings.warm_start_learning_rate,) == (256, 64, 4, 1e-4)
    assert env_rollout.WordleSettings().episodes is None
    assert (settings.tier, settings.env_url, settings.episodes, settings.eval_games) == ("t1", "local", 1000, 64)
    assert (model_args.model_name_or_path, model_args.dtype) == ("Qwen/Qwen3-1.7B", "bfloat16")
    assert (model_args.use_peft, model_args.lora_r, model_args.lora_alpha) == (True, 32, 64)
    assert model_args.lora_target_modules in ("all-linear", ["all-linear"])
    assert (args.output_dir, args.seed, args.learning_rate) == ("wordle-grpo-qwen3-1.7b", 0, 1e-5)
    assert (args.num_generations, args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 1, 32)
    assert (args.max_completion_length, args.max_tool_calling_iterations, args.max_steps) == (1024, 8, -1)
    assert args.chat_template_kwargs == {"enable_thinking": False}
    # The tiers train on the game's own reward; every reward function is logged, weighed 0.
    assert settings.reward == "game" and args.reward_weights is None  # set by env_rollout.training_reward
    assert env_rollout.training_reward(settings, args)[1][1:] == [
        (function.__name__, 0.0) for function in env_rollout.WORDLE_REWARD_FUNCTIONS
    ]
    assert args.reward_weights == [0.0] * len(env_rollout.WORDLE_REWARD_FUNCTIONS)
    assert (args.use_vllm, args.vllm_mode, args.vllm_gpu_memory_utilization) == (True, "colocate", 0.45)
    assert (args.save_steps, args.save_total_limit, args.num_generations_eval) == (10, 2, 1)
    assert checkpointing(args) is True


def test_the_warm_start_recomputes_as_grpo_does_unless_its_own_setting_says(tmp_path):
    """The tiers recompute in both stages, each stage's flag its own; the SmolLM2 scale keeps its one
    game's activations while GRPO's two rollouts a pass still recompute theirs."""
    pytest.importorskip("trl")
    from labkit import warm_start

    def recomputes(*flags) -> tuple[bool, bool]:
        settings, args, _ = full(*flags)
        return checkpointing(warm_start.sft_config(args, settings, str(tmp_path))), checkpointing(args)

    assert recomputes() == (True, True)
    assert recomputes("--gradient_checkpointing", "false") == (True, False)
    assert recomputes("--gradient_checkpointing", "false", "--warm-start-gradient-checkpointing", "false") == (
        False, False
    )  # fmt: skip
    assert recomputes("--smollm2") == (False, True)
    assert recomputes("--smollm2", "--warm-start-gradient-checkpointing", "true") == (True, True)


def test_tier_t2_is_qwen3_4b_with_its_own_lora_and_vllm_share():
    settings, args, model_args = full("--tier", "t2")
    assert settings.tier == "t2" and model_args.model_name_or_path == "Qwen/Qwen3-4B"
    assert (model_args.lora_r, model_args.lora_alpha, args.vllm_gpu_memory_utilization) == (64, 128, 0.3)
    assert args.output_dir == "wordle-grpo-qwen3-4b"
    assert args.gradient_accumulation_steps == 32  # the shared recipe, under every tier


def test_each_recipe_key_is_a_field_some_parser_knows():
    known = {field.name for cls in (trl.GRPOConfig, trl.ModelConfig, env_rollout.WordleSettings) for field in
             dataclasses.fields(cls)}  # fmt: skip
    for name in ("wordle_grpo", "t1", "t2", "tiny", "cpu", "smollm2", "learn_wordle", "classroom"):
        assert set(read_yaml(name)) <= known, name
    for settings_class in (trl_on_cpu.LearnConfig, trl_on_cpu.RehearseConfig):  # a CPU mode's own recipe
        own = {field.name for cls in (trl.GRPOConfig, settings_class) for field in dataclasses.fields(cls)}
        assert set(read_yaml(settings_class.RECIPES[-1])) <= own, settings_class.RECIPES[-1]


def test_where_it_runs_follows_the_machine_unless_a_flag_says():
    import torch

    _, args, _ = full()
    on_gpu = torch.cuda.is_available()
    assert (args.bf16, args.use_cpu) == (on_gpu, not on_gpu)
    _, args, _ = full("--bf16", "false", "--use_cpu", "true")
    assert (args.bf16, args.use_cpu) == (False, True)


@pytest.mark.parametrize("name", ["--gradient_checkpointing", "--gradient-checkpointing"])
def test_the_recipes_own_name_for_checkpointing_turns_it_off(name, tmp_path):
    """The recipes' name, gradient_checkpointing, is given under transformers 5.25's new one where the
    installed release has it; so is a flag or a --config key under the old name (the old one alone is ignored)."""
    _, args, _ = full(name, "false")
    assert checkpointing(args) is False
    recipe = tmp_path / "off.yaml"
    recipe.write_text("gradient_checkpointing: false\n")
    _, args, _ = full("--config", str(recipe))
    assert checkpointing(args) is False
    assert checkpointing(full()[1]) is True  # the recipe's own value, for contrast


def test_tiny_over_the_tier_sets_the_cpu_rehearsals_scale_and_keeps_the_episode_budget():
    settings, args, model_args = full("--tiny")
    tiny = read_yaml("tiny")
    for name, value in tiny.items():  # every key of the tiny layer wins over the shared recipe and the tier's
        owner = next(part for part in (settings, model_args, args) if hasattr(part, name))
        assert getattr(owner, name) == value, name
    assert settings.tiny is True and model_args.model_name_or_path == "Qwen/Qwen3-1.7B"  # run_full_tiny sets its own
    assert (args.output_dir, model_args.dtype, args.use_vllm, model_args.use_peft) == (
        "wordle-grpo-tiny", "float32", False, True
    )  # fmt: skip
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (2, 2)
    assert (args.save_steps, args.max_steps) == (1, 3)  # a checkpoint a step; stopped after 2, resumed to 3
    assert "max_completion_length" not in tiny and args.max_completion_length == 1024  # --full's own budget


def test_flags_override_the_tiny_recipe():
    settings, args, model_args = full("--tiny", "--lora_r", "4", "--eval-games", "0", "--max_steps", "5")
    assert settings.tiny and (model_args.lora_r, settings.eval_games, args.max_steps) == (4, 0, 5)
    assert args.learning_rate == 1e-3  # the rest stays tiny.yaml's


def test_a_config_file_overrides_the_recipe_and_the_flags_override_the_file(tmp_path):
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("learning_rate: 3.0e-6\nbeta: 0.01\nlora_r: 16\neval_games: 5\n")
    settings, args, model_args = full("--config", str(recipe), "--beta", "0.02")
    assert (args.learning_rate, args.beta, model_args.lora_r, settings.eval_games) == (3e-6, 0.02, 16, 5)
    assert model_args.model_name_or_path == "Qwen/Qwen3-1.7B"  # what the file leaves alone: the recipe's
    _, args, _ = full("--config", str(recipe), "--tier", "t2")
    assert args.learning_rate == 3e-6 and args.output_dir == "wordle-grpo-qwen3-4b"  # the file is over the tier


def test_any_field_is_a_flag_with_underscores_or_dashes():
    for spelling in (["--output_dir", "there"], ["--output-dir", "there"], ["--output-dir=there"]):
        assert full(*spelling)[1].output_dir == "there", spelling
    _, args, model_args = full("--loss-type", "dr_grpo", "--max_completion_length", "512", "--lora-alpha", "8")
    assert (args.loss_type, args.max_completion_length, model_args.lora_alpha) == ("dr_grpo", 512, 8)
    settings, _, _ = full("--env_url", "http://127.0.0.1:8000", "--eval-games", "3", "--episodes", "40")
    assert (settings.env_url, settings.eval_games, settings.episodes) == ("http://127.0.0.1:8000", 3, 40)


@pytest.mark.parametrize(
    "old, field, value",
    [
        (["--model", "my/model"], "model_name_or_path", "my/model"),
        (["--lora-rank", "16"], "lora_r", 16),
        (["--lora-rank", "16"], "use_peft", True),
        (["--lora-rank", "0"], "use_peft", False),
        (["--lora-rank=0"], "use_peft", False),
        (["--vllm-mode", "none"], "use_vllm", False),
        (["--vllm-mode=none"], "use_vllm", False),
        (["--vllm-mode", "colocate"], "vllm_mode", "colocate"),
        (["--vllm-mode", "colocate"], "use_vllm", True),
        (["--vllm-mode", "server", "--vllm-server-url", "http://h:8000"], "use_vllm", True),
        (["--vllm-mode", "server", "--vllm-server-url", "http://h:8000"], "vllm_mode", "server"),
        (["--vllm-mode", "server", "--vllm-server-url", "http://h:8000"], "vllm_server_base_url", "http://h:8000"),
    ],
)
def test_the_old_spellings_still_work(old, field, value):
    _, args, model_args = full(*old)
    assert getattr(model_args if hasattr(model_args, field) else args, field) == value


# --- the refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--tier", "t3"], "--tier must be one of t1, t2, got 't3'"),
        (["--num_generations", "3"], "generation_batch_size (32) must be divisible by num_generations (3)"),
        (["--num-generations", "1"], "--num_generations must be a whole number >= 2"),  # before GRPOConfig divides
        (["--episodes", "0"], "--episodes must be a whole number >= 1, got 0"),
        (["--eval-games", "-1"], "--eval-games must be a whole number >= 0, got -1"),
        (["--config"], "--config needs a YAML file"),
        (["--config", "no/such/recipe.yaml"], "cannot read the recipe no/such/recipe.yaml"),
    ],
)
def test_bad_settings_are_a_recipe_error_saying_which(argv, says):
    with pytest.raises(recipes.RecipeError) as error:
        full(*argv)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_a_config_file_that_is_not_a_mapping_or_not_yaml_is_refused(tmp_path):
    (tmp_path / "list.yaml").write_text("- learning_rate\n- beta\n")
    (tmp_path / "broken.yaml").write_text("learning_rate: [1e-5\n")
    with pytest.raises(recipes.RecipeError, match="must hold a YAML mapping"):
        full("--config", str(tmp_path / "list.yaml"))
    with pytest.raises(recipes.RecipeError, match="is not valid YAML"):
        full("--config", str(tmp_path / "broken.yaml"))


def one_line_refusal(result, *says: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("env_rollout.py --full: error: "), result.stderr
    for words in says:
        assert words in lines[0], lines[0]


def test_a_config_file_with_an_unknown_key_exits_2_with_one_line(tmp_path):
    recipe = tmp_path / "typo.yaml"
    recipe.write_text("learning_rate: 3.0e-6\nlearning_rat: 1.0e-6\n")
    one_line_refusal(run_cli("--full", "--dry-run", "--config", str(recipe)), "learning_rat")


def test_a_bad_value_exits_2_with_one_line():
    one_line_refusal(run_cli("--full", "--dry-run", "--beta", "abc"), "--beta", "'abc'")


# --- --dry-run ---------------------------------------------------------------------------------------


def dry_run(*argv: str) -> dict[str, str]:
    """`--full --dry-run` with these flags: its `name = value` lines (exit 0)."""
    result = run_cli("--full", "--dry-run", *argv)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    assert all(re.match(r"^[a-z_0-9]+ = ", line) for line in lines), result.stdout
    return dict(line.split(" = ", 1) for line in lines)


def test_dry_run_prints_the_flag_over_the_config_file_over_the_recipe(tmp_path):
    recipe = tmp_path / "F.yaml"
    recipe.write_text("learning_rate: 3.0e-6\n")
    shown = dry_run("--beta", "0.02", "--config", str(recipe))
    assert shown["beta"] == "0.02" and shown["learning_rate"] == "3e-06"
    assert shown["model_name_or_path"] == "Qwen/Qwen3-1.7B" and shown["lora_r"] == "32" and shown["tier"] == "t1"
    assert shown["dry_run"] == "True" and shown["episodes"] == "1000"


def test_dry_run_prints_a_grpo_field_given_as_a_flag():
    assert dry_run("--loss_type", "dr_grpo")["loss_type"] == "dr_grpo"


def test_dry_run_of_tier_t2_names_qwen3_4b():
    shown = dry_run("--tier", "t2")
    assert shown["model_name_or_path"] == "Qwen/Qwen3-4B" and shown["tier"] == "t2" and shown["lora_r"] == "64"


def test_dry_run_lines_say_when_every_weight_is_trained(tmp_path):
    from trl import get_peft_config

    settings, args, model_args = full("--use_peft", "false", "--output_dir", str(tmp_path))
    lines = recipes.dry_run_lines(settings, args, model_args, get_peft_config(model_args))
    assert "lora = none: every weight is trained" in lines and not any(line.startswith("lora_r") for line in lines)
    assert f"output_dir = {tmp_path}" in lines and "seed = 0" in lines


# --- the CPU modes' configs, from the same recipe files, without flags ---------------------------------


def test_grpo_config_reads_recipe_files_without_flags(tmp_path):
    args = recipes.grpo_config(["wordle_grpo", "t1", "cpu"], output_dir=str(tmp_path), seed=5, max_steps=2)
    assert (args.output_dir, args.seed, args.max_steps, args.learning_rate) == (str(tmp_path), 5, 2, 1e-5)
    assert (args.use_cpu, args.bf16, args.use_vllm, checkpointing(args)) == (True, False, False, False)
    assert args.save_strategy == "no" and args.log_completions is False
    assert (args.num_generations, args.max_completion_length) == (4, 1024)  # the shape: --full's
    assert not hasattr(args, "model_name_or_path") and not hasattr(args, "episodes")  # others' keys skipped


def test_learn_reads_its_flags_with_trls_parser_over_its_recipe(tmp_path):
    """--learn's GRPOConfig: --full's recipe without its model or Wordle settings (warm_start_steps is
    --learn's own 400, not the Wordle warm start's 64), then recipes/learn.yaml, then --config, then the
    flags; --learn-steps is --max_steps, --learn-eval-episodes --per_device_eval_batch_size."""
    settings, args = trl_on_cpu.learn_config()
    learn = read_yaml("learn")
    for name, value in learn.items():
        assert getattr(args, name) == value, name
    assert settings.warm_start_steps == 400 and args.chat_template_kwargs == {"enable_thinking": False}
    assert args.generation_batch_size == learn["per_device_train_batch_size"]  # one batch a step
    recipe = tmp_path / "mine.yaml"
    recipe.write_text("beta: 0.0\nnum_generations: 4\n")
    settings, args = trl_on_cpu.learn_config("--config", str(recipe), "--learn-steps", "7", "--learn-eval-episodes=120")
    assert (args.beta, args.num_generations, args.max_steps, args.per_device_eval_batch_size) == (0.0, 4, 7, 120)
    assert trl_on_cpu.rehearsal_config("--rehearse-steps", "2", "--rollouts-per-step", "4")[1].max_steps == 2


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--learn", "--learn-steps", "0"], "must be a whole number >= 1, got 0"),
        (
            ["--rehearse", "--rollouts-per-step", "6"],
            "generation_batch_size (6) must be divisible by num_generations (4)",
        ),
        (["--full", "--dry-run", "--temperature", "0"], "--temperature must be a positive number, got 0.0"),
        (["--rehearse", "--beta", "-1"], "--beta must be a number >= 0, got -1.0"),
        (["--full", "--tiny", "--min_p", "1.5"], "--min_p must be a number from 0 to 1 (0: no token dropped), got 1.5"),
    ],
)
def test_trls_fields_out_of_range_are_refused_in_one_line(argv, message):
    result = run_cli(*argv)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["--full", "--dry-run", "--vllm-mode", "none"],
        ["--full", "--tiny", "--seed", "3"],
        ["--full", "--smollm2", "--warm-start-games", "0"],
        ["--learn", "--learn-eval-episodes", "120", "--beta", "0"],
        ["--rehearse", "--rehearse-steps", "2"],
    ],
    ids=" ".join,
)
def test_a_trl_backed_run_reads_its_flags_with_one_trl_parser_call(argv, monkeypatch):
    """TRL's parser is built once and reads the recipes, --config and the flags once: no second parse
    for values that follow from others."""
    import trl

    import modes
    from labkit import command_line

    built, parses = [], []
    real_init, real_parse = trl.TrlParser.__init__, trl.TrlParser.parse_args_and_config

    def counted_init(self, *args, **kwargs):
        built.append(self)
        real_init(self, *args, **kwargs)

    def counted_parse(self, *args, **kwargs):
        parses.append(args)
        return real_parse(self, *args, **kwargs)

    monkeypatch.setattr(trl.TrlParser, "__init__", counted_init)
    monkeypatch.setattr(trl.TrlParser, "parse_args_and_config", counted_parse)
    mode, config = command_line.parse(argv, modes.config_class_of)
    assert mode == argv[0][2:] and isinstance(config, tuple)
    assert (len(built), len(parses)) == (1, 1)


def test_a_gpu_without_bfloat16_is_refused_before_anything_loads(monkeypatch, tmp_path):
    """A 24 GB card of the Turing or Pascal generation (Titan RTX, P40) has no bf16: one line naming it."""
    import torch

    settings, args, model_args = full("--vllm-mode", "none", "--output_dir", str(tmp_path / "run"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Tesla P40")
    with pytest.raises(SystemExit) as stop:
        recipes.refuse_what_cannot_run(settings, args, model_args)
    assert "Tesla P40" in str(stop.value) and "bfloat16" in str(stop.value) and "\n" not in str(stop.value)


def test_full_fine_tuning_advice_names_only_what_fits():
    """t1's refusal points at a setup that fits and passes the other refusals; Qwen3-4B in float32
    (about 64 GB before activations) fits no tier beside vLLM, and is refused without advice."""
    settings, args, model_args = full("--use_peft", "false", "--vllm-mode", "none")
    refusal = recipes.full_fine_tuning_refusal("t1", model_args, args)
    advice = refusal.split("a larger card: ")[1].split(" (")[0].split()
    assert "27.5 GB" in refusal and advice[:2] == ["--tier", "t2"]
    settings, args, model_args = full(*advice, "--vllm-mode", "none")
    assert recipes.full_fine_tuning_refusal(settings.tier, model_args, args) is None
    assert settings.warm_start_games == 0 and not model_args.use_peft  # the warm-start refusal passes too
    settings, args, model_args = full("--tier", "t2", "--use_peft", "false")  # vLLM colocated: 0.7 x 80 GB left
    assert "no tier's card holds it" in recipes.full_fine_tuning_refusal("t2", model_args, args)


@pytest.mark.parametrize("beta, noted", [("0.02", True), ("0", False)])
def test_beta_after_a_lora_warm_start_is_noted(beta, noted, tmp_path, capsys):
    settings, args, model_args = full("--vllm-mode", "none", "--beta", beta, "--output_dir", str(tmp_path / "run"))
    assert recipes.refuse_what_cannot_run(settings, args, model_args) is None
    err = capsys.readouterr().err
    assert ("note: --beta 0.02 with a LoRA warm start" in err) is noted and len(err.splitlines()) == int(noted)


def test_no_model_flag_is_ignored():
    """ModelConfig's revision and attention reach the model load (the dry run prints them); what the run
    cannot honour (quantization; a revision vLLM would not be given) is refused in one line."""
    shown = run_cli(
        "--full", "--dry-run", "--vllm-mode", "none", "--model_revision", "abc", "--attn_implementation", "sdpa"
    )
    assert shown.returncode == 0
    assert "'revision': 'abc'" in shown.stdout and "'attn_implementation': 'sdpa'" in shown.stdout
    _, args, model_args = full("--vllm-mode", "none", "--model_revision", "abc", "--attn_implementation", "sdpa")
    assert recipes.model_init_kwargs(model_args, on_gpu=False) == {
        "dtype": "float32",
        "revision": "abc",
        "attn_implementation": "sdpa",
    }
    assert recipes.model_init_kwargs(model_args, on_gpu=True)["dtype"] == "bfloat16"  # t1's LoRA on a GPU
    for flags, says in (
        (["--load_in_4bit", "true"], "this run does not quantize"),
        (["--load_in_8bit", "true"], "this run does not quantize"),
        (["--model_revision", "abc"], "vLLM would load 'main'"),  # vLLM colocated, the recipe's
    ):
        refused = run_cli("--full", "--dry-run", *flags)
        lines = refused.stderr.strip().splitlines()
        assert refused.returncode == 1 and len(lines) == 1 and says in lines[0], refused.stderr


# --- bfloat16 on a CPU ----------------------------------------------------------------------------------


@pytest.mark.parametrize("has_bf16", [True, False])
def test_the_smollm2_scale_takes_bf16_where_the_cpu_multiplies_it(monkeypatch, has_bf16):
    """On a CPU, bf16 (LoRA on a bf16 base, the loss under autocast) at the SmolLM2 scale where torch reports
    bf16 units; float32 where it does not (emulated bf16 is slower), at the tiny scale, and with --bf16 false."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("the CPU's rule: on a CUDA GPU every scale takes bf16")
    monkeypatch.setattr(recipes, "cpu_has_bf16", lambda: has_bf16)
    _, args, model_args = full("--smollm2")
    assert args.bf16 is has_bf16
    assert recipes.model_init_kwargs(model_args, False, args.bf16)["dtype"] == ("bfloat16" if has_bf16 else "float32")
    _, args, model_args = full("--smollm2", "--bf16", "false")
    assert args.bf16 is False and recipes.model_init_kwargs(model_args, False, args.bf16)["dtype"] == "float32"
    _, args, _ = full("--tiny")
    assert args.bf16 is False
    _, args, _ = full("--smollm2", "--config", os.path.join(ROOT, "recipes", "learn_wordle.yaml"))
    assert args.bf16 is False  # the learning run stays as its three seeds were measured
    settings, args, model_args = full("--smollm2")
    shown = recipes.dry_run_lines(settings, args, model_args, trl.get_peft_config(model_args))
    assert f"bf16 = {has_bf16}" in shown
    assert f"# on this CPU (bf16 = {has_bf16}) with {{'dtype': '{'bfloat16' if has_bf16 else 'float32'}'}}" in shown


def test_torch_still_says_whether_the_cpu_multiplies_bf16():
    """The probes are torch's private ones: on the tested set and the newest torch alike they answer."""
    assert isinstance(recipes.cpu_has_bf16(), bool)


def test_a_torch_without_the_probes_stops_in_one_line_unless_bf16_is_chosen(monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("on a CUDA GPU the CPU is not probed")
    monkeypatch.delattr(torch.cpu, recipes.CPU_BF16_PROBES[0])
    with pytest.raises(recipes.RecipeError) as stop:
        full("--smollm2")
    assert f"torch {torch.__version__}" in str(stop.value) and "--bf16 false" in str(stop.value)
    assert "\n" not in str(stop.value)
    assert full("--smollm2", "--bf16", "false")[1].bf16 is False  # chosen: nothing to probe
    assert full("--tiny")[1].bf16 is False  # the tiny scale never probes


def test_bf16_chosen_on_a_cpu_without_it_is_noted_before_anything_loads(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(recipes, "cpu_has_bf16", lambda: False)
    settings, args, model_args = full("--smollm2", "--bf16", "true", "--output_dir", str(tmp_path / "run"))
    if not args.use_cpu:
        pytest.skip("a CUDA GPU runs bf16 itself")
    recipes.refuse_what_cannot_run(settings, args, model_args)
    assert capsys.readouterr().err.strip() == recipes.BF16_EMULATED
