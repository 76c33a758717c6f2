"""Starter: your own tool environment for TRL's GRPOTrainer(environment_factory=...) (exercise 6 of
docs/exercises.md). Copy it, fill in the TODOs, and check it the way TRL will use it:

    cp docs/starter_env.py my_env.py
    python env_rollout.py --check my_env.py:MyEnv

The game: find a secret 5-letter word one letter at a time, before 6 wrong letters (hangman).

The contract (GuessEnv in env_rollout.py is a worked example of every point):
- TRL builds the class with no arguments (environment_factory()), and re-uses instances through reset().
- reset(**row) starts an episode and returns the text appended to the prompt. TRL passes every dataset
  column as a keyword, so unknown keywords must be accepted.
- Every other public method is a tool. Its type hints and its Google-style docstring (a line saying
  what it does, then `Args:`) become the JSON schema the model reads: all it knows about the tool.
- An exception raised by a tool reaches the model as {"error": message}: raise ValueError with a
  sentence the model can act on.
- get_reward() is called once, when the episode is over: a float, from the environment's own state.
- State is private (underscored), so that TRL does not take it for a tool.
"""

import random

WORDS = ("apple", "brick", "cloud", "dream", "eagle", "flame", "grape", "house", "lemon", "tiger")
MAX_MISSES = 6


class MyEnv:
    """Find a secret word one letter at a time; the only tool is `guess_letter`."""

    def __init__(self):
        self._rng = random.Random()
        # TODO 1: the episode's state, private (underscored): the secret word, the letters guessed so
        # far, the number of wrong letters.

    def reset(self, seed: int | None = None, **kwargs) -> str:
        """Start a new episode and return its opening text."""
        raise NotImplementedError(
            "TODO 2: pick the word with random.Random(seed) when a seed is given, set every piece of episode "
            "state again, and return the opening text the model reads"
        )

    def guess_letter(self, letter: str) -> str:
        """TODO 3: a line saying what this tool does, then `Args:` with a line describing `letter`."""
        raise NotImplementedError(
            "TODO 3: refuse a bad letter or a finished game with ValueError, else record the letter and "
            "return the word so far, e.g. 'a p p _ e'"
        )

    def get_reward(self) -> float:
        raise NotImplementedError("TODO 4: return 1.0 if the word was found, else 0.0")
