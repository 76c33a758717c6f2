"""trl_on_cpu.py, the rehearsal: its pieces, WordleEnv driven through TRL's trainer, and --rehearse itself."""

import re

import pytest
import textarena_double
import torch
from conftest import run_script

import env_rollout
from env_rollout import LOGGED_METRICS, GuessEnv, SmokeFailure, WordleEnv
from labkit import wordle_sessions
from labkit.trl_glue import build_grpo_trainer
from trl_on_cpu import (
    build_tiny_model,
    build_tiny_tokenizer,
    check_tool_mask_on_batch,
    expected_tool_mask,
    format_example,
    rehearsal_config,
    tool_response_ids,
)

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer(0)


def test_mask_rebuilt_from_recorded_turns():
    prompt = [1, 2]
    turns = [([1, 2], [3, 4]), ([1, 2, 3, 4, 9, 9], [5, 6]), ([1, 2], [7])]  # the last: a sibling rollout
    assert expected_tool_mask(prompt, [3, 4, 9, 9, 5, 6], turns) == [1, 1, 0, 0, 1, 1]
    assert expected_tool_mask(prompt, [3, 4, 9, 9, 5], turns) == [1, 1, 0, 0, 1]  # truncated last turn
    assert expected_tool_mask(prompt, [3, 4, 8, 8, 5, 6], turns) is None  # a token nobody generated


def test_mask_check_fails_when_an_inserted_token_is_trained():
    batch = {
        "prompt_ids": torch.tensor([[0, 1, 2]]),
        "prompt_mask": torch.tensor([[0, 1, 1]]),
        "completion_ids": torch.tensor([[3, 4, 9, 9, 5, 6, 0]]),
        "completion_mask": torch.tensor([[1, 1, 1, 1, 1, 1, 0]]),
        "tool_mask": torch.tensor([[1, 1, 0, 1, 1, 1, 1]]),
    }
    turns = [([1, 2], [3, 4]), ([1, 2, 3, 4, 9, 9], [5, 6])]
    with pytest.raises(SmokeFailure, match="tool_mask"):
        check_tool_mask_on_batch(batch, turns)
    batch["tool_mask"][0, 3] = 0
    assert check_tool_mask_on_batch(batch, turns) == (2, 4)


def test_tokenizer_knows_qwen3_special_tokens_and_template(tokenizer):
    for token in ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "<think>"]:
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.padding_side == "left"
    suffix = tokenizer.decode(tool_response_ids(tokenizer, "guess", "higher"))
    assert (
        suffix
        == "\n<|im_start|>user\n<tool_response>\nhigher\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_warm_start_examples_weigh_only_what_the_model_writes(tokenizer):
    import random

    ids, weights = format_example(tokenizer, random.Random(0))
    assert len(ids) == len(weights)
    trained = tokenizer.decode([t for t, w in zip(ids, weights, strict=True) if w])
    masked = tokenizer.decode([t for t, w in zip(ids, weights, strict=True) if not w])
    assert '"name": "guess"' in trained and "<tool_response>" not in trained
    assert "<tool_response>" in masked and "secret whole number" in masked


def test_the_rehearsal_runs_fulls_recipe_on_a_cpu_at_its_own_scale(tmp_path):
    """rehearsal_config: recipes/wordle_grpo.yaml where the CPU modes run it (recipes/cpu.yaml), then
    recipes/rehearse.yaml; the flags over them, in TRL's spelling or the rehearsal's own (--rehearse-steps)."""
    _, config = rehearsal_config(
        "--seed", "3", "--rehearse-steps", "2", "--learning-rate", "2e-4", "--num_generations", "2",
        "--max-completion-length=64", "--output_dir", str(tmp_path),
    )  # fmt: skip
    assert (config.output_dir, config.seed, config.max_steps, config.learning_rate) == (str(tmp_path), 3, 2, 2e-4)
    assert (config.num_generations, config.max_completion_length) == (2, 64)
    assert (config.per_device_train_batch_size, config.gradient_accumulation_steps) == (8, 1)  # one batch a step
    assert (config.use_cpu, config.bf16, config.use_vllm, config.save_strategy) == (True, False, False, "no")
    assert config.chat_template_kwargs == {"enable_thinking": False} and config.max_tool_calling_iterations == 8
    assert config.reward_weights == [0.0] * len(LOGGED_METRICS)  # --full's logged metrics, weighed 0


def test_wordle_env_through_trl_for_one_step(monkeypatch, tokenizer, tmp_path):
    """WordleEnv (on the client double) driven by TRL's real tool loop and update; only the text the
    policy writes is scripted: half the rollouts guess the secret, half guess wrong."""
    from trl import GRPOTrainer

    monkeypatch.setattr(wordle_sessions, "SERVER_BACKOFF_S", 0.01)
    server = textarena_double.install(monkeypatch)
    tool_response = tokenizer.convert_tokens_to_ids("<tool_response>")

    def call(word):
        text = f'<tool_call>\n{{"name": "guess", "arguments": {{"guess": "[{word}]"}}}}\n</tool_call><|im_end|>'
        return tokenizer.encode(text, add_special_tokens=False)

    class ScriptedPolicy(GRPOTrainer):
        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            outputs = []
            for index, ids in enumerate(prompt_ids):
                if tool_response in ids:  # after the tool's answer: stop
                    outputs.append(tokenizer.encode("Thanks.<|im_end|>", add_special_tokens=False))
                else:
                    outputs.append(call("plant" if index % 2 == 0 else "crane"))
            return outputs, None

    from datasets import Dataset

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": env_rollout.WORDLE_PROMPT}]}] * 8)
    _, config = rehearsal_config("--max_steps", "1", "--num_generations", "2", "--output_dir", str(tmp_path))
    trainer = build_grpo_trainer(
        config,
        build_tiny_model(tokenizer),
        dataset,
        lambda: WordleEnv("http://wordle.test"),
        metrics=LOGGED_METRICS,
        processing_class=tokenizer,
        trainer_class=ScriptedPolicy,
    )
    trainer.train()
    logged = next(entry for entry in trainer.state.log_history if "tools/call_frequency" in entry)
    assert logged["tools/call_frequency"] == 1.0 and logged["tools/failure_frequency"] == 0.0
    assert logged["rewards/WordleEnv/mean"] == 0.5
    assert logged["rewards/solve_rate/mean"] == 0.5 and logged["rewards/invalid_move_rate/mean"] == 0.0
    assert server.resets == 8 and server.open_sessions == 8  # one session per pooled instance, re-used


@pytest.mark.slow
def test_rehearse_end_to_end():
    result = run_script("--rehearse", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    match = re.search(
        r"^rehearsal ok: steps=(\d+) tool_calls=(\d+) masked_tokens=(\d+) trained_tokens=(\d+)$", result.stdout, re.M
    )
    assert match, result.stdout
    steps, tool_calls, masked, trained = map(int, match.groups())
    assert steps == 4 and tool_calls > 0 and masked > 0 and trained > 0


def test_guess_env_is_a_valid_environment_factory(tokenizer, tmp_path):
    # TRL's constructor probes the factory: reset, the guess tool, get_reward as the reward source.
    from datasets import Dataset

    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": ""}], "seed": 0}] * 8)
    trainer = build_grpo_trainer(
        rehearsal_config("--max_steps", "1", "--output_dir", str(tmp_path))[1],
        build_tiny_model(tokenizer),
        dataset,
        GuessEnv,
        metrics=LOGGED_METRICS,
        processing_class=tokenizer,
    )
    assert [tool.__name__ for tool in trainer.tools] == ["guess"]
    assert trainer.reward_func_names[-1] == "GuessEnv"
    assert trainer.reward_weights.tolist() == [0.0] * len(LOGGED_METRICS) + [1.0]
