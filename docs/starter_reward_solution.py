"""One way to fill in docs/starter_reward.py (exercise 9 of docs/exercises.md). Read it after yours passes:

python docs/exercise_check.py reward docs/starter_reward_solution.py
"""

from env_rollout import GuessEnv


class FastGuessEnv(GuessEnv):
    def get_reward(self) -> float:
        """1.0 for a solve at the first guess, 0.1 less for each further guess; 0.0 if not solved."""
        if not self._solved:
            return 0.0
        return 1.1 - 0.1 * self._turns
