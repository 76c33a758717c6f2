"""Starter: a reward that pays for speed (exercise 9 of docs/exercises.md).

    cp docs/starter_reward.py my_reward.py
    python docs/exercise_check.py reward my_reward.py

GuessEnv (env_rollout.py, section 1) pays 1.0 for a solve, whatever the number of guesses it took.
FastGuessEnv below is the same game with one change: a solve at the first guess pays 1.0, and each
further guess it took costs 0.1 (0.9 at the second guess, 0.8 at the third); an episode not solved
pays 0.0. As in GuessEnv, the reward comes from the environment's own state (read GuessEnv's
`reset` and `guess` to see what it keeps), never from what the policy says.
"""

from env_rollout import GuessEnv


class FastGuessEnv(GuessEnv):
    def get_reward(self) -> float:
        """1.0 for a solve at the first guess, 0.1 less for each further guess; 0.0 if not solved."""
        raise NotImplementedError("TODO: read the episode's state that GuessEnv keeps and return the reward")
