"""One way to fill in docs/starter_env.py (exercise 6 of docs/exercises.md). Read it after yours passes:

    python env_rollout.py --check docs/starter_env_solution.py:MyEnv

The game: find a secret 5-letter word one letter at a time, before 6 wrong letters (hangman).
"""

import random

WORDS = ("apple", "brick", "cloud", "dream", "eagle", "flame", "grape", "house", "lemon", "tiger")
MAX_MISSES = 6


class MyEnv:
    """Find a secret word one letter at a time; the only tool is `guess_letter`."""

    def __init__(self):
        self._rng = random.Random()
        # TODO 1, done: the episode's state, private (underscored) so that TRL does not take it for a tool.
        self._word = None  # None until the first reset()
        self._guessed = set()
        self._misses = 0

    def reset(self, seed: int | None = None, **kwargs) -> str:
        """Start a new episode and return its opening text. `seed` picks the word (same seed, same word);
        other keywords (the dataset's columns) are ignored."""
        # TODO 2, done: the word from a generator seeded by `seed`, every piece of episode state set again.
        if seed is not None:
            self._rng = random.Random(seed)
        self._word = self._rng.choice(WORDS)
        self._guessed = set()
        self._misses = 0
        return (
            f"I have picked a secret {len(self._word)}-letter English word. Find it one letter at a time: call "
            f"the tool `guess_letter` with one letter. {MAX_MISSES} wrong letters and the game is lost. "
            f"The word so far: {self._pattern()}"
        )

    def guess_letter(self, letter: str) -> str:
        """Guess one letter of the secret word.

        Args:
            letter: One letter from a to z, not guessed before in this game.

        Returns:
            The word so far, with `_` for each letter not found yet, and the wrong letters left.
        """
        # TODO 3, done: check the argument and the game's state first, with messages the model can act on.
        if self._word is None:
            raise RuntimeError("no game is running: call reset() before guess_letter()")
        if self._found() or self._misses >= MAX_MISSES:
            raise ValueError("the game is over: no more letters can be guessed")
        if not isinstance(letter, str) or len(letter.strip()) != 1 or not letter.strip().isalpha():
            raise ValueError(f"letter must be one letter from a to z, got {letter!r}")
        letter = letter.strip().lower()
        if letter in self._guessed:
            raise ValueError(f"{letter!r} was already guessed: try another letter")
        self._guessed.add(letter)
        if letter not in self._word:
            self._misses += 1
        if self._found():
            return f"correct: the word is {self._word}"
        return f"{self._pattern()} ({MAX_MISSES - self._misses} wrong letters left)"

    def get_reward(self) -> float:
        """1.0 if the word was found, else 0.0, from the environment's own state."""
        # TODO 4, done.
        return 1.0 if self._word is not None and self._found() else 0.0

    def _found(self) -> bool:
        return all(letter in self._guessed for letter in self._word)

    def _pattern(self) -> str:
        return " ".join(letter if letter in self._guessed else "_" for letter in self._word)
