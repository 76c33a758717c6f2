"""Environments for tests/test_check.py: one clean game, and copies of it with one defect each.

`CleanEnv` is a small number-guessing game that keeps TRL's environment_factory contract; every other
class changes one thing about it, the defect its name says, so that env_check should report that
defect and nothing else.
"""

import asyncio
import random
import threading


class CleanEnv:
    """Guess a number from 1 to 4 in 2 tries; `seed` picks it."""

    def __init__(self):
        self._target = None
        self._turns = 0
        self._solved = False

    def reset(self, seed: int | None = None, **kwargs) -> str:
        self._target = random.Random(seed).randint(1, 4)
        self._turns = 0
        self._solved = False
        return "Guess my number from 1 to 4; you have 2 tries."

    def guess(self, value: int) -> str:
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        if self._solved or self._turns >= 2:
            raise ValueError("the game is over: no tries are left")
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4:
            raise ValueError(f"value must be a whole number from 1 to 4, got {value!r}")
        self._turns += 1
        self._solved = value == self._target
        return "correct" if self._solved else ("higher" if self._target > value else "lower")

    def get_reward(self) -> float:
        return 1.0 if self._solved else 0.0


# --- 1. tools -------------------------------------------------------------------------------------


class PublicCloseEnv(CleanEnv):
    def close(self) -> None:
        """Release the game's resources."""


class NoTypeHintEnv(CleanEnv):
    def guess(self, value):
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        return super().guess(value)


class NoArgsSectionEnv(CleanEnv):
    def guess(self, value: int) -> str:
        """Guess the number, a whole number from 1 to 4."""
        return super().guess(value)


class MisnamedArgEnv(CleanEnv):
    def guess(self, value: int) -> str:
        """Guess the number.

        Args:
            val: A whole number from 1 to 4.
        """
        return super().guess(value)


class UndocumentedHelperEnv(CleanEnv):
    def score_table(self):
        return {"solved": self._solved}


class NoToolEnv(CleanEnv):
    guess = None  # an attribute, not a method: TRL sees no tool at all


class AsyncEnv(CleanEnv):
    """Async tools and an async get_reward, which TRL awaits on its event loop."""

    async def guess(self, value: int) -> str:
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        await asyncio.sleep(0)
        return CleanEnv.guess(self, value)

    async def get_reward(self) -> float:
        return CleanEnv.get_reward(self)


class EdgeCasesEnv(CleanEnv):
    """What TRL's listing does and does not take: a property, a classmethod, a staticmethod, an alias."""

    @property
    def turns(self) -> int:
        return self._turns

    @classmethod
    def build(cls):
        return cls()

    @staticmethod
    def rules() -> str:
        """Read the rules of the game."""
        return "Guess a number from 1 to 4 in 2 tries."

    play = CleanEnv.guess  # listed as "play", offered to the model as "guess"


# --- 2. reset -------------------------------------------------------------------------------------


class ResetWithoutKwargsEnv(CleanEnv):
    def reset(self) -> str:
        return super().reset(seed=0)


class ResetReturnsDictEnv(CleanEnv):
    def reset(self, seed: int | None = None, **kwargs) -> dict:
        super().reset(seed)
        return {"text": "Guess my number from 1 to 4."}


class AsyncResetEnv(CleanEnv):
    async def reset(self, seed: int | None = None, **kwargs) -> str:
        return super().reset(seed)


class NoResetEnv(CleanEnv):
    reset = None  # not a method: TRL refuses the class


# --- 4. episodes ----------------------------------------------------------------------------------


class BareKeyErrorEnv(CleanEnv):
    ANSWERS = {1: "one", 2: "two", 3: "three", 4: "four"}

    def guess(self, value: int) -> str:
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        self.ANSWERS[value]  # a lookup as the only check: an unknown value raises KeyError(value)
        return super().guess(value)


class AssertingEnv(CleanEnv):
    def guess(self, value: int) -> str:
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        assert isinstance(value, int)
        return super().guess(value)


class PythonTypeErrorEnv(CleanEnv):
    def guess(self, value: int) -> str:
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        if self._target > value:  # a str or None here: Python's own TypeError reaches the model
            pass
        return super().guess(value)


class SystemExitEnv(CleanEnv):
    def guess(self, value: int) -> str:
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        if not isinstance(value, int):
            raise SystemExit("not a number")
        return super().guess(value)


class AsyncSystemExitEnv(AsyncEnv):
    async def guess(self, value: int) -> str:
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        if not isinstance(value, int):
            raise SystemExit("not a number")
        return await super().guess(value)


class EndlessEnv(CleanEnv):
    def guess(self, value: int) -> str:
        """Guess the number; the game never ends.

        Args:
            value: A whole number from 1 to 4.
        """
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4:
            raise ValueError(f"value must be a whole number from 1 to 4, got {value!r}")
        return "correct" if value == self._target else ("higher" if self._target > value else "lower")


class ReturnsNoneEnv(CleanEnv):
    def guess(self, value: int) -> None:
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        super().guess(value)


class NoRewardEnv(CleanEnv):
    get_reward = None  # the environment does not score itself: TRL would need reward_funcs


class RewardNoneEnv(CleanEnv):
    def get_reward(self) -> float:
        return None if not self._solved else 1.0


class RewardIntEnv(CleanEnv):
    def get_reward(self) -> float:
        return int(self._solved)


class RewardRaisesEnv(CleanEnv):
    def get_reward(self) -> float:
        return 1.0 / self._turns  # no tool call, no turn: ZeroDivisionError


class HangingEnv(CleanEnv):
    release = threading.Event()  # a test sets it once it has seen the check give up on the call

    def guess(self, value: int) -> str:
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        HangingEnv.release.wait(timeout=60)  # stands for a network call without a timeout
        return super().guess(value)


# --- 5. pooling and determinism -------------------------------------------------------------------


class LeakyResetEnv(CleanEnv):
    def reset(self, seed: int | None = None, **kwargs) -> str:
        self._target = random.Random(seed).randint(1, 4)  # forgets to clear _turns and _solved
        return "Guess my number from 1 to 4; you have 2 tries."


class SeedIgnoredEnv(CleanEnv):
    def reset(self, seed: int | None = None, **kwargs) -> str:
        text = super().reset(seed)
        self._target = random.randint(1, 4)  # the global RNG: the seed decides nothing
        return text


class UnseededEnv(CleanEnv):
    def reset(self, **kwargs) -> str:
        text = super().reset()
        self._target = random.randint(1, 4)
        return text


class LeakyUnseededEnv(CleanEnv):
    """Two defects: the task comes from the global RNG with no seed, and a count outlives the episode."""

    def __init__(self):
        super().__init__()
        self._guesses_ever = 0  # never cleared by reset

    def reset(self, **kwargs) -> str:
        text = super().reset()
        self._target = random.randint(1, 4)
        return text

    def guess(self, value: int) -> str:
        """Guess the number.

        Args:
            value: A whole number from 1 to 4.
        """
        answer = super().guess(value)
        self._guesses_ever += 1
        return f"{answer} (guess number {self._guesses_ever})"


class SeedChangesNothingEnv(CleanEnv):
    def reset(self, seed: int | None = None, **kwargs) -> str:
        return super().reset(seed=0)


# --- 6. pickling ----------------------------------------------------------------------------------


class LockHoldingEnv(CleanEnv):
    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()


make_clean_env = lambda: CleanEnv()  # noqa: E731 - a lambda factory, which does not pickle


# --- the target itself ----------------------------------------------------------------------------


class NeedsArgumentsEnv(CleanEnv):
    def __init__(self, server_url: str):
        super().__init__()
        self._server_url = server_url


class ConstructorRaisesEnv(CleanEnv):
    def __init__(self):
        raise RuntimeError("cannot reach the game server")


def make_env() -> CleanEnv:
    """A module-level factory function: a target TRL accepts as environment_factory."""
    return CleanEnv()
