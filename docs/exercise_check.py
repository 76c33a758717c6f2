"""Checks the coding exercises of docs/exercises.md: one command each, pass or fail with the reason.

    python docs/exercise_check.py advantage my_advantage.py   # exercise 8: the advantage, TRL's way
    python docs/exercise_check.py reward my_reward.py         # exercise 9: a reward that pays for speed

Each first checks your code against the answer on a few cases and prints PASS or FAIL per case, with
what was expected and what yours gave. If every case passes, it then trains the smoke lab's policy
with the lesson's version and with yours (`--smoke`'s settings; seed 0, or `--seeds 0 1 2 ...`) and
prints what changed. Exit status 0 when every case passes, 1 when one fails, 2 for a file it cannot
load.
"""

import argparse
import functools
import importlib.util
import math
import os
import random
import sys
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

import env_rollout  # noqa: E402

LESSON_ENV = env_rollout.GuessEnv  # success is measured on the lesson's own environment


def load(path: str, name: str):
    """The object `name` from the Python file at `path`, or exit 2 with the reason."""
    if not os.path.isfile(path):
        sys.exit(f"exercise_check: no file {path!r} (copy the starter first: the exercise says how)")
    spec = importlib.util.spec_from_file_location("student_exercise", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:
        traceback.print_exc()
        sys.exit(f"exercise_check: {path} raised an error while loading (above)")
    if not hasattr(module, name):
        sys.exit(f"exercise_check: {path} defines no {name!r}: keep the starter's name")
    return getattr(module, name)


def call(function, *args):
    """(result, None), or (None, a one-line description of the exception it raised)."""
    try:
        return function(*args), None
    except Exception as error:  # the student's code: any error is a FAIL with its message
        return None, f"raised {type(error).__name__}: {error}"


def report(results: list[tuple[bool, str]], exercise: str) -> bool:
    for ok, line in results:
        print(("PASS  " if ok else "FAIL  ") + line)
    failed = sum(not ok for ok, _ in results)
    print(f"{exercise}: " + ("pass" if not failed else f"FAIL ({failed} of {len(results)} cases)"))
    return not failed


def smoke_args(**changes):
    return env_rollout.SmokeConfig(**changes)


def train_and_report(label: str, args) -> dict:
    """Train with the current env_rollout functions; success measured on the lesson's own GuessEnv."""
    result = env_rollout.train_tabular_grpo(args)
    env, states = LESSON_ENV(args.n, args.max_turns), result["states"]
    sampler = env_rollout.TabularSampler(result["logits"], states, random.Random(args.seed + 1), args.legal_mask)
    success = env_rollout.success_rate_per_number(env, sampler, args.eval_episodes)
    zero = sum(result["zero_advantage"])
    groups = len(result["zero_advantage"]) * args.prompts
    opening = env_rollout.legal_guess_mask(states, args.n)[states[(1, args.n)]] + result["logits"][states[(1, args.n)]]
    opening_probability = torch.softmax(opening, dim=-1)
    best = int(opening_probability.argmax()) + 1
    print(
        f"  seed {args.seed}  {label}: success after training {success:.3f} (optimum {env_rollout.success_optimum(args.n, args.max_turns):.3f}); "
        f"zero advantage in {zero} of {groups} groups; opening guess {best} "
        f"(probability {float(opening_probability.max()):.2f})"
    )
    return {"success": success, "zero": zero}


# ----------------------------------------------------------------------------------------------------
# Exercise 8: the advantage with the sample standard deviation (TRL's choice)
# ----------------------------------------------------------------------------------------------------


def sample_std_advantages(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    mean = rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, correction=1, keepdim=True)
    return (rewards - mean) / (std + eps)


ADVANTAGE_CASES = [
    ("the smoke's lesson group (G = 8)", [[1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0]]),
    ("one solved rollout in 8", [[0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0]]),
    ("a group that all solved", [[1.0] * 8]),
    ("a group that all failed", [[0.0] * 8]),
    ("G = 2, one solved", [[1.0, 0.0]]),
    ("two groups in one batch (one per row)", [[1.0, 0.0, 0.0, 0.0], [0.5, 1.0, 0.0, 0.5]]),
]


def check_advantage(path: str, seeds: list[int]) -> int:
    theirs = load(path, "advantages")
    results = []
    for name, rows in ADVANTAGE_CASES:
        rewards = torch.tensor(rows)
        expected = sample_std_advantages(rewards)
        got, error = call(theirs, rewards.clone())
        shown = " ".join(f"{value:+.2f}" for value in expected.flatten().tolist())
        if error:
            results.append((False, f"{name}: {error}"))
        elif not isinstance(got, torch.Tensor) or got.shape != rewards.shape:
            what = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            results.append((False, f"{name}: expected a tensor of shape {tuple(rewards.shape)}, got {what}"))
        elif not torch.allclose(got.float(), expected, atol=1e-3):
            mine = " ".join(f"{value:+.2f}" for value in got.float().flatten().tolist())
            lesson = env_rollout.group_advantages(rewards)
            hint = ""
            if torch.allclose(got.float(), lesson, atol=1e-3):
                hint = " (that is the lesson's population std: TRL divides by n - 1)"
            elif torch.isnan(got).any():
                hint = " (a NaN: a group whose rewards are all equal has std 0; eps keeps the division finite)"
            results.append((False, f"{name}: rewards {rows} should give {shown}, yours gave {mine}{hint}"))
        else:
            results.append((True, f"{name}: {shown}"))
    if not report(results, "exercise 8"):
        return 1
    print("training the smoke lab's policy with each advantage:")
    lesson = env_rollout.group_advantages
    for seed in seeds:
        env_rollout.group_advantages = lesson
        train_and_report("lesson (population std)", smoke_args(seed=seed))
        env_rollout.group_advantages = theirs  # train_tabular_grpo calls it by this name
        train_and_report("yours  (sample std)    ", smoke_args(seed=seed))
    return 0


# ----------------------------------------------------------------------------------------------------
# Exercise 9: a reward that pays for speed
# ----------------------------------------------------------------------------------------------------


def speed_reward(turns: int, solved: bool) -> float:
    return round(1.1 - 0.1 * turns, 10) if solved else 0.0


def check_reward(path: str, seeds: list[int]) -> int:
    env_class = load(path, "FastGuessEnv")
    results = []
    env, error = call(env_class)
    if error:
        print(f"FAIL  FastGuessEnv(): {error}\nexercise 9: FAIL (it cannot be built)")
        return 1
    # Binary search on every hidden number: solved at guess 1 (4), 2 (2, 6), 3 (1, 3, 5, 7), or not (8).
    for target in range(1, 9):
        episode, error = call(
            functools.partial(env_rollout.play_episode, env, env_rollout.binary_search_guess, target=target)
        )
        if error:
            results.append((False, f"hidden number {target}, binary search: {error}"))
            continue
        guesses = sum(entry.role == "assistant" for entry in episode.trace)
        solved = episode.trace[-1].text == "correct"
        expected = speed_reward(guesses, solved)
        how = f"solved at guess {guesses}" if solved else f"not solved in {guesses} guesses"
        if not isinstance(episode.reward, float):
            results.append(
                (False, f"hidden number {target} ({how}): get_reward() returned {episode.reward!r}, not a float")
            )
        elif not math.isclose(episode.reward, expected, abs_tol=1e-6):
            results.append(
                (False, f"hidden number {target} ({how}): reward should be {expected:.1f}, yours {episode.reward!r}")
            )
        else:
            results.append((True, f"hidden number {target} ({how}): reward {expected:.1f}"))
    # A reset clears the episode: nothing solved yet, so nothing earned.
    env.reset(seed=0)
    reward, error = call(env.get_reward)
    if error or reward != 0.0:
        results.append((False, f"after reset(), before any guess: reward should be 0.0, yours {error or repr(reward)}"))
    else:
        results.append((True, "after reset(), before any guess: reward 0.0"))
    if not report(results, "exercise 9"):
        return 1
    print("training the smoke lab's policy with each reward (success measured on the lesson's GuessEnv):")
    for seed in seeds:
        env_rollout.GuessEnv = LESSON_ENV
        train_and_report("lesson (1 for a solve)   ", smoke_args(seed=seed))
        env_rollout.GuessEnv = env_class  # train_tabular_grpo builds its environments by this name
        train_and_report("yours  (faster pays more)", smoke_args(seed=seed))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("exercise", choices=["advantage", "reward"])
    parser.add_argument("file", help="your copy of the starter, e.g. my_advantage.py")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], metavar="S", help="seeds to train on (default: 0)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as --smoke does: the tensors are tiny
    check = check_advantage if args.exercise == "advantage" else check_reward
    return check(args.file, args.seeds)


if __name__ == "__main__":
    sys.exit(main())
