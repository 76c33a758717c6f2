"""A test double of the OpenEnv TextArena Wordle client and server (module `textarena_env`).

It behaves like the real ones where WordleEnv must cope (SPEC, "OpenEnv TextArena Wordle"):
- the client is async-first: `TextArenaEnv(base_url).reset()` returns a coroutine; `.sync()` gives a
  blocking client; `LegacyTextArenaEnv` is an older client that is synchronous and has no `.sync()`;
- step results wrap the observation (`.observation`, `.reward`, `.done`); the in-process server class
  returns the observation itself, carrying `.reward` and `.done`;
- `messages[0].content` is cumulative; with `empty_messages_at_reset` the opening text is in `prompt`;
- invalid moves carry "You attempted an invalid move" and are paid partial credit;
- at the turn limit the last guess is paid partial credit (greens + 0.5 yellows, over 5);
- a server holds at most `capacity` sessions and refuses more with a server error.
"""

import sys
import types
from dataclasses import dataclass, field

WORDS = {"crane", "slate", "audio", "pious", "brick", "stone", "plant"}


@dataclass
class Message:
    content: str
    sender_id: int = -1
    category: str = "MESSAGE"


@dataclass
class Observation:
    prompt: str = ""
    messages: list = field(default_factory=list)
    reward: float | None = None
    done: bool = False


@dataclass
class StepResult:
    observation: Observation
    reward: float | None
    done: bool


@dataclass
class TextArenaAction:
    message: str


class Server:
    """The server side: sessions, capacity, the game, and failure injection."""

    def __init__(self, capacity=64, secret="plant", empty_messages_at_reset=True, fail_next=0, rewrite_history=False):
        self.capacity = capacity
        self.secret = secret
        self.empty_messages_at_reset = empty_messages_at_reset
        self.fail_next = fail_next  # the next N calls fail as a dropped connection
        self.rewrite_history = rewrite_history  # messages restart instead of growing (not an extension)
        self.open_sessions = 0
        self.sessions_opened = 0
        self.resets = 0
        self.reset_kwargs = []  # what each client reset was sent (the seed, where one was given)

    def maybe_fail(self):
        if self.fail_next:
            self.fail_next -= 1
            raise ConnectionError("connection reset by peer")


class Game:
    OPENING = "[GAME] You are playing Wordle. Guess the secret 5-letter word in 6 tries, like [crane]."

    def __init__(self, server):
        self.server = server
        self.text = ""
        self.guesses = 0
        self.done = False

    def observation(self, reward=None):
        messages = [Message(self.text)] if self.text else []
        prompt = self.OPENING if self.server.empty_messages_at_reset else ""
        return Observation(prompt=prompt, messages=messages, reward=reward, done=self.done)

    def reset(self):
        self.server.resets += 1
        self.text, self.guesses, self.done = ("" if self.server.empty_messages_at_reset else self.OPENING), 0, False
        return self.observation()

    def step(self, action):
        word = action.message.strip()
        if not (word.startswith("[") and word.endswith("]")) or word[1:-1].lower() not in WORDS:
            new = f"[GAME] You attempted an invalid move. Reason: {word} is not a valid guess."
            reward = 0.2  # TextArena's partial credit, even for invalid moves
        else:
            word = word[1:-1].lower()
            self.guesses += 1
            marks = " ".join(
                "G" if c == s else ("Y" if c in self.server.secret else "X")
                for c, s in zip(word, self.server.secret, strict=True)
            )
            left = 6 - self.guesses
            new = (
                f"You submitted [{word}].\nFeedback:\n{' '.join(word.upper())}\n{marks}\nYou have {left} guesses left."
            )
            if word == self.server.secret:
                new = f"[GAME] [{word}]"  # as in the real game: a win adds only the echo of the guess
                reward, self.done = 1.0, True
            elif left == 0:
                reward, self.done = (marks.count("G") + 0.5 * marks.count("Y")) / 5, True
            else:
                reward = 0.0
        self.text = new if self.server.rewrite_history else (self.text + "\n" + new if self.text else new)
        return self.observation(reward)


class Session:
    """One server session per client, opened at the first reset."""

    server = Server()

    def __init__(self, base_url: str):
        self.base_url = base_url
        self.game = None
        self.closed = False

    def _reset(self, **kwargs):
        self.server.reset_kwargs.append(kwargs)
        if self.game is None:
            if self.server.open_sessions >= self.server.capacity:
                raise RuntimeError("503 Server Error: Service Unavailable (session capacity reached)")
            self.server.open_sessions += 1
            self.server.sessions_opened += 1
            self.game = Game(self.server)
        self.server.maybe_fail()  # after the session is open: a client that fails here must be closed
        return StepResult(self.game.reset(), None, False)

    def _step(self, action):
        self.server.maybe_fail()
        assert self.game is not None, "step before reset"
        observation = self.game.step(action)
        return StepResult(observation, observation.reward, observation.done)

    def _close(self):
        if self.game is not None and not self.closed:
            self.server.open_sessions -= 1
        self.closed = True


class TextArenaEnv(Session):
    """The current client: async-first; `.sync()` gives the blocking one."""

    async def reset(self, **kwargs):
        return self._reset(**kwargs)

    async def step(self, action):
        return self._step(action)

    async def close(self):
        return self._close()

    def sync(self):
        return SyncClient(self)


class SyncClient:
    def __init__(self, client):
        self.client = client

    def reset(self, **kwargs):
        return self.client._reset(**kwargs)

    def step(self, action):
        return self.client._step(action)

    def close(self):
        return self.client._close()


class AsyncOnlyTextArenaEnv(Session):
    """An async client without .sync(): WordleEnv cannot drive it from TRL's synchronous loop."""

    async def reset(self, **kwargs):
        return self._reset(**kwargs)


class LegacyTextArenaEnv(Session):
    """An older client: synchronous, with no .sync()."""

    def reset(self, **kwargs):
        return self._reset(**kwargs)

    def step(self, action):
        return self._step(action)

    def close(self):
        return self._close()


class TextArenaEnvironment:
    """The in-process server class: reset/step return the observation itself."""

    server = Server()

    def __init__(self, env_id="Wordle-v0", **kwargs):
        assert env_id == "Wordle-v0"
        self.game = Game(self.server)

    def reset(self, **kwargs):
        return self.game.reset()

    def step(self, action):
        return self.game.step(action)


def install(monkeypatch, server=None, legacy=False, async_only=False):
    """Make `import textarena_env` find the double; returns the server it talks to."""
    server = server or Server()
    base = LegacyTextArenaEnv if legacy else AsyncOnlyTextArenaEnv if async_only else TextArenaEnv
    client_class = type("TextArenaEnv", (base,), {"server": server})
    local_class = type("TextArenaEnvironment", (TextArenaEnvironment,), {"server": server})
    module = types.ModuleType("textarena_env")
    module.TextArenaEnv, module.TextArenaAction = client_class, TextArenaAction
    server_package = types.ModuleType("textarena_env.server")
    environment_module = types.ModuleType("textarena_env.server.environment")
    environment_module.TextArenaEnvironment = local_class
    module.server, server_package.environment = server_package, environment_module
    for name, value in [
        ("textarena_env", module),
        ("textarena_env.server", server_package),
        ("textarena_env.server.environment", environment_module),
    ]:
        monkeypatch.setitem(sys.modules, name, value)
    return server
