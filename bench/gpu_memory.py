"""Peak GPU memory and seconds per step of --full's training side, on a random-weight model.

    python bench/gpu_memory.py                      # Qwen3-1.7B's shape, tier t1, capped at 24 GB
    python bench/gpu_memory.py --shape qwen3-4b --tier t2 --cap-gb 80
    python bench/gpu_memory.py --shape tiny --device cpu --steps 1   # a check of this script, on a CPU

No weights are downloaded: the model is built from Qwen3's shape (SHAPES) with random weights, in bf16,
with the tier's LoRA adapters, and trained through the lab's own GRPOTrainer builder with
transformers generation (`--vllm-mode none`). Its settings are --full's own: recipes/wordle_grpo.yaml
and recipes/<tier>.yaml, read by TRL's parser as `env_rollout.py --full --tier T --use_vllm false`
reads them (labkit/recipes.py), the LoRA adapter from the tier's ModelConfig (TRL's get_peft_config).
vLLM's colocated share is then added on paper:
`vllm_gpu_memory_utilization x cap`. A random model rarely stops early, so every rollout runs to
max_completion_length: the worst case for activations. The trainer-side peak also holds transformers'
generation KV cache, which in a colocated run lives inside vLLM's share: the sum over-counts it, so a
"fits" verdict is safe and a "does not fit" one is worth a closer look.
"""

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import env_rollout  # noqa: E402
import tiny_qwen  # noqa: E402
from labkit import recipes, trl_glue  # noqa: E402

QWEN3_VOCAB = 151936
SHAPES = {
    "qwen3-1.7b": dict(
        hidden_size=2048,
        num_hidden_layers=28,
        intermediate_size=6144,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
    ),
    "qwen3-4b": dict(
        hidden_size=2560,
        num_hidden_layers=36,
        intermediate_size=9728,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=40960,
    ),
    "tiny": dict(tiny_qwen.TINY_QWEN3, max_position_embeddings=2048),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen3-1.7b")
    parser.add_argument("--tier", choices=sorted(recipes.TIERS), default="t1")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps to time (the first includes warm-up)")
    parser.add_argument("--cap-gb", type=float, default=24.0, help="memory cap for this process, as on a smaller card")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    options = parser.parse_args()
    if options.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: run this on a GPU, or check the script with --shape tiny --device cpu")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    if options.device == "cuda":
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, options.cap_gb * 2**30 / total))
        torch.cuda.reset_peak_memory_stats()

    tokenizer = tiny_qwen.build_tiny_tokenizer()
    model = tiny_qwen.build_tiny_model(tokenizer, vocab_size=QWEN3_VOCAB, rope_theta=1e6, **SHAPES[options.shape])
    model = model.to(torch.bfloat16 if options.device == "cuda" else torch.float32)
    parameters = sum(p.numel() for p in model.parameters())

    dataset = tiny_qwen.guess_dataset(512)
    on_cpu = options.device == "cpu"
    with tempfile.TemporaryDirectory() as output_dir:
        # --full's settings for the tier, with transformers generation (vLLM's share is added on paper below).
        flags = ["--tier", options.tier, "--output_dir", output_dir, "--use_vllm", "false"]
        flags += ["--max_steps", str(options.steps), "--save_strategy", "no", "--log_completions", "false"]
        flags += ["--disable_tqdm", "true", "--bf16", str(not on_cpu), "--use_cpu", str(on_cpu)]
        if on_cpu:  # the script's own check: same path, toy sizes
            (checkpointing,) = recipes.current_names({"gradient_checkpointing": False})  # its name in this release
            flags += ["--gradient_accumulation_steps", "4", "--max_completion_length", "16", "--num_generations", "2"]
            flags += [f"--{checkpointing}", "false"]
        _, config, model_args = recipes.parse_full(flags, env_rollout.WordleSettings)
        from trl import get_peft_config

        peft_config = get_peft_config(model_args)  # the tier's LoRA adapter, as --full builds it
        trainer = trl_glue.build_grpo_trainer(
            config,
            model,
            dataset,
            env_rollout.GuessEnv,
            metrics=env_rollout.LOGGED_METRICS,
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        started = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - started

    rollouts = config.per_device_train_batch_size * config.gradient_accumulation_steps
    lora = f"LoRA rank {peft_config.r}" if peft_config else "no LoRA"
    print(
        f"shape {options.shape}: {parameters / 1e9:.2f}e9 parameters, tier {options.tier}, {lora} "
        f"({trainable / 1e6:.1f}e6 trainable), {options.device}"
    )
    print(
        f"seconds per step: {seconds / options.steps:.1f} (median not meaningful over {options.steps} steps; "
        f"{rollouts} rollouts of up to {config.max_completion_length} tokens, transformers generation)"
    )
    if options.device == "cuda":
        gib = 2**30
        peak, reserved = torch.cuda.max_memory_allocated() / gib, torch.cuda.max_memory_reserved() / gib
        vllm = config.vllm_gpu_memory_utilization * options.cap_gb
        print(f"peak allocated {peak:.1f} GiB, peak reserved {reserved:.1f} GiB (cap {options.cap_gb:.0f} GiB)")
        print(
            f"with vLLM's colocated share ({config.vllm_gpu_memory_utilization} x {options.cap_gb:.0f} = {vllm:.1f} GiB): "
            f"{reserved + vllm:.1f} GiB of {options.cap_gb:.0f} GiB -> {'fits' if reserved + vllm <= options.cap_gb else 'DOES NOT FIT'}"
            " (counts the generation KV cache twice: see the docstring)"
        )


if __name__ == "__main__":
    main()
