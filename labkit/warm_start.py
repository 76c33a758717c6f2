"""Stage 1 of --full, the warm start: supervised fine-tuning of the run's own LoRA adapter on Wordle
games that a fair solver (labkit/wordle_solver.py) played against the real game, written as the
exact conversations the GRPO stage generates, through TRL's SFTTrainer with assistant-only loss.

Why: a cold Qwen3-1.7B wins almost no Wordle games, so its GRPO groups all score alike and teach
nothing (idea 2 of the lesson). A few hundred demonstrations of the tool-call format and of guessing
words consistent with the marks give GRPO groups that differ.

The conversations are those of TRL's tool loop: the user turn is the dataset's prompt with the text
reset() returned appended; each assistant turn is one tool call in Qwen3's format; each tool turn is
the game's answer as TRL inserts it; after the game is over the assistant ends its turn. SFTTrainer
renders them with TRL's Qwen3 training chat template, tools and enable_thinking=False as GRPO does,
and its assistant-only loss gives the game's text weight 0 (observation masking, once more). One
difference TRL's template imposes: it counts the empty think block that opens an assistant turn as
the assistant's, so the warm start trains those four tokens, which GRPO's prompts already hold.
Nothing here imports the lesson: the environment and the tool are handed in."""

import random
from typing import NamedTuple

from labkit.wordle_solver import ConsistentSolver


class SolverGame(NamedTuple):
    prompt_text: str  # the user turn: the dataset's prompt and the game's opening text
    turns: list[tuple[str, str]]  # (word guessed, the game's answer)
    won: bool


def solver_games(env, prompt: str, seeds: list[int], words: list[str], seed: int) -> list[SolverGame]:
    """One game per seed against `env` (a WordleEnv: the real game), played by a ConsistentSolver over
    `words`. The solver reads only the text the game answers, as the model does."""
    games = []
    for index, game_seed in enumerate(seeds):
        prompt_text = prompt + env.reset(seed=game_seed)  # TRL appends reset()'s text to the prompt
        solver, turns = ConsistentSolver(words, random.Random(seed * 1_000_003 + index)), []
        while not turns or "The game is over." not in turns[-1][1]:
            word = solver.next_guess()
            answer = env.guess(f"[{word}]")
            solver.read(answer)
            turns.append((word, answer))
        games.append(SolverGame(prompt_text, turns, env.solved))
    return games


def conversation(game: SolverGame, tool_name: str, argument: str) -> list[dict]:
    """The game as chat messages, as TRL's tool loop builds them."""
    messages = [{"role": "user", "content": game.prompt_text}]
    for word, answer in game.turns:
        call = {"type": "function", "function": {"name": tool_name, "arguments": {argument: f"[{word}]"}}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "name": tool_name, "content": answer})
    messages.append({"role": "assistant", "content": ""})  # the game is over: the model ends its turn
    return messages


def conversations_dataset(games: list[SolverGame], tool):
    """SFTTrainer's dataset: the conversations, the tool's JSON schema (what TRL renders from the
    method) and GRPO's chat-template arguments, one row per game."""
    from datasets import Dataset
    from transformers.utils import get_json_schema

    schema = get_json_schema(tool)
    (argument,) = schema["function"]["parameters"]["properties"]
    rows = [
        {
            "messages": conversation(game, tool.__name__, argument),
            "tools": [schema],
            "chat_template_kwargs": {"enable_thinking": False},
        }
        for game in games
    ]
    return Dataset.from_list(rows)


def masked_counts(train_dataset, tokenizer) -> tuple[int, int]:
    """(assistant tokens trained, tool-response tokens masked) in SFTTrainer's tokenized dataset, whose
    `labels` are -100 where the loss weighs 0. A tool-response token with a label would be the game's
    text trained on: that stops the run."""
    from labkit.trl_glue import require

    require("labels" in train_dataset.column_names, "TRL's SFTTrainer no longer builds `labels` in its dataset.")
    opening, closing = tokenizer.convert_tokens_to_ids(["<tool_response>", "</tool_response>"])
    trained = masked = 0
    for ids, labels in zip(train_dataset["input_ids"], train_dataset["labels"], strict=True):
        trained += sum(label != -100 for label in labels)
        inside = False
        for token, label in zip(ids, labels, strict=True):
            inside = inside or token == opening
            if inside:
                if label != -100:
                    raise ValueError("a token of the game's answer has loss weight 1: observation masking failed")
                masked += 1
            inside = inside and token != closing
    return trained, masked


def sft_trainer_class(on_gpu: bool):
    """TRL's SFTTrainer; on a CPU, with its loss computed where the labels are, through a plain matmul.

    Why not TRL's own on a CPU: SFTTrainer scores tokens through TRL's fused LM head, which on a GPU runs
    Triton kernels and on a CPU falls back to a loop of float32 tiles over the whole vocabulary, with
    entropy and top-1 metrics. On the tiny model's 151,936-token vocabulary that took about 20 s a game
    here (measured, TRL 1.16, 2 loaded cores), where the same loss from logits kept at the labelled
    positions (transformers' `logits_to_keep`) takes well under a second: the tiny rehearsal's 120 steps
    would take an hour instead of a minute or two. The data pipeline (chat template, tools, the
    assistant-only labels) stays TRL's; the loss is the same negative log-likelihood."""
    from trl import SFTTrainer

    if on_gpu:
        return SFTTrainer

    class CpuLossSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            import torch

            labels = inputs["labels"][:, 1:]  # each position predicts the next token
            keep = (labels[0] != -100).nonzero().squeeze(-1)  # one game a pass: sft_config's batch of 1
            forward = {key: value for key, value in inputs.items() if key != "labels"}
            outputs = model(**forward, use_cache=False, logits_to_keep=keep)
            total = torch.nn.functional.cross_entropy(outputs.logits[0].float(), labels[0, keep], reduction="sum")
            loss = total / (num_items_in_batch if num_items_in_batch is not None else max(1, len(keep)))
            return (loss, outputs) if return_outputs else loss

    return CpuLossSFTTrainer


def train_warm_start(model, tokenizer, games: list[SolverGame], tool, sft_config) -> dict:
    """SFT of `model` (a PeftModel: its adapter is trained in place, the very adapter GRPO trains next)
    on the solver's games. Returns the figures of the `warm start:` line."""
    import torch

    # SFTTrainer patches the model's fused LM head at temperature 1 over the one GRPOTrainer patched at
    # GRPO's temperature (trl/trainer/utils.py, add_fused_lm_head: both patch the same base model's
    # forward). Left so, GRPO would score its log-probabilities at 1 while sampling at its own: GRPO's is
    # put back once the stage ends.
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    grpo_forward = base.__dict__.get("forward")
    # transformers turns gradient checkpointing on in train() where a config asks, and never off: had this
    # stage left it on, GRPO would recompute its activations with its own setting false.
    recomputing_before = getattr(base, "is_gradient_checkpointing", False)
    try:
        trainer = sft_trainer_class(torch.cuda.is_available() and not sft_config.use_cpu)(
            model=model, args=sft_config, train_dataset=conversations_dataset(games, tool), processing_class=tokenizer
        )
        trainer.train()
    finally:
        if grpo_forward is None:
            base.__dict__.pop("forward", None)
        else:
            base.forward = grpo_forward
        if getattr(base, "is_gradient_checkpointing", False) and not recomputing_before:
            base.gradient_checkpointing_disable()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    trained, masked = masked_counts(trainer.train_dataset, tokenizer)
    return {
        "games": len(games),
        "won": sum(game.won for game in games),
        "steps": trainer.state.global_step,
        "loss": losses[-1] if losses else float("nan"),
        "trained_tokens": trained,
        "masked_tokens": masked,
    }


def warm_start_line(figures: dict) -> str:
    return (
        f"warm start: {figures['games']} solver games ({figures['won']} won), {figures['steps']} steps, final loss "
        f"{figures['loss']:.3f}, {figures['trained_tokens']} assistant tokens trained, "
        f"{figures['masked_tokens']} tool tokens masked"
    ) + (" (finished before the resume: its adapter loaded, not trained again)" if figures.get("resumed") else "")


WARM_START_FOLDER = "warm-start"  # in the run's output_dir: the adapter after stage 1, and its figures
FIGURES_FILE = "warm_start.json"


def finished_warm_start(output_dir: str) -> str | None:
    """The folder of the warm start a run in `output_dir` finished (its figures written last), or None."""
    import os

    folder = os.path.join(output_dir, WARM_START_FOLDER)
    return folder if os.path.exists(os.path.join(folder, FIGURES_FILE)) else None


def sft_config(args, settings, output_dir: str):
    """SFTConfig for stage 1: the warm start's own steps, batch, learning rate and gradient checkpointing;
    where it runs and how (precision, seed, logging) are the GRPO stage's."""
    from trl import SFTConfig

    from labkit.trl_glue import current_names

    return SFTConfig(
        output_dir=output_dir,
        max_steps=settings.warm_start_steps,
        learning_rate=settings.warm_start_learning_rate,
        per_device_train_batch_size=1,  # one game a pass, as GRPO's recipe: the longest game fits any card
        gradient_accumulation_steps=settings.warm_start_batch,
        assistant_only_loss=True,  # the game's text, like the prompt, weighs 0
        max_length=None,  # whole games: none is cut
        seed=args.seed,
        bf16=args.bf16,
        use_cpu=args.use_cpu,
        logging_steps=1,
        save_strategy="no",  # stage 1 is short: its adapter is saved once, at its end
        report_to=args.report_to,
        disable_tqdm=args.disable_tqdm,
        **current_names({"gradient_checkpointing": settings.warm_start_gradient_checkpointing}),
    )


def run_stage(trainer, games: list[SolverGame], tool, settings, args) -> dict:
    """Stage 1 on the GRPO trainer's own model, so that GRPO goes on from the adapter it leaves. A
    resumed run whose warm start finished loads that adapter instead of training it again."""
    import json
    import os

    from labkit.trl_glue import require

    folder = os.path.join(args.output_dir, WARM_START_FOLDER)
    model = trainer.model
    if settings.resume and finished_warm_start(args.output_dir):
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(model, load_file(os.path.join(folder, "adapter_model.safetensors")))
        with open(os.path.join(folder, FIGURES_FILE), encoding="utf-8") as file:
            figures = {**json.load(file), "resumed": True}
    else:
        figures = train_warm_start(model, trainer.processing_class, games, tool, sft_config(args, settings, folder))
        if trainer.accelerator.is_main_process:
            model.save_pretrained(folder)
            with open(os.path.join(folder, FIGURES_FILE), "w", encoding="utf-8") as file:
                json.dump(figures, file)
    model.train(False)  # TRL's evaluation sets the mode it needs; the SFT stage left train mode on
    if args.use_vllm:
        # vLLM holds the weights of its last sync, made before this stage, at step 0; TRL syncs again
        # only when the step has moved. Its private marker is reset so that the next generation syncs.
        require(
            hasattr(trainer, "_last_loaded_step"),
            "TRL's GRPOTrainer no longer has _last_loaded_step, which tells it when to sync vLLM's weights: "
            "the warm-started adapter would not reach vLLM.",
        )
        trainer._last_loaded_step = -1
    return figures
