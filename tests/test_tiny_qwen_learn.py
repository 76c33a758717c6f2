"""tiny_qwen.py, --learn's pieces (the short-episode tokenizer, the thermometer embeddings, the sampled
evaluation, the cached tool suffix) and the mode itself."""

import os
import random
import re

import pytest
import torch
from conftest import run_script

from env_rollout import (
    EVAL_FIRST_SEED,
    GuessEnv,
    binary_search_guess,
    build_grpo_trainer,
    success_rate,
    update_belief,
)
from tiny_qwen import (
    LearnConfig,
    build_tiny_model,
    build_tiny_tokenizer,
    first_tool_call,
    format_example,
    guess_call_text,
    guess_dataset,
    learn_config,
    learn_tokenizer,
    learning_trainer_class,
    recording_trainer_class,
    render_prompt_ids,
    sampled_success,
    thermometer_number_embeddings,
    three_guess_tokens,
    warm_start,
)

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def tokenizer():
    return learn_tokenizer(0)


def test_learn_tokenizer_shortens_episodes_and_keeps_the_text(tokenizer):
    plain = build_tiny_tokenizer(0)
    assert three_guess_tokens(tokenizer) == 16 < 100 < three_guess_tokens(plain)
    call = tokenizer.encode(guess_call_text(5), add_special_tokens=False)
    assert len(call) == 4 and tokenizer.decode(call[1:2]) == "5" and call[-1] == tokenizer.eos_token_id
    ids, _ = format_example(tokenizer, random.Random(1))
    text = tokenizer.decode(ids)
    assert tokenizer.encode(text, add_special_tokens=False) == ids  # rendering then encoding: same tokens
    assert plain.decode(plain.encode(text, add_special_tokens=False)) == text  # the same text as before


def test_thermometer_embeddings_order_the_numbers(tokenizer):
    model = build_tiny_model(tokenizer)
    thermometer_number_embeddings(model, tokenizer, 8)
    embeddings = model.get_input_embeddings().weight[:, :7]
    number = {k: embeddings[tokenizer.convert_tokens_to_ids(str(k))] for k in range(1, 9)}
    assert number[1].tolist() == [-1.0] * 7 and number[8].tolist() == [1.0] * 7
    assert number[5].tolist() == [1.0] * 4 + [-1.0] * 3
    assert torch.dist(number[4], number[5]) < torch.dist(number[1], number[8])


def test_first_tool_call_reads_qwen3_calls():
    assert first_tool_call(guess_call_text(3).removesuffix("<|im_end|>")) == ("guess", {"value": 3})
    assert first_tool_call("Done.") is None
    with pytest.raises(ValueError):
        first_tool_call("<tool_call>\nnot json\n</tool_call>")
    with pytest.raises(ValueError):
        first_tool_call('<tool_call>\n{"name": "guess", "arguments": 3}\n</tool_call>')


class ScriptedModel:
    """Stands in for the language model in sampled_success: writes `turn(history_text)` as its turn."""

    def __init__(self, tokenizer, turn):
        self.tokenizer, self.turn, self.turns_written = tokenizer, turn, 0

    def eval(self):
        return self

    def generate(self, input_ids, attention_mask, max_new_tokens, pad_token_id, **kwargs):
        rows = []
        for ids, mask in zip(input_ids, attention_mask, strict=True):
            history = self.tokenizer.decode(ids[mask.bool()].tolist())
            rows.append(self.tokenizer.encode(self.turn(history), add_special_tokens=False)[:max_new_tokens])
            self.turns_written += 1
        width = max(len(row) for row in rows)
        new = torch.tensor([row + [pad_token_id] * (width - len(row)) for row in rows])
        return torch.cat([input_ids, new], dim=1)


def binary_search_turn(history: str) -> str:
    belief = (1, 8)
    guesses = re.findall(r'"value": (\d+)', history)
    feedback = re.findall(r"<tool_response>\n(\w+)\n</tool_response>", history)
    for guess, word in zip(guesses, feedback, strict=True):
        belief = update_belief(belief, int(guess), word)
    return guess_call_text(binary_search_guess(belief))


def test_sampled_success_counts_what_the_environment_says(tokenizer):
    scripted = ScriptedModel(tokenizer, binary_search_turn)
    expected = success_rate(GuessEnv(), binary_search_guess, 120, EVAL_FIRST_SEED)
    assert sampled_success(scripted, tokenizer, 120, EVAL_FIRST_SEED) == (expected, 0.0)
    assert 0.8 < expected < 0.95


@pytest.mark.parametrize(
    "turn, malformed_per_episode",
    [
        ("Done.<|im_end|>", 0.0),  # ends the episode without a call: unsolved, not malformed
        ("<tool_call>\nnot json\n</tool_call><|im_end|>", 1.0),  # unreadable: TRL sees no call, the episode ends
        (guess_call_text(9), 3.0),  # out of range: refused with an error, no turn spent, 3 rounds
    ],
)
def test_sampled_success_reports_malformed_calls_separately(tokenizer, turn, malformed_per_episode):
    scripted = ScriptedModel(tokenizer, lambda history: turn)
    assert sampled_success(scripted, tokenizer, 100, EVAL_FIRST_SEED) == (0.0, malformed_per_episode)


def test_grpo_with_the_learn_tokenizer_keeps_observation_masking_exact(tokenizer, tmp_path):
    """Two GRPO steps through TRL with the merged tokens: tool_mask is checked on every batch, and
    the cached tool suffix gives the tokens TRL itself computes."""
    from trl import GRPOTrainer

    model = build_tiny_model(tokenizer)
    thermometer_number_embeddings(model, tokenizer, 8)
    warm_start(model, tokenizer, steps=60, batch=32, closing="")
    dataset = guess_dataset(8)
    config = learn_config(LearnConfig(learn_steps=2, learn_prompts=4), str(tmp_path))

    class Checked(learning_trainer_class(), recording_trainer_class()):
        pass

    trainer = build_grpo_trainer(config, model, dataset, GuessEnv, processing_class=tokenizer, trainer_class=Checked)
    trainer.mask_counts = []
    trainer.train()
    assert len(trainer.mask_counts) == 2 and all(masked > 0 and trained > 0 for masked, trained in trainer.mask_counts)
    messages = [{"role": "tool", "name": "guess", "content": "higher"}]
    cached = trainer._get_tool_suffix_ids(messages)
    assert cached == trainer._get_tool_suffix_ids(messages) == GRPOTrainer._get_tool_suffix_ids(trainer, messages)
    assert tokenizer.decode(cached).startswith("\n<|im_start|>user\n<tool_response>\nhigher\n")
    prompt_ids = render_prompt_ids(tokenizer, GuessEnv().reset())
    turn = tokenizer.encode(guess_call_text(4), add_special_tokens=False)
    remembered = [trainer._tokenizer.parse_response(turn, prefix=prompt_ids) for _ in range(2)]
    assert remembered[0] == remembered[1] == type(tokenizer).parse_response(tokenizer, turn, prefix=prompt_ids)
    assert remembered[0] is not remembered[1]  # a copy each time: TRL edits what it gets back
    assert remembered[0]["tool_calls"][0]["function"] == {"name": "guess", "arguments": {"value": 4}}


def test_learn_end_to_end_at_toy_size(tmp_path):
    plot = tmp_path / "curve.png"
    result = run_script(
        "--learn", "--learn-steps", "2", "--learn-prompts", "2", "--learn-eval-episodes", "100", "--plot", str(plot)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = re.search(
        r"^tiny model success before=(\d\.\d{3}) after=(\d\.\d{3}) \(optimum 0\.875, random 0\.330\)$",
        result.stdout,
        re.M,
    )
    assert line, result.stdout
    assert all(0.0 <= float(rate) <= 1.0 for rate in line.groups())
    assert re.search(r"^malformed tool calls per episode before=\d\.\d{3} after=\d\.\d{3}$", result.stdout, re.M)
    assert "a 3-guess episode is 16 tokens" in result.stdout
    assert os.path.getsize(plot) > 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--learn", "--learn-eval-episodes", "50"], "must be a whole number >= 100"),
        (["--learn", "--learn-steps", "0"], "must be a whole number >= 1"),
        (["--smoke", "--learn-prompts", "4"], "--learn-prompts belongs to --learn, not --smoke"),
        (["--rehearse", "--plot", "x.png"], "--plot belongs to --smoke and --learn, not --rehearse"),
    ],
)
def test_learn_flags_are_checked(argv, message):
    result = run_script(*argv, timeout=60)
    assert result.returncode == 2 and message in result.stderr
