"""The warm start's solver (labkit/wordle_solver.py) against the real game: its solve rate over a few
hundred games, played as the warm start plays them (training words only, the game's text alone).

    python bench/solver_bench.py [--games 300] [--seed 0]
"""

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import env_rollout  # noqa: E402
from labkit import warm_start, wordle_sessions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    every = wordle_sessions.wordle_words()
    words = [word for word in wordle_sessions.wordle_guess_words() if not env_rollout.held_out(word)]
    seeds = env_rollout.wordle_dataset(options.games, options.seed, every)["seed"]
    started = time.perf_counter()
    games = warm_start.solver_games(
        env_rollout.WordleEnv("local"), env_rollout.WORDLE_PROMPT, seeds, words, options.seed
    )
    seconds = time.perf_counter() - started
    won = [game for game in games if game.won]
    print(
        f"solver: {len(won)} of {len(games)} games won ({len(won) / len(games):.3f}), "
        f"{statistics.mean(len(game.turns) for game in won):.2f} guesses per win; candidates: {len(words)} "
        f"dictionary words less the held-out ones; {seconds:.1f} s"
    )


if __name__ == "__main__":
    main()
