"""labkit/wordle_solver.py and labkit/warm_start.py: the fair solver and the warm start's games,
against the real game (the kit's TextArena Wordle), and the conversations SFTTrainer learns from."""

import random

import pytest

pytest.importorskip("textarena_env", reason="the real Wordle is not installed (make test installs it from the kit)")

import env_rollout  # noqa: E402
from labkit import warm_start, wordle_sessions  # noqa: E402
from labkit.wordle_solver import ConsistentSolver, read_feedback, wordle_marks  # noqa: E402


@pytest.fixture(scope="module")
def training_words():
    every = wordle_sessions.wordle_words()
    return every, [word for word in wordle_sessions.wordle_guess_words() if not env_rollout.held_out(word)]


def test_marks_are_the_games_own(training_words):
    """The solver's marks for a guess are the real game's, repeated letters included."""
    every, _ = training_words
    env = env_rollout.WordleEnv("local")
    rng = random.Random(0)
    for seed in range(40):
        env.reset(seed=seed)
        secret = wordle_sessions.secret_word(seed, every)
        guess = rng.choice(["eerie", "llama", "crane", "sassy", "geese", secret])
        answer = env.guess(f"[{guess}]")
        if "You submitted" in answer:
            assert read_feedback(answer) == (guess, wordle_marks(guess, secret))


class HiddenSecretGame:
    """A game whose secret lives in a closure: the solver can only read the text it answers."""

    def __init__(self, secret: str):
        def answer(word: str) -> str:
            marks = wordle_marks(word, secret)
            return f"You submitted [{word}].\nFeedback:\n{' '.join(word.upper())}\n{' '.join(marks)}\n"

        self.answer = answer


def test_the_solver_wins_from_the_text_alone(training_words):
    _, words = training_words
    rng = random.Random(1)
    won = 0
    for game_index in range(60):
        game = HiddenSecretGame(rng.choice(words))
        solver = ConsistentSolver(words, random.Random(game_index))
        for _ in range(12):
            word = solver.next_guess()
            answer = game.answer(word)
            if wordle_marks(word, word) == read_feedback(answer)[1]:  # all G: found
                won += 1
                break
            solver.read(answer)
    assert won == 60  # with twelve guesses and the text alone, the consistent set always closes in


def test_solver_games_use_training_words_only_and_some_are_lost(training_words):
    every, words = training_words
    seeds = env_rollout.wordle_dataset(120, seed=3, words=every)["seed"]
    games = warm_start.solver_games(env_rollout.WordleEnv("local"), env_rollout.WORDLE_PROMPT, seeds, words, seed=3)
    held = {word for word in every if env_rollout.held_out(word)}
    assert held  # the evaluation keeps some words
    for game, seed in zip(games, seeds, strict=True):
        assert wordle_sessions.secret_word(seed, every) not in held
        assert not {word for word, _ in game.turns} & held  # nor does the solver ever guess one
        assert game.prompt_text.startswith(env_rollout.WORDLE_PROMPT) and "Wordle" in game.prompt_text
        assert "The game is over." in game.turns[-1][1] and len(game.turns) <= 6
    won = sum(game.won for game in games)
    assert 0 < won < len(games), won  # the solver is good, not perfect: its losses are in the data too


def test_the_conversations_render_as_grpo_prompts_them(training_words):
    from labkit import trl_glue
    from labkit.offline_tokenizers import qwen3_tokenizer

    every, words = training_words
    env = env_rollout.WordleEnv("local")
    seeds = env_rollout.wordle_dataset(2, seed=0, words=every)["seed"]
    games = warm_start.solver_games(env, env_rollout.WORDLE_PROMPT, seeds, words, seed=0)
    dataset = warm_start.conversations_dataset(games, env.guess)
    tokenizer = qwen3_tokenizer()
    row = dataset[0]
    ids = tokenizer.apply_chat_template(
        row["messages"],
        tools=row["tools"],
        chat_template=trl_glue.training_chat_template(tokenizer),
        tokenize=True,
        return_dict=False,
        **row["chat_template_kwargs"],
    )
    prompt = trl_glue.render_prompt_ids(tokenizer, games[0].prompt_text, env.guess)  # as GRPO renders it
    assert ids[: len(prompt)] == prompt
    word, answer = games[0].turns[0]
    call = trl_glue.qwen3_tool_call("guess", {"guess": f"[{word}]"})
    text = tokenizer.decode(ids[len(prompt) :])
    assert text.startswith(call) and f"<tool_response>\n{answer}\n</tool_response>" in text
    assert row["messages"][-1] == {"role": "assistant", "content": "", "tool_calls": None, "name": None}


def test_the_warm_start_without_gradient_checkpointing_trains_the_same_adapter(training_words, tmp_path):
    """warm_start_gradient_checkpointing false (the SmolLM2 recipe's) keeps a game's activations for the
    backward instead of recomputing them: a speed-up only, so it trains the very adapter that gradient
    checkpointing trains (LoRA dropout included: the recomputation replays the same random masks). And
    the stage leaves checkpointing as it found it: off here, as GRPO's own setting false would want it."""
    pytest.importorskip("trl")
    import torch
    from peft import LoraConfig, get_peft_model
    from trl import GRPOConfig

    from labkit import trl_glue
    from labkit.offline_tokenizers import qwen3_tokenizer
    from trl_on_cpu import TINY_WORDLE_QWEN3, build_tiny_model

    every, words = training_words
    env = env_rollout.WordleEnv("local")
    seeds = env_rollout.wordle_dataset(2, seed=0, words=every)["seed"]
    games = warm_start.solver_games(env, env_rollout.WORDLE_PROMPT, seeds, words, seed=0)
    tokenizer = qwen3_tokenizer()
    tokenizer.chat_template = trl_glue.training_chat_template(tokenizer)
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to="none", disable_tqdm=True)
    trained = {}
    for recomputing in (True, False):
        settings = env_rollout.WordleSettings(
            warm_start_steps=2,
            warm_start_batch=1,
            warm_start_learning_rate=1e-2,
            warm_start_gradient_checkpointing=recomputing,
        )
        lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.05, target_modules="all-linear")
        model = get_peft_model(build_tiny_model(tokenizer, 0, **TINY_WORDLE_QWEN3), lora)
        enabled, enable = [], model.get_base_model().gradient_checkpointing_enable
        model.gradient_checkpointing_enable = lambda *a, _on=enabled, _enable=enable, **k: (
            _on.append(1) or _enable(*a, **k)
        )
        config = warm_start.sft_config(args, settings, str(tmp_path / f"recomputing-{recomputing}"))
        figures = warm_start.train_warm_start(model, tokenizer, games, env.guess, config)
        assert bool(enabled) is recomputing  # the setting reached the trainer
        assert model.get_base_model().is_gradient_checkpointing is False  # and left as found
        adapter = {name: value.detach().clone() for name, value in model.named_parameters() if "lora_" in name}
        trained[recomputing] = figures["loss"], adapter
    (loss_recomputed, recomputed), (loss_kept, kept) = trained[True], trained[False]
    assert loss_recomputed == loss_kept
    assert recomputed.keys() == kept.keys() and len(kept) > 0
    assert all(torch.equal(recomputed[name], kept[name]) for name in kept)
    assert any(not torch.equal(kept[name], torch.zeros_like(kept[name])) for name in kept if "lora_B" in name)
