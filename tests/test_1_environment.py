"""Section 1 of env_rollout.py: GuessEnv and its environment_factory contract."""

import inspect

import pytest
from conftest import tool_names

from env_rollout import GuessEnv, success_optimum, success_random


def test_reset_returns_a_prompt_naming_the_range_and_turns():
    prompt = GuessEnv(n=8, max_turns=3).reset(seed=0)
    assert "1 to 8" in prompt and "3 guesses" in prompt and "guess" in prompt


def test_reset_accepts_dataset_columns_as_keywords():
    # TRL calls reset(**row) with every column of the dataset row.
    env = GuessEnv()
    assert isinstance(env.reset(seed=3, prompt=[{"role": "user", "content": "hi"}], extra="x"), str)


def test_feedback_words_and_reward():
    env = GuessEnv(n=8, max_turns=3)
    env.reset(target=5)
    assert env.guess(2) == "higher"
    assert env.get_reward() == 0.0
    assert env.guess(7) == "lower"
    assert env.guess(5) == "correct"
    assert env.get_reward() == 1.0


def test_unsolved_episode_scores_zero_and_the_game_ends():
    env = GuessEnv(n=8, max_turns=2)
    env.reset(target=8)
    env.guess(1)
    env.guess(2)
    assert env.get_reward() == 0.0
    with pytest.raises(ValueError, match="game is over"):
        env.guess(8)
    assert env.get_reward() == 0.0


def test_guess_after_solve_is_game_over():
    env = GuessEnv()
    env.reset(target=4)
    assert env.guess(4) == "correct"
    with pytest.raises(ValueError, match="game is over"):
        env.guess(4)


def test_guess_before_reset_is_a_clear_error():
    with pytest.raises(RuntimeError, match="reset"):
        GuessEnv().guess(3)


@pytest.mark.parametrize("bad", [0, 9, -1, True, False, 2.5, "four", "", "4.5", None, [4], float("nan"), float("inf")])
def test_bad_guess_names_the_range_and_spends_no_turn(bad):
    env = GuessEnv(n=8, max_turns=1)
    env.reset(target=4)
    with pytest.raises(ValueError, match="whole number from 1 to 8"):
        env.guess(bad)
    # No turn was spent: the single allowed guess still works.
    assert env.guess(4) == "correct"


@pytest.mark.parametrize("written", ["4", " 4 ", 4.0, "4.0"])
def test_integral_json_values_are_accepted(written):
    env = GuessEnv()
    env.reset(target=4)
    assert env.guess(written) == "correct"


@pytest.mark.parametrize("kwargs", [{"n": 1}, {"n": 0}, {"n": True}, {"n": 2.0}, {"max_turns": 0}, {"max_turns": "3"}])
def test_bad_construction_is_refused(kwargs):
    with pytest.raises(ValueError):
        GuessEnv(**kwargs)


@pytest.mark.parametrize("seed", ["1", 1.5, True])
def test_bad_seed_is_refused_and_changes_nothing(seed):
    env = GuessEnv()
    env.reset(target=6)
    env.guess(1)
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=seed)
    # The running episode is untouched: one turn spent, target still 6.
    assert env.guess(6) == "correct"


def test_same_seed_same_target_across_instances_and_resets():
    def target_of(env, seed):  # found from the outside, by trying every first guess
        for value in range(1, 9):
            env.reset(seed=seed)
            if env.guess(value) == "correct":
                return value

    a, b = GuessEnv(), GuessEnv()
    targets = [target_of(a, seed) for seed in range(30)]
    assert targets == [target_of(b, seed) for seed in range(30)]
    assert len(set(targets)) > 1  # the seed matters
    assert targets == [target_of(a, seed) for seed in range(30)]  # and replays after other episodes


def test_only_guess_becomes_a_tool():
    # TRL lists the class's public functions other than reset and get_reward as tools.
    assert tool_names(GuessEnv) == ["guess"]
    doc = inspect.getdoc(GuessEnv.guess)
    assert "Args:" in doc and "value:" in doc
    assert inspect.signature(GuessEnv.guess).parameters["value"].annotation is int


def test_reference_figures():
    assert success_optimum(8, 3) == pytest.approx(0.875)
    assert success_random(8, 3) == pytest.approx(0.330, abs=5e-4)
