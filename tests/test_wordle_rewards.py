"""The reward terms that see progress short of a win (env_rollout section 6: greens, yellows,
fresh_guesses, with valid_guesses), on real games of TextArena's Wordle; the --reward switch, what the
dry run prints of it at every scale, and the figure of a run's GRPO steps."""

import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT, real_game_missing, run_cli

import env_rollout
from env_rollout import WordleEnv, fresh_guesses, greens, valid_guesses, yellows
from labkit import plots, recipes
from labkit.wordle_sessions import secret_word, wordle_guess_words, wordle_words

REAL_GAME = real_game_missing()
needs_the_game = pytest.mark.skipif(REAL_GAME is not None, reason=REAL_GAME or "")

SEED = 5  # any seed: the tests read its secret word and pick guesses against it


def marks(guess: str, secret: str) -> str:
    """Wordle's marks, written here from the rules, to check what the lab reads from the game's text:
    greens first, then yellows for each letter the secret still has unmatched."""
    result, left = ["X"] * 5, [s for g, s in zip(guess, secret, strict=True) if g != s]
    for i, (g, s) in enumerate(zip(guess, secret, strict=True)):
        if g == s:
            result[i] = "G"
        elif g in left:
            result[i] = "Y"
            left.remove(g)
    return "".join(result)


def terms(env) -> dict:
    return {f.__name__: f([env])[0] for f in (greens, yellows, fresh_guesses, valid_guesses)}


def paid_for(marks: str, fresh: float, valid: float) -> dict:
    """What the progress terms should read for a game whose latest valid guess got `marks`."""
    return {
        "greens": marks.count("G") / 5,
        "yellows": marks.count("Y") / 5,
        "fresh_guesses": fresh,
        "valid_guesses": valid,
    }


@pytest.fixture(scope="module")
def game():
    env = WordleEnv("local")
    secret = secret_word(SEED, wordle_words())
    # Valid guesses that miss the secret, the first two with marks of both kinds where the list allows.
    words = [w for w in wordle_guess_words() if w != secret]
    misses = sorted(words, key=lambda w: (-marks(w, secret).count("G"), -marks(w, secret).count("Y")))
    return env, secret, misses


@needs_the_game
def test_a_win_pays_every_green_and_the_game_reward(game):
    env, secret, misses = game
    env.reset(seed=SEED)
    env.guess(f"[{misses[0]}]")
    env.guess(f"[{secret}]")
    assert env.solved and env.get_reward() == 1.0
    assert terms(env) == paid_for("GGGGG", fresh=1.0, valid=2.0)


@needs_the_game
def test_a_loss_at_the_limit_pays_the_marks_of_the_last_guess(game):
    env, secret, misses = game
    env.reset(seed=SEED)
    for word in misses[:6]:
        env.guess(f"[{word}]")
    last = marks(misses[5], secret)
    assert 0 < env.get_reward() < 1.0 and not env.solved  # TextArena's partial credit
    assert env.latest_marks == last
    assert terms(env) == paid_for(last, fresh=1.0, valid=6.0)


@needs_the_game
def test_a_loss_on_invalid_moves_keeps_the_marks_of_the_last_valid_guess(game):
    env, secret, misses = game
    env.reset(seed=SEED)
    env.guess(f"[{misses[0]}]")
    env.guess("[zzzzz]")
    env.guess("[qqqqq]")  # a second invalid move in a row ends the game
    first = marks(misses[0], secret)
    assert env.get_reward() == 0.0 and env.invalid_moves == 2
    assert first.count("G") + first.count("Y") > 0  # the test's guess has marks to keep
    assert terms(env) == paid_for(first, fresh=1.0, valid=1.0)


@needs_the_game
def test_a_repeated_guess_is_an_invalid_move_and_lowers_fresh_guesses(game):
    env, _, misses = game
    env.reset(seed=SEED)
    env.guess(f"[{misses[0]}]")
    env.guess(f"[{misses[0].upper()}]")  # the same word, in capitals: still a repeat
    env.guess(f"[{misses[1]}]")
    assert env.invalid_moves == 1 and env.repeated_guesses == 1
    assert terms(env)["fresh_guesses"] == pytest.approx(2 / 3)
    assert terms(env)["valid_guesses"] == 2.0


@needs_the_game
def test_no_guess_pays_nothing_and_reset_forgets_the_last_game(game):
    env, _, misses = game
    env.reset(seed=SEED)
    env.guess(f"[{misses[0]}]")
    env.reset(seed=SEED)
    assert env.latest_marks == "" and env.repeated_guesses == 0
    assert terms(env) == paid_for("", fresh=0.0, valid=0.0)


def test_the_switch_weighs_the_progress_terms_by_name():
    names = [f.__name__ for f in env_rollout.WORDLE_REWARD_FUNCTIONS]
    assert env_rollout.training_reward_weights("game") == [0.0] * len(names)
    shaped = dict(zip(names, env_rollout.training_reward_weights("shaped"), strict=True))
    assert {name: w for name, w in shaped.items() if w} == env_rollout.SHAPED_REWARD
    # Progress short of a win pays less than a win: a guess's marks at most 0.2 + 0.1, six valid guesses 0.3.
    w = env_rollout.SHAPED_REWARD
    assert w["greens"] + w["yellows"] + w["fresh_guesses"] + 6 * w["valid_guesses"] < 1.0


def dry_run_rewards(*flags: str) -> dict:
    result = run_cli("--full", "--dry-run", *flags)
    assert result.returncode == 0, result.stderr
    return {name: float(value) for name, value in re.findall(r"^reward_weight_(\w+) = (\S+)$", result.stdout, re.M)} | {
        "reward": re.search(r"^reward = (\w+)$", result.stdout, re.M)[1]
    }


@pytest.mark.parametrize(
    ("flags", "reward"),
    [
        ((), "game"),
        (("--tiny",), "game"),
        (("--smollm2",), "shaped"),
        (("--smollm2", "--reward", "game"), "game"),
        (("--tiny", "--reward", "shaped"), "shaped"),
        (("--tier", "t2", "--reward", "shaped"), "shaped"),
    ],
)
def test_the_dry_run_prints_each_reward_function_with_its_weight_at_every_scale(flags, reward):
    shown = dry_run_rewards(*flags)
    assert shown.pop("reward") == reward
    assert shown.pop("get_reward") == 1.0  # the game's own, which TRL adds with weight 1
    names = [f.__name__ for f in env_rollout.WORDLE_REWARD_FUNCTIONS]
    assert list(shown) == names
    assert list(shown.values()) == env_rollout.training_reward_weights(reward)


def test_reward_weights_given_must_weigh_every_function_and_clash_with_reward():
    result = run_cli("--full", "--dry-run", "--reward_weights", "0", "0", "0", "0.1", "0", "0")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert re.fullmatch(
        r"--reward_weights takes 9 weights, one per reward function \(solve_rate .* fresh_guesses\), got 6;.*\n",
        result.stderr,
    )
    weights = ["0", "0", "0", "0.1", "0", "0", "0", "0", "0"]
    assert dry_run_rewards("--smollm2", "--reward_weights", *weights)["valid_guesses"] == 0.1
    with pytest.raises(recipes.RecipeError, match="--reward and --reward_weights both"):
        recipes.parse_full(["--reward", "shaped", "--reward_weights", *weights], env_rollout.WordleSettings)


def test_the_figure_of_the_grpo_steps_is_drawn_from_trls_log(tmp_path):
    log = [{"eval_rewards/solve_rate/mean": 0.0, "step": 0}]  # an evaluation's entry: not a GRPO step
    log += [
        {
            "step": step,
            "reward": 0.1 * step,
            "frac_reward_zero_std": 0.5,
            "rewards/invalid_move_rate/mean": 0.8,
            "rewards/valid_guesses/mean": 1.0 + step,
        }
        for step in (1, 2, 3)
    ]
    path = tmp_path / "steps.png"
    assert plots.plot_grpo_steps(str(path), log, "a title") == 3
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    line = env_rollout.grpo_steps_figure(log, str(tmp_path), "a title")
    assert line.endswith(str(tmp_path / plots.GRPO_STEPS_FIGURE)) and "of the 3 GRPO steps" in line


def test_the_grpo_steps_read_as_text_from_the_run_and_again_from_its_checkpoint(tmp_path):
    log = [{"eval_rewards/solve_rate/mean": 0.0, "step": 0}]  # an evaluation's entry: not a GRPO step
    log += [{"step": 1, "reward": 0.118, "frac_reward_zero_std": 0.5, "grad_norm": 0.11}]
    log += [{"step": 2, "reward": 0.168, "frac_reward_zero_std": 0.0, "grad_norm": 0.167}]
    lines = env_rollout.grpo_step_lines(log, "OUT")
    assert lines[0] == "GRPO steps (python -m labkit.plots OUT reads them again):"
    assert lines[1].split() == ["step", *(label for _, label in plots.GRPO_STEP_COLUMNS)]
    assert lines[2].split()[:4] == ["1", "0.118", "0.500", "0.110"] and lines[2].split()[-1] == "-"
    assert lines[3].split()[:4] == ["2", "0.168", "0.000", "0.167"] and len(lines) == 4
    # A run's folder read back, as a student would after the run (its CPU-scale run/ inside it); a
    # half-written newer checkpoint is passed over.
    for name, state in (("checkpoint-2", {"log_history": log}), ("checkpoint-3", None)):
        checkpoint = tmp_path / "run" / name
        checkpoint.mkdir(parents=True)
        (checkpoint / "adapter_model.safetensors").write_bytes(b"weights")
        (checkpoint / "trainer_state.json").write_text(json.dumps(state) if state else "{", encoding="utf-8")
    read = subprocess.run(
        [sys.executable, "-m", "labkit.plots", str(tmp_path)], capture_output=True, text=True, cwd=ROOT
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == lines[1:]
    empty = subprocess.run([sys.executable, "-m", "labkit.plots", str(tmp_path / "run" / "checkpoint-3")],
                           capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert empty.returncode == 1 and empty.stderr.count("\n") == 1 and "holds no checkpoint" in empty.stderr
