"""env_rollout.py: agentic RL in one file.

Three ideas, in the order this file teaches them:

1. A *stateful environment* behind a tool interface. `GuessEnv` has `reset()`, one tool method
   (`guess`) and `get_reward()`: exactly the contract of TRL's `GRPOTrainer(environment_factory=...)`.
2. *Group-relative advantages* (GRPO). Play G rollouts of the same prompt; each rollout's advantage is
   its reward measured against its own group: (r - mean) / (std + eps). No value network.
3. *Observation masking*. An episode interleaves text the policy wrote (tool calls) with text the
   environment wrote (tool responses). Only the policy's text carries loss weight; the environment's
   text carries weight 0, because the policy did not choose it.

Modes:
    python env_rollout.py --smoke      the whole loop in miniature on a CPU, in seconds (the default)
    python env_rollout.py --full       Qwen3 + TRL GRPOTrainer against OpenEnv Wordle on a GPU
    python env_rollout.py --rehearse   the --full code path offline on a CPU, with a tiny model
    python env_rollout.py --learn      that tiny model learns the game through TRL, on a CPU, in minutes

Read it top to bottom: environment, policy, rollout and trace, GRPO update, smoke checks, full path,
the rehearsal, and --learn (a tiny transformer that learns the game through TRL).
"""

import argparse
import atexit
import copy
import functools
import inspect
import json
import math
import os
import queue
import random
import socket
import sys
import tempfile
import threading
import time
import urllib.parse
from typing import NamedTuple

import torch

# =====================================================================================================
# 1. The environment: guess a hidden number, through one tool
# =====================================================================================================


class GuessEnv:
    """Guess a hidden integer in [1, n] within `max_turns` guesses; the only tool is `guess`.

    This is the contract TRL's `GRPOTrainer(environment_factory=GuessEnv)` expects:
    - `reset(**row)` starts an episode and returns text that is appended to the prompt. TRL passes
      every dataset column as a keyword, so unknown keywords are accepted and ignored.
    - every other public method is a tool. TRL builds the tool's JSON schema from the type hints and
      the Google-style docstring, so the docstring is what the model reads about the tool.
    - `get_reward()` is called once, when the rollout is over.
    - an exception raised by a tool reaches the model as `{"error": message}`, so messages are
      written for the model to read.
    All state is private (underscored) so that TRL does not mistake it for a tool.
    """

    def __init__(self, n: int = 8, max_turns: int = 3):
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise ValueError(f"n must be an integer >= 2, got {n!r}")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError(f"max_turns must be an integer >= 1, got {max_turns!r}")
        self._n = n
        self._max_turns = max_turns
        self._rng = random.Random()  # private: the policy never sees the target
        self._target = None  # None until the first reset()
        self._turns = 0
        self._solved = False

    def reset(self, seed: int | None = None, target: int | None = None, **kwargs) -> str:
        """Start a new episode and return its prompt.

        `seed` re-seeds the private RNG (same seed, same target), as in gymnasium; `target` pins the
        hidden number instead (for exhaustive checks). Other keywords (dataset columns) are ignored.
        """
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        if target is not None:
            target = self._parse_number(target, "target")
        if seed is not None:
            self._rng = random.Random(seed)
        self._target = target if target is not None else self._rng.randint(1, self._n)
        self._turns = 0
        self._solved = False
        return (
            f"I have picked a secret whole number from 1 to {self._n}. "
            f"You have {self._max_turns} guesses. Call the tool `guess` with a number; I answer "
            "`higher` (the secret is larger), `lower` (it is smaller) or `correct`."
        )

    def guess(self, value: int) -> str:
        """Guess the secret number.

        Args:
            value: The number to guess, a whole number within the range given in the prompt.

        Returns:
            One word: `higher` if the secret number is larger, `lower` if it is smaller, `correct` if
            it is the secret number.
        """
        if self._target is None:
            raise RuntimeError("no episode is running: call reset() before guess()")
        if self._solved or self._turns >= self._max_turns:
            raise ValueError("the game is over: no guesses are left in this episode")
        value = self._parse_number(value, "guess")  # bad input raises before any state changes
        self._turns += 1
        if value == self._target:
            self._solved = True
            return "correct"
        return "higher" if self._target > value else "lower"

    def get_reward(self) -> float:
        """1.0 if the episode was solved, else 0.0, from the environment's own state."""
        return 1.0 if self._solved else 0.0

    # Properties, not methods: TRL turns public *methods* into tools, and these are public knowledge
    # (the prompt names them), not tools.
    @property
    def n(self) -> int:
        return self._n

    @property
    def max_turns(self) -> int:
        return self._max_turns

    def _parse_number(self, value, what: str) -> int:
        # A language model's tool arguments arrive as JSON, so an integral value written as the text
        # "4" or the float 4.0 is accepted. Booleans, fractions and words are not numbers here.
        number = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, (float, str)):
            try:
                as_float = float(value)
            except ValueError:
                as_float = math.nan
            if as_float.is_integer():
                number = int(as_float)
        if number is None or not 1 <= number <= self._n:
            raise ValueError(f"{what} must be a whole number from 1 to {self._n}, got {value!r}")
        return number


def success_optimum(n: int, max_turns: int) -> float:
    """Best possible success rate: binary search can tell apart 2**turns - 1 numbers."""
    return min(1.0, (2**max_turns - 1) / n)


def success_random(n: int, max_turns: int) -> float:
    """Success rate of guessing uniformly at random, repeats allowed."""
    return 1.0 - (1.0 - 1.0 / n) ** max_turns


# =====================================================================================================
# 2. The policy: a table of logits over the agent's belief state
# =====================================================================================================
# The agent cannot see the target. What it can work out from the feedback so far is the interval
# (lo, hi) of numbers still possible: its *belief state*. The tabular policy keeps one row of logits
# per belief state, over the n possible guesses. All rows start at zero: uniform random guessing.


def update_belief(belief: tuple[int, int], guess: int, feedback: str) -> tuple[int, int]:
    """Narrow the interval of still-possible numbers with one piece of feedback."""
    lo, hi = belief
    if feedback == "higher":
        lo = max(lo, guess + 1)
    elif feedback == "lower":
        hi = min(hi, guess - 1)
    elif feedback == "correct":
        lo = hi = guess
    return lo, hi


def belief_states(n: int) -> dict[tuple[int, int], int]:
    """Every interval (lo, hi) with 1 <= lo <= hi <= n, numbered: the rows of the policy table."""
    intervals = [(lo, hi) for lo in range(1, n + 1) for hi in range(lo, n + 1)]
    return {interval: row for row, interval in enumerate(intervals)}


def legal_guess_mask(states: dict[tuple[int, int], int], n: int) -> torch.Tensor:
    """0 for guesses inside a state's interval, -inf outside: added to the logits before the softmax.

    An action constraint, like the legal-move mask of a board game: a guess outside (lo, hi) is
    already known to be wrong, so the policy never wastes a turn on it and learning only has to
    find *where inside the interval* to guess.
    """
    mask = torch.full((len(states), n), -math.inf)
    for (lo, hi), row in states.items():
        mask[row, lo - 1 : hi] = 0.0
    return mask


def binary_search_guess(belief: tuple[int, int]) -> int:
    """The scripted policy: guess the middle of the interval."""
    lo, hi = belief
    return (lo + hi) // 2


class TabularSampler:
    """Samples guesses from a frozen snapshot of the policy table (rollouts need no gradients)."""

    def __init__(self, logits: torch.Tensor, states: dict[tuple[int, int], int], rng: random.Random):
        probs = torch.softmax(logits.detach() + legal_guess_mask(states, logits.shape[1]), dim=-1)
        self.cum_weights = probs.cumsum(dim=-1).tolist()  # one lookup list per belief state
        self.guesses = list(range(1, logits.shape[1] + 1))
        self.states = states
        self.rng = rng

    def __call__(self, belief: tuple[int, int]) -> int:
        row = self.cum_weights[self.states[belief]]
        return self.rng.choices(self.guesses, cum_weights=row)[0]


# =====================================================================================================
# 3. Rollout and trace: one episode, and what the trainer would see of it
# =====================================================================================================
# A trace lists the episode's text as chat messages with a loss weight each: the prompt (written by
# the environment) 0, every tool call (written by the policy) 1, every tool response (written by the
# environment) 0. This is what TRL's `tool_mask` does token by token for a language model.


class TraceEntry(NamedTuple):
    role: str  # "user" (the prompt), "assistant" (a tool call) or "tool" (a tool response)
    text: str
    weight: int  # loss weight: 1 = trained, 0 = masked
    belief: tuple[int, int] | None = None  # for a tool call: the state the policy chose in
    guess: int | None = None  # for a tool call: what it chose


class Episode(NamedTuple):
    trace: list[TraceEntry]
    reward: float


def play_episode(env: GuessEnv, choose_guess, **reset_kwargs) -> Episode:
    """`env.reset(**reset_kwargs)`, then let `choose_guess(belief)` play until solved or out of turns.

    The agent starts from the whole range and narrows it with the feedback it reads: it never looks
    at the environment's private state. The range and the number of turns are in the prompt.
    """
    prompt = env.reset(**reset_kwargs)
    trace = [TraceEntry("user", prompt, 0)]
    belief = (1, env.n)
    for _ in range(env.max_turns):
        guess = choose_guess(belief)
        feedback = env.guess(guess)
        trace.append(TraceEntry("assistant", f"guess(value={guess})", 1, belief, guess))
        trace.append(TraceEntry("tool", feedback, 0))
        if feedback == "correct":
            break
        belief = update_belief(belief, guess, feedback)
    return Episode(trace, env.get_reward())


EVAL_FIRST_SEED = 1_000_000  # evaluation uses seeds from here on; training draws its seeds below it


def success_rate(env: GuessEnv, choose_guess, episodes: int, first_seed: int) -> float:
    """Fraction of seeded episodes (seeds first_seed, first_seed + 1, ...) the environment counts as solved."""
    solved = sum(play_episode(env, choose_guess, seed=first_seed + i).reward for i in range(episodes))
    return solved / episodes


# =====================================================================================================
# 4. The GRPO update: advantages within each group, loss on the policy's own choices
# =====================================================================================================


def group_advantages(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """(r - mean) / (std + eps) within each group (the last dimension), population std.

    A group whose rollouts all scored the same carries no signal: its advantages are all zero.
    """
    mean = rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, correction=0, keepdim=True)
    return (rewards - mean) / (std + eps)


def episode_log_probs(logits: torch.Tensor, states: dict, episodes: list[Episode]) -> torch.Tensor:
    """Summed log-probability of each episode's trace, weighted by the trace's loss weights: the
    masked entries (prompt, tool responses) contribute nothing, exactly as tool_mask does in TRL."""
    rows, columns, owners, weights = [], [], [], []
    for index, episode in enumerate(episodes):
        for entry in episode.trace:
            if entry.weight:  # only a choice the policy made can carry weight
                rows.append(states[entry.belief])
                columns.append(entry.guess - 1)
                owners.append(index)
                weights.append(float(entry.weight))
    log_probs = torch.log_softmax(logits + legal_guess_mask(states, logits.shape[1]), dim=-1)[rows, columns]
    return torch.zeros(len(episodes)).index_add(0, torch.tensor(owners), torch.tensor(weights) * log_probs)


def train_tabular_grpo(args) -> dict:
    """GRPO on the tabular policy. Returns the trained logits, the learning curve and the traces."""
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)  # drives the prompts (seeds) and the sampled guesses
    states = belief_states(args.n)
    logits = torch.zeros(len(states), args.n, requires_grad=True)  # all zeros = uniform guessing
    # Adam, not plain SGD: it rescales each logit's step, so rarely visited belief states (deep in the
    # game) learn as fast as the opening move, and one learning rate works for every seed. It is
    # written out (five lines) because torch.optim's first use imports torch's compiler: +1.5 s.
    adam_m, adam_v, beta1, beta2 = torch.zeros_like(logits), torch.zeros_like(logits), 0.9, 0.999
    # One environment per rollout of a group, re-used through reset(): what TRL does with its pool.
    envs = [GuessEnv(args.n, args.max_turns) for _ in range(args.group)]
    curve, traces, lesson_group = [], [], None
    for iteration in range(args.iterations):
        sampler = TabularSampler(logits, states, rng)
        # Several prompts per step, each with its own group: more signal per update, and each group's
        # advantages are still computed within that group only (the GRPO lesson is unchanged).
        groups = []
        for _ in range(args.prompts):
            prompt_seed = rng.randrange(EVAL_FIRST_SEED)  # one prompt = one seed = one hidden number
            groups.append([play_episode(env, sampler, seed=prompt_seed) for env in envs])
        rewards = torch.tensor([[episode.reward for episode in group] for group in groups])
        advantages = group_advantages(rewards)  # shape (prompts, group)
        episodes = [episode for group in groups for episode in group]
        log_probs = episode_log_probs(logits, states, episodes)
        loss = -(advantages.flatten() * log_probs).mean()
        logits.grad = None
        loss.backward()
        with torch.no_grad():  # one Adam step
            adam_m.mul_(beta1).add_(logits.grad, alpha=1 - beta1)
            adam_v.mul_(beta2).addcmul_(logits.grad, logits.grad, value=1 - beta2)
            step_size = args.lr * math.sqrt(1 - beta2 ** (iteration + 1)) / (1 - beta1 ** (iteration + 1))
            logits.sub_(step_size * adam_m / (adam_v.sqrt() + 1e-8))

        curve.append(rewards.mean().item())
        traces.extend(episode.trace for episode in episodes)
        if lesson_group is None and 0 < rewards[0].sum() < args.group:  # a group with signal, to show
            lesson_group = (rewards[0].tolist(), advantages[0].tolist())
    return {"logits": logits.detach(), "states": states, "curve": curve, "traces": traces, "lesson_group": lesson_group}


# =====================================================================================================
# 5. The smoke run: checks that the loop works and that learning really happens
# =====================================================================================================

LEARNED_FRACTION_OF_OPTIMUM = 0.97  # after training, success must reach 97 % of the optimum


class SmokeFailure(Exception):
    """A smoke check failed; the message says which and by how much."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise SmokeFailure(message)


def check_masking(traces: list[list[TraceEntry]]) -> int:
    """Every tool response and prompt has weight 0; the weights of a trace sum to its turns."""
    for trace in traces:
        for entry in trace:
            if entry.role != "assistant":
                check(entry.weight == 0, f"a {entry.role} entry {entry.text!r} has loss weight {entry.weight}")
        turns = sum(entry.role == "assistant" for entry in trace)
        check(sum(entry.weight for entry in trace) == turns, f"trace weights do not sum to its {turns} turns")
    return len(traces)


def print_lesson(trace: list[TraceEntry], lesson_group) -> None:
    print("lesson: one training episode, as the trainer sees it (weight 1 = trained, 0 = masked)")
    for entry in trace:
        print(f"  weight {entry.weight}  {entry.role:<9}  {entry.text}")
    if lesson_group is not None:
        rewards, advantages = lesson_group
        print("lesson: one group (one prompt, its rollouts): reward -> advantage")
        print("  rewards    " + " ".join(f"{r:+6.2f}" for r in rewards))
        print("  advantages " + " ".join(f"{a:+6.2f}" for a in advantages))
        print(
            "  solved rollouts are pushed up, failed ones down; a group that all solved (or all failed) teaches nothing"
        )


def plot_curve(
    path: str,
    curve: list[float],
    optimum: float,
    random_rate: float,
    title: str = "Tabular GRPO on GuessEnv",
    xlabel: str = "iteration",
) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot(range(1, len(curve) + 1), curve, label="training success (batch mean)")
    axes.axhline(optimum, color="green", linestyle="--", label=f"optimum {optimum:.3f}")
    axes.axhline(random_rate, color="red", linestyle=":", label=f"random {random_rate:.3f}")
    axes.set(xlabel=xlabel, ylabel="success rate", ylim=(0, 1.02), title=title)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def train_and_evaluate(args) -> tuple[float, float, dict]:
    """Success of the untrained and of the trained policy on the same evaluation seeds, and the
    training result (with its wall time in seconds). Evaluation samples from the policy."""
    env, states = GuessEnv(args.n, args.max_turns), belief_states(args.n)
    eval_rng = random.Random(args.seed + 1)
    untrained = TabularSampler(torch.zeros(len(states), args.n), states, eval_rng)
    before = success_rate(env, untrained, args.eval_episodes, EVAL_FIRST_SEED)
    started = time.perf_counter()
    result = train_tabular_grpo(args)
    result["seconds"] = time.perf_counter() - started
    trained = TabularSampler(result["logits"], states, eval_rng)
    after = success_rate(env, trained, args.eval_episodes, EVAL_FIRST_SEED)
    return before, after, result


def hidden_number_signature(env: GuessEnv, seed: int) -> tuple[str, ...]:
    """The feedback to every possible first guess after reset(seed): it pins down the hidden number
    from the outside, without reading the environment's private state."""
    signature = []
    for value in range(1, env.n + 1):
        env.reset(seed=seed)
        signature.append(env.guess(value))
    return tuple(signature)


def run_smoke(args) -> None:
    # One thread: the tensors here are tiny, and on a busy machine a second thread made training
    # 5x slower (measured: 0.7 s against 0.14 s) while saving nothing on a quiet one.
    torch.set_num_threads(1)
    n, turns = args.n, args.max_turns
    optimum, random_rate = success_optimum(n, turns), success_random(n, turns)
    env = GuessEnv(n, turns)

    # Check 1: the scripted binary search solves exactly as many targets as the optimum allows.
    solved = sum(play_episode(env, binary_search_guess, target=target).reward for target in range(1, n + 1))
    best = min(n, 2**turns - 1)
    check(solved == best, f"binary search solved {solved:.0f} of the {n} targets, expected exactly {best}")
    scripted = success_rate(env, binary_search_guess, episodes=200, first_seed=0)
    low, high = optimum - 0.075, optimum + 0.075  # [0.8, 0.95] for n=8, 3 turns
    check(
        low <= scripted <= high,
        f"binary search success {scripted:.3f} on 200 episodes, outside [{low:.3f}, {high:.3f}]",
    )
    print(f"scripted binary search: {solved:.0f}/{n} targets solved, success {scripted:.3f} on 200 seeded episodes")

    # Check 2: determinism. Same seed, same hidden number and same feedback, on any instance.
    other = GuessEnv(n, turns)
    for seed in range(20):
        check(
            hidden_number_signature(env, seed) == hidden_number_signature(other, seed),
            f"seed {seed} gave two different hidden numbers",
        )
        first = play_episode(env, binary_search_guess, seed=seed).trace
        check(
            first == play_episode(other, binary_search_guess, seed=seed).trace, f"seed {seed} gave different feedback"
        )
    distinct = len({hidden_number_signature(env, seed) for seed in range(20)})
    check(distinct > 1, "20 different seeds all gave the same hidden number: the seed is ignored")
    print(f"determinism: 20 seeds replayed on two instances, identical; {distinct} distinct hidden numbers")

    # Check 3: training, measured before and after on the same held-out evaluation seeds.
    before, after, result = train_and_evaluate(args)
    print(
        f"training: {args.iterations} iterations x {args.prompts} prompts x {args.group} rollouts "
        f"= {args.iterations * args.prompts * args.group} episodes in {result['seconds']:.2f} s"
    )
    print(f"success rate before={before:.3f} after={after:.3f} (optimum {optimum:.3f}, random {random_rate:.3f})")
    print("  (before = the untrained policy: uniform over the numbers still possible, so better than blind random)")
    bar = LEARNED_FRACTION_OF_OPTIMUM * optimum
    check(
        after >= bar,
        f"after training, success {after:.3f} is below {bar:.3f} ({LEARNED_FRACTION_OF_OPTIMUM:.0%} of the optimum)",
    )
    gain = 0.5 * (optimum - before)  # training must close at least half the gap it started with
    check(after - before >= gain, f"success rose by only {after - before:.3f}; expected at least {gain:.3f}")

    # Check 4: observation masking, on every trace that training used.
    checked = check_masking(result["traces"])
    print(f"masking: {checked} training traces, every prompt and tool response has loss weight 0")

    print_lesson(result["traces"][-1], result["lesson_group"])
    if args.plot:
        plot_curve(args.plot, result["curve"], optimum, random_rate)
        print(f"learning curve written to {args.plot}")
    print("smoke ok")


# =====================================================================================================
# 6. The full path: Qwen3 + TRL's GRPOTrainer against OpenEnv Wordle
# =====================================================================================================
# The same three ideas at scale. The environment is TextArena's Wordle, played in this process (the
# default) or behind an OpenEnv server; the policy is a language model; TRL runs the tool-calling loop,
# builds `tool_mask` (observation masking, token by token) and computes group-relative advantages.
# Heavy imports happen inside these functions.

WORDLE_URL = "local"  # the default: TextArena's Wordle in this process, no server, no session limit
WORDLE_SPACE_URL = "https://openenv-wordle.hf.space"  # the hosted Space: one session at a time
WORDLE_PROMPT = (
    "You are an expert Wordle solver. Find the secret 5-letter English word in at most 6 tries. "
    "Make each guess by calling the tool `guess` with the word in square brackets, like [crane]. "
    "After each guess you get one mark per letter: G = right letter in the right place, "
    "Y = in the word but in another place, X = not in the word.\n\n"
)
INVALID_MOVE_MARK = "You attempted an invalid move"  # TextArena's text for a malformed or unknown guess
VALID_GUESS_MARK = "You submitted"  # TextArena's text for a valid guess that did not win
SERVER_ATTEMPTS = 3  # tries to open a session; a refused or dropped connection is retried with backoff
SERVER_BACKOFF_S = 0.5  # first wait between tries, doubled each time
PREFLIGHT_STALL_S = 30.0  # the preflight gives up when no session has answered for this long
# Errors that mean "this code and this client do not fit", not "the network or server is busy":
# they are raised at once, never retried, and never blamed on the server.
NOT_TRANSIENT = (TypeError, AttributeError, NameError, ImportError, NotImplementedError)
SERVER_REMEDIES = (
    "Remedies: training holds one session per rollout in flight (32 per training process).\n"
    "  - play the game in this process, with no server at all: --env-url local (the default);\n"
    "  - a server you run (the Space's Docker image, or uvicorn textarena_env.server.app:app) holds\n"
    "    MAX_CONCURRENT_ENVS sessions, 8 unless set: start it with MAX_CONCURRENT_ENVS=32 (or more);\n"
    "  - the hosted Space holds one session: duplicate it (openenv/wordle) and raise MAX_CONCURRENT_ENVS\n"
    "    in its settings;\n"
    "  - sessions of a run that crashed are held until its process is gone: stop it (or restart the server)."
)
NLTK_REMEDY = (
    "TextArena's Wordle needs the `textarena` package and NLTK's word lists. On a machine with internet: "
    "python -m nltk.downloader words averaged_perceptron_tagger_eng; to use them offline, copy that "
    "nltk_data folder over and set NLTK_DATA=<folder> (and TEXTARENA_DOWNLOAD_NLTK=0)"
)


class WordleServerError(RuntimeError):
    """The Wordle game could not be started: a server unreachable or full, or the local game broken."""


class MissingClientError(ImportError):
    """The OpenEnv TextArena package (module textarena_env) is not installed."""


class ModelLoadError(RuntimeError):
    """The model named by --model could not be loaded."""


def import_textarena_env():
    try:
        import textarena_env
    except ImportError as error:
        raise MissingClientError(
            "the Wordle environment needs the OpenEnv TextArena package (module textarena_env); "
            "README, 'Installing the Wordle game', says how to install it"
        ) from error
    return textarena_env


def observation_text(observation) -> str:
    """All text the game has shown so far. Some servers leave `messages` empty at reset and put the
    opening text in `prompt`; otherwise the messages hold it, cumulatively."""
    messages = getattr(observation, "messages", None) or []
    if messages:
        return "\n".join(message.content for message in messages)
    return getattr(observation, "prompt", "") or ""


SEEDING_LOCK = threading.Lock()


def seeded_local_reset(game, seed: int | None):
    """Reset an in-process TextArena game so that `seed` picks the secret word.

    TextArena draws the secret from Python's global `random`, and OpenEnv's reset() accepts a seed
    and drops it. So the draw is seeded here, and the process's own random state is put back after:
    same seed, same word, whatever else the process does with `random`."""
    if seed is None:
        return game.reset()
    with SEEDING_LOCK:
        saved = random.getstate()
        random.seed(seed)
        try:
            return game.reset()
        finally:
            random.setstate(saved)


# Sessions the preflight opened, kept for training to take over, so that no session is paid for twice
# (each new one costs a server about 1.1 s of CPU; an in-process game about 1.8 s). Keyed by env URL.
PARKED_CLIENTS: dict[str, list] = {}


class WordleEnv:
    """TextArena Wordle, with the environment_factory contract of GuessEnv.

    `env_url` is "local" (the default: the game runs in this process) or an OpenEnv server (a local
    Docker container or uvicorn, a duplicate of the hosted Space). One game per instance: TRL pools
    instances and calls `reset()` again for each episode, which re-uses the session.

    Rewards: exactly 1.0 for a win; TextArena's partial credit for a game lost at the 6-guess limit;
    0.0 for a game lost on invalid moves (TextArena ends a game at the second invalid move in a row,
    and would pay partial credit for it).
    """

    def __init__(self, env_url: str = WORDLE_URL):
        self._env_url = env_url
        self._client = None  # opened on first reset(), replaced (and closed) after a failed reset
        self._seen_text = ""  # what the game has shown so far: feedback is what comes after it
        self._started = False
        self._done = False
        self._solved = False
        self._reward = 0.0
        self._moves = 0
        self._invalid_moves = 0

    def reset(self, seed: int | None = None, **kwargs) -> str:
        """Start a new game; return the game's opening text. The dataset's `seed` column picks the
        secret word, so the G rollouts of one prompt play the same word (in-process; an OpenEnv
        server is sent the seed, and today's ignores it). Other columns are ignored."""
        self._started = False  # until the game has answered
        result = self._reset_with_retries(seed)
        observation = getattr(result, "observation", result)
        self._seen_text = ""
        self._started, self._done, self._solved, self._reward = True, False, False, 0.0
        self._moves = self._invalid_moves = 0
        return self._new_text(observation)

    def guess(self, guess: str) -> str:
        """Guess the secret word.

        Args:
            guess: A 5-letter English word in square brackets, for example "[crane]".

        Returns:
            The game's answer. A valid guess that does not win: the word in capitals, one mark per
            letter below it (G right place, Y elsewhere in the word, X not in it) and the guesses
            left. An invalid guess (not a word, wrong length, repeated): the reason, with no guess
            spent; a second invalid guess in a row ends the game. A game that ends says so.
        """
        if not self._started:
            raise RuntimeError("no game is running: call reset() before guess()")
        if self._done:
            raise ValueError("the game is over: no guesses are left in this episode")
        if not isinstance(guess, str) or not guess.strip("[] \n"):
            raise ValueError(f"guess must be a word in square brackets, like [crane], got {guess!r}")
        word = "[" + guess.strip().strip("[]").strip() + "]"  # brackets are what TextArena parses
        action = import_textarena_env().TextArenaAction(message=word)
        try:
            # Not retried: a step that reached the server before the connection dropped would be
            # played twice, and a new session would lose the game. This episode ends instead.
            result = self._client.step(action)
        except NOT_TRANSIENT:
            raise
        except Exception as error:
            self._done, self._reward = True, 0.0
            self._close_client()  # the next reset() opens a fresh session
            print(f"WordleEnv: a guess failed at {self._env_url} ({type(error).__name__}: {error})", file=sys.stderr)
            raise ValueError("the game server stopped answering: this game is over") from None
        observation = getattr(result, "observation", result)
        feedback = self._new_text(observation)
        game_reward = float(getattr(result, "reward", None) or 0.0)
        self._done = bool(getattr(result, "done", False))
        self._moves += 1
        # What ended the game is read from the text: a win and a second invalid move both add only
        # an echo of the guess, but a win pays exactly 1.0; a valid guess says "You submitted".
        if INVALID_MOVE_MARK in feedback:
            self._invalid_moves += 1
        elif self._done and game_reward == 1.0:
            self._solved = True
            feedback += "\nYou won: that is the secret word. The game is over."
        elif self._done and VALID_GUESS_MARK not in feedback:
            self._invalid_moves += 1
            feedback += "\nA second invalid guess in a row: you lost. The game is over."
        elif self._done:
            feedback += "\nNo guesses left: you lost. The game is over."
        # A loss on invalid moves earns nothing (TextArena would pay partial credit for it).
        lost_on_invalid = self._done and not self._solved and VALID_GUESS_MARK not in feedback
        self._reward = 0.0 if lost_on_invalid or not self._done else game_reward
        return feedback

    def get_reward(self) -> float:
        """1.0 for a win, TextArena's partial credit (below 1) for a loss at the limit, else 0.0."""
        return self._reward

    # Properties, not methods, so that TRL does not offer them to the model as tools.
    @property
    def solved(self) -> bool:
        return self._solved

    @property
    def moves(self) -> int:
        return self._moves

    @property
    def invalid_moves(self) -> int:
        return self._invalid_moves

    def _new_text(self, observation) -> str:
        text = observation_text(observation)
        new = text[len(self._seen_text) :] if text.startswith(self._seen_text) else text
        self._seen_text = text
        return new.strip()

    def _open_client(self):
        parked = PARKED_CLIENTS.get(self._env_url)
        if parked:
            return parked.pop()  # opened (and reset) by the preflight
        textarena_env = import_textarena_env()
        if self._env_url == "local":
            from textarena_env.server.environment import TextArenaEnvironment

            # Offline, NLTK's download attempt only prints an error; TEXTARENA_DOWNLOAD_NLTK=0 skips it.
            download = os.environ.get("TEXTARENA_DOWNLOAD_NLTK", "1").lower() in ("1", "true")
            return TextArenaEnvironment("Wordle-v0", download_nltk=download)  # returns observations
        client = textarena_env.TextArenaEnv(base_url=self._env_url)
        # Current OpenEnv clients are async-first; .sync() gives the blocking client TRL's loop needs.
        return client.sync() if hasattr(client, "sync") else client

    def _reset_with_retries(self, seed: int | None):
        error = None
        for attempt in range(SERVER_ATTEMPTS):
            if attempt:
                time.sleep(SERVER_BACKOFF_S * 2 ** (attempt - 1))
            try:
                if self._client is None:
                    self._client = self._open_client()
                if self._env_url == "local":
                    result = seeded_local_reset(self._client, seed)
                else:
                    result = self._client.reset(**({} if seed is None else {"seed": seed}))
            except NOT_TRANSIENT:
                raise
            except Exception as exc:  # a dropped connection and a server at capacity look alike here
                error = exc
                self._close_client()  # one client per instance: the failed one is closed, not leaked
                if self._env_url == "local":
                    break  # a broken install does not mend itself
                continue
            if inspect.isawaitable(result):
                result.close()
                raise TypeError("this textarena_env client is async-only and has no .sync(): upgrade openenv-core")
            return result
        if self._env_url == "local":
            raise WordleServerError(
                f"the in-process Wordle game failed ({type(error).__name__}: {error}).\n{NLTK_REMEDY}"
            ) from error
        raise WordleServerError(
            f"Wordle server {self._env_url}: reset failed {SERVER_ATTEMPTS} times ({type(error).__name__}: {error})\n"
            + SERVER_REMEDIES
        ) from error

    def _close_client(self) -> None:
        client, self._client = self._client, None
        close = getattr(client, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass  # the session is gone either way

    def __del__(self):
        self._close_client()


# Extra reward functions with weight 0: they change nothing in training, but TRL logs each one every
# step as rewards/<name>/mean. Wordle's reward mixes wins with partial credit, so the solve rate and
# the invalid-move rate are the figures to watch.
def solve_rate(environments, **kwargs) -> list[float]:
    """1 for a rollout whose game was won, else 0."""
    return [1.0 if environment.solved else 0.0 for environment in environments]


def invalid_move_rate(environments, **kwargs) -> list[float]:
    """The fraction of a rollout's guesses that were invalid moves."""
    return [env.invalid_moves / env.moves if env.moves else 0.0 for env in environments]


def check_server_reachable(env_url: str, timeout_s: float = 5.0) -> None:
    """A plain TCP connection to the server's port: fails in seconds, before anything is installed
    or loaded, with the URL and the remedies in the message."""
    if env_url == "local":
        return
    parsed = urllib.parse.urlparse(env_url)
    if parsed.scheme not in ("http", "https", "ws", "wss") or not parsed.hostname:
        raise WordleServerError(f"--env-url must be an http(s) URL or 'local', got {env_url!r}")
    port = parsed.port or (443 if parsed.scheme in ("https", "wss") else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout_s).close()
    except OSError as error:
        raise WordleServerError(f"cannot reach the Wordle server at {env_url}: {error}\n{SERVER_REMEDIES}") from None


def preflight(env_url: str, sessions: int, stall_s: float | None = None) -> tuple[int, float]:
    """Before any model is loaded, open and reset the sessions training will hold at once, all
    together, as training will; keep them for training. In-process, one game shows that TextArena
    and its word lists work (training builds the rest). Returns (sessions opened, seconds); raises
    WordleServerError, saying how many sessions the server held, if any session fails.

    It waits as long as sessions keep opening (a server spends about a second of CPU on each) and
    gives up after `stall_s` seconds without progress. It never closes a client whose reset is still
    pending (that would block its thread for good); those threads are daemons, so the process exits."""
    stall_s = PREFLIGHT_STALL_S if stall_s is None else stall_s
    check_server_reachable(env_url)
    import_textarena_env()  # a clear install message before any thread starts
    started = time.perf_counter()
    environments = [WordleEnv(env_url) for _ in range(1 if env_url == "local" else sessions)]
    answers = queue.Queue()

    def open_session(environment):
        try:
            environment.reset()
            answers.put(None)
        except BaseException as error:  # noqa: BLE001  (reported below, with the others)
            answers.put(error)

    for environment in environments:
        threading.Thread(target=open_session, args=(environment,), daemon=True).start()
    failures, pending = [], len(environments)
    while pending:
        try:
            answer = answers.get(timeout=stall_s)
        except queue.Empty:
            break  # no session answered for stall_s: the rest are counted as failed
        pending -= 1
        if answer is not None:
            failures.append(answer)
    if failures or pending:
        held = len(environments) - len(failures) - pending
        for environment in environments:
            if environment._started:  # answered: safe to close; a pending one is left to its daemon thread
                environment._close_client()
        for failure in failures:
            if isinstance(failure, NOT_TRANSIENT) or env_url == "local":
                raise failure  # the code or the install, not the server's capacity
        if env_url == "local":
            raise WordleServerError(f"the in-process Wordle game did not start within {stall_s:.0f} s")
        # A refusal for capacity names itself; depending on timing it may also arrive as a bare
        # "ConnectionClosedOK" that has lost the reason. Quote the telling one, on one line.
        telling = [f for f in failures if "capacity" in str(f).lower()] or failures
        first = str(telling[0]).splitlines()[0] if telling else f"no answer for {stall_s:.0f} s"
        raise WordleServerError(
            f"preflight: the Wordle server at {env_url} held {held} of the {sessions} sessions training needs "
            f"at once ({len(failures)} refused, {pending} unanswered). First error: {first}\n"
            "A server you run holds MAX_CONCURRENT_ENVS sessions (8 unless set): raise it to at least "
            f"{sessions} per training process.\n{SERVER_REMEDIES}"
        )
    PARKED_CLIENTS.setdefault(env_url, []).extend(environment._client for environment in environments)
    for environment in environments:
        environment._client = None  # the client now belongs to the parking lot, not to this instance
    return len(environments), time.perf_counter() - started


@atexit.register
def close_parked_clients() -> None:
    """Sessions the preflight opened that training never took over (a failed model load, say)."""
    for clients in PARKED_CLIENTS.values():
        while clients:
            close = getattr(clients.pop(), "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass


ROLLOUTS_PER_STEP = 32  # rollouts per optimizer step and process (8 prompts x 4), the reference's

# Hardware tiers. T1: one 24 GB GPU. Full fine-tuning in fp32 with AdamW needs about 16 bytes per
# parameter (1.72e9 x 16 = 27.5 GB) before vLLM takes its share, so T1 trains LoRA adapters on a
# bf16 model (README, "24 GB plan", has the arithmetic). T2: an 80 GB GPU, Qwen3-4B, LoRA as well.
TIERS = {
    "t1": {"model": "Qwen/Qwen3-1.7B", "lora_rank": 32, "learning_rate": 1e-5, "vllm_gpu_memory_utilization": 0.3},
    "t2": {"model": "Qwen/Qwen3-4B", "lora_rank": 64, "learning_rate": 1e-5, "vllm_gpu_memory_utilization": 0.3},
}


def grpo_config(args, **overrides):
    """The GRPOConfig of the reference configuration (SPEC), with the user's flags; `overrides` are
    for the rehearsal and the memory benchmark, which change the scale but not the shape."""
    from trl import GRPOConfig

    on_gpu = torch.cuda.is_available()  # without one (--vllm-mode none, for debugging): float32, slow
    # LoRA trains float32 adapters on a frozen bf16 base. Full fine-tuning (rank 0) keeps float32
    # weights: in bf16, updates at these learning rates round away (README, "The 24 GB plan").
    dtype = "bfloat16" if on_gpu and args.lora_rank else "float32"
    settings = dict(
        output_dir=args.output_dir,
        seed=args.seed,
        learning_rate=args.learning_rate,
        num_generations=args.num_generations,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=ROLLOUTS_PER_STEP,  # 32 rollouts (8 prompts x 4) per optimizer step
        max_completion_length=1024,  # bounds the whole episode: every turn and tool response
        max_tool_calling_iterations=8,
        chat_template_kwargs={"enable_thinking": False},
        max_steps=args.max_steps,
        num_train_epochs=1,  # with max_steps=-1: one pass over the episodes
        logging_steps=1,
        log_completions=True,
        save_strategy="steps",  # a crash or Ctrl-C loses at most the steps since the last save
        save_steps=args.save_steps,
        save_total_limit=2,
        report_to=args.report_to,
        use_vllm=args.vllm_mode != "none",
        vllm_mode=args.vllm_mode if args.vllm_mode != "none" else "colocate",
        vllm_server_base_url=args.vllm_server_url,
        vllm_gpu_memory_utilization=args.vllm_gpu_memory_utilization,
        # Qwen3's own context is 40960 tokens; its KV cache alone would not fit vLLM's 30 % of 24 GB.
        vllm_max_model_length=2048,  # the prompt (about 400 tokens) plus the 1024-token episode
        bf16=on_gpu,  # mixed precision on a GPU
        model_init_kwargs={"dtype": dtype},  # TRL would otherwise load float32 in every case
        gradient_checkpointing=True,
        reward_weights=[0.0, 0.0],  # `solve_rate` and `invalid_move_rate` are logged, not trained on
    )
    settings.update(overrides)
    return GRPOConfig(**settings)


def build_grpo_trainer(
    config, model, train_dataset, environment_factory, *, processing_class=None, lora_rank=0, trainer_class=None
):
    """GRPOTrainer with an environment: the one builder that --full, --rehearse and the memory
    benchmark share. The environment's get_reward() is the training reward (weight 1)."""
    from trl import GRPOTrainer

    peft_config = None
    if lora_rank:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=lora_rank, lora_alpha=2 * lora_rank, target_modules="all-linear", task_type="CAUSAL_LM"
        )
    return (trainer_class or GRPOTrainer)(
        model=model,
        args=config,
        train_dataset=train_dataset,
        reward_funcs=[solve_rate, invalid_move_rate],
        environment_factory=environment_factory,
        processing_class=processing_class,
        peft_config=peft_config,
    )


def resolve_tier(args) -> None:
    """Fill the flags the user left unset from the chosen tier."""
    for name, value in TIERS[args.tier].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.output_dir is None:
        args.output_dir = "wordle-grpo-" + args.model.split("/")[-1].lower()


def last_checkpoint(output_dir: str) -> str | None:
    """The newest checkpoint-<step> folder the trainer saved in output_dir, if any."""
    steps = [
        int(name.split("-")[1])
        for name in (os.listdir(output_dir) if os.path.isdir(output_dir) else [])
        if name.startswith("checkpoint-") and name.split("-")[1].isdigit()
    ]
    return os.path.join(output_dir, f"checkpoint-{max(steps)}") if steps else None


def wordle_dataset(episodes: int, seed: int):
    """The training prompts: the same instruction each time, and a `seed` column that reaches
    WordleEnv.reset(**row), so the G rollouts of a prompt play one secret word and different prompts
    play different ones. Seeds are drawn below EVAL_FIRST_SEED: evaluation games never repeat them."""
    from datasets import Dataset

    rng = random.Random(seed)
    prompt = [{"role": "user", "content": WORDLE_PROMPT}]
    return Dataset.from_list([{"prompt": prompt, "seed": rng.randrange(EVAL_FIRST_SEED)} for _ in range(episodes)])


def run_full(args) -> None:
    resolve_tier(args)
    if args.vllm_mode == "colocate" and not torch.cuda.is_available():
        raise SystemExit(
            "--full: vLLM colocated (the default) needs a CUDA GPU, and this machine has none. "
            "To debug the path on a CPU, slowly, pass --vllm-mode none."
        )
    if args.lora_rank == 0 and args.tier == "t1":
        raise SystemExit(
            "--lora-rank 0 (full fine-tuning) does not fit tier t1: float32 weights, gradients and Adam "
            "moments of Qwen3-1.7B take about 27.5 GB, more than the 24 GB card (and bf16 weights would "
            "round the updates away). Train LoRA adapters (--lora-rank 32), or use a larger GPU (--tier t2)."
        )
    checkpoint = last_checkpoint(args.output_dir)
    if args.resume and checkpoint is None:
        raise SystemExit(f"--resume: no checkpoint in {args.output_dir}; run without --resume to start")
    if checkpoint and not args.resume:
        raise SystemExit(
            f"{args.output_dir} already holds {checkpoint}: pass --resume to continue it, or another --output-dir"
        )

    # Fail in seconds, before a model is loaded, if the game cannot be played: first a bare connection
    # (before TRL is even imported), then every session this process will hold at once.
    check_server_reachable(args.env_url)
    config = grpo_config(args)
    sessions = config.per_device_train_batch_size * config.steps_per_generation  # rollouts in flight here
    opened, seconds = preflight(args.env_url, sessions)
    print(f"preflight: {opened} Wordle sessions opened and reset at {args.env_url} in {seconds:.1f} s")

    dataset = wordle_dataset(args.episodes, args.seed)
    try:
        trainer = build_grpo_trainer(
            config, args.model, dataset, functools.partial(WordleEnv, args.env_url), lora_rank=args.lora_rank
        )
    except OSError as error:  # what transformers raises for a model it cannot find or download
        raise ModelLoadError(
            f"cannot load the model {args.model!r}: {error}\nOffline, pass --model with a local folder that "
            "holds the model (or set HF_HOME to a cache that has it)."
        ) from None
    try:
        trainer.train(resume_from_checkpoint=checkpoint if args.resume else None)
    except KeyboardInterrupt:
        last = last_checkpoint(args.output_dir) or "none yet"
        raise SystemExit(f"interrupted; last checkpoint: {last}. Continue with --resume.") from None
    trainer.save_model(args.output_dir)
    what = "LoRA adapter (merge with peft's merge_and_unload)" if args.lora_rank else "model"
    print(f"trained {what} saved to {args.output_dir}")


# =====================================================================================================
# 7. The rehearsal: the --full code path on a CPU, offline, with a tiny model
# =====================================================================================================
# No GPU and no model hub: the rehearsal builds a tokenizer with the `tokenizers` library (carrying
# TRL's own Qwen3 chat template) and a tiny Qwen3 with random weights, teaches it the tool-call format
# with a short supervised pass, then runs GRPO steps against GuessEnv through the same builder as
# --full. It checks on TRL's own batches that tool_mask is 0 exactly on the tokens TRL inserted after
# each tool call and 1 on every token the model generated.

QWEN3_SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]
TINY_QWEN3 = dict(
    hidden_size=64,
    num_hidden_layers=2,
    intermediate_size=192,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=1024,
    tie_word_embeddings=True,
)


def qwen3_chat_template() -> str:
    import trl

    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen3.jinja"), encoding="utf-8") as file:
        return file.read()


def guess_call_text(value) -> str:
    """A tool call as Qwen3 writes it, closed by the end-of-turn token."""
    return f'<tool_call>\n{{"name": "guess", "arguments": {{"value": {value}}}}}\n</tool_call><|im_end|>'


@functools.lru_cache(maxsize=4)
def training_chat_template(tokenizer) -> str:
    """The template TRL renders with: for Qwen3, a prefix-preserving variant of the chat template,
    so that earlier turns render the same whether or not a later message follows."""
    from trl.chat_template_utils import get_training_chat_template

    return get_training_chat_template(tokenizer) or tokenizer.chat_template


def render_prompt_ids(tokenizer, prompt_text: str) -> list[int]:
    """The prompt tokens exactly as TRL renders them: the tools' schema, the user turn, and the
    generation prompt (with the empty think block of enable_thinking=False)."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt_text}],
        chat_template=training_chat_template(tokenizer),
        tools=[GuessEnv().guess],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
        enable_thinking=False,
    )


def tool_response_ids(tokenizer, name: str, content: str) -> list[int]:
    """The tokens that follow the model's end-of-turn after a tool call: the tool response in its
    chat-template wrapping and the next assistant header. Rendered as the difference between a
    conversation with and without the tool message (the same construction TRL uses)."""
    call = [
        {"role": "user", "content": "x"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {}}}],
        },
    ]
    template = training_chat_template(tokenizer)
    before = tokenizer.apply_chat_template(
        call, chat_template=template, tokenize=True, return_dict=False, enable_thinking=False
    )
    after = tokenizer.apply_chat_template(
        call + [{"role": "tool", "name": name, "content": content}],
        chat_template=template,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
        enable_thinking=False,
    )
    end = max(i for i, token in enumerate(before) if token == tokenizer.eos_token_id) + 1
    if after[:end] != before[:end]:
        raise ValueError("the chat template does not render earlier turns the same way: cannot cut the tool response")
    return after[end:]


@functools.lru_cache(maxsize=64)
def rendered(tokenizer, prompt_text: str, feedback: str) -> tuple[list[int], list[int]]:
    """(prompt ids, tool response ids), cached: rendering a chat template takes milliseconds, and an
    episode of GuessEnv has only a handful of distinct pieces."""
    return render_prompt_ids(tokenizer, prompt_text), tool_response_ids(tokenizer, "guess", feedback)


def random_guess_episode(rng: random.Random) -> Episode:
    """A GuessEnv episode played with uniformly random guesses: the warm start's data (format, no strategy)."""
    env = GuessEnv()
    seed = rng.randrange(10**9)
    return play_episode(env, lambda belief: rng.randint(1, env.n), seed=seed)


def format_example(tokenizer, rng: random.Random, closing: str = "Done.") -> tuple[list[int], list[int]]:
    """One warm-start example as (token ids, loss weights): each trace entry becomes the tokens TRL
    would see for it, and keeps its weight: 1 on what the model writes, 0 on the rest. After the last
    tool response the model writes `closing` and ends its turn (TRL lets it have that last word)."""
    trace = random_guess_episode(rng).trace
    prompt_text = trace[0].text
    ids, weights = [], []
    for entry in trace:
        if entry.role == "user":
            piece = rendered(tokenizer, prompt_text, "")[0]
        elif entry.role == "assistant":
            piece = tokenizer.encode(guess_call_text(entry.guess), add_special_tokens=False)
        else:
            piece = rendered(tokenizer, prompt_text, entry.text)[1]
        ids, weights = ids + piece, weights + [entry.weight] * len(piece)
    closing_ids = tokenizer.encode(closing + tokenizer.eos_token, add_special_tokens=False)
    return ids + closing_ids, weights + [1] * len(closing_ids)


def build_tiny_tokenizer(seed: int = 0):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    template = qwen3_chat_template()
    # Train byte-level BPE on rendered episodes, so the tool schema and the feedback words are cheap.
    bootstrap = Tokenizer(models.BPE())
    bootstrap.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bootstrap.decoder = decoders.ByteLevel()
    wrapped = PreTrainedTokenizerFast(tokenizer_object=bootstrap)
    wrapped.chat_template = template
    rng, corpus = random.Random(seed), []
    for _ in range(50):
        messages = []
        for entry in random_guess_episode(rng).trace:
            if entry.role == "assistant":
                call = {"type": "function", "function": {"name": "guess", "arguments": {"value": entry.guess}}}
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            elif entry.role == "tool":
                messages.append({"role": "tool", "name": "guess", "content": entry.text})
            else:
                messages.append({"role": "user", "content": entry.text})
        corpus.append(
            wrapped.apply_chat_template(messages, tools=[GuessEnv().guess], tokenize=False, enable_thinking=False)
        )
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=QWEN3_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bootstrap.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bootstrap,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side="left",
        additional_special_tokens=QWEN3_SPECIAL_TOKENS[3:],
    )
    tokenizer.chat_template = template  # TRL recognises it and sets the Qwen3 response parser itself
    return tokenizer


def build_tiny_model(tokenizer, seed: int = 0, **shape):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    shape = {"vocab_size": len(tokenizer), **TINY_QWEN3, **shape}  # a real shape can be passed instead
    config = Qwen3Config(
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **shape
    )
    return Qwen3ForCausalLM(config)


def warm_start(
    model, tokenizer, steps: int, batch: int = 16, lr: float = 3e-3, seed: int = 0, closing: str = "Done."
) -> float:
    """Supervised pass on the exact token sequences TRL generates from; loss only where weight is 1.
    Returns the final loss."""
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        examples = [format_example(tokenizer, rng, closing) for _ in range(batch)]
        width = max(len(ids) for ids, _ in examples)
        ids = torch.full((batch, width), tokenizer.pad_token_id)
        weights = torch.zeros(batch, width)
        for row, (example_ids, example_weights) in enumerate(examples):
            ids[row, : len(example_ids)] = torch.tensor(example_ids)
            weights[row, : len(example_weights)] = torch.tensor(example_weights, dtype=torch.float)
        logits = model(input_ids=ids).logits  # right padding: pads come after the text, and weigh 0
        token_loss = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
        loss = (token_loss * weights[:, 1:]).sum() / weights[:, 1:].sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


def expected_tool_mask(prompt: list[int], completion: list[int], turns: list[tuple[list[int], list[int]]]):
    """Rebuild, from the recorded generation turns alone, which completion tokens the model generated
    (1) and which were inserted after a tool call (0). Returns None if the turns do not explain the
    completion."""
    full, mask = prompt + completion, []
    while len(prompt) + len(mask) < len(full):
        position = len(prompt) + len(mask)
        # The turn that continued this sequence: its input is what came before plus the inserted
        # tokens, and its output follows (cut short if TRL truncated the episode at the length budget).
        match = next(
            (
                (inp, out)
                for inp, out in turns
                if len(inp) >= position
                and full[: len(inp)] == inp
                and out
                and full[len(inp) : len(inp) + len(out)] == out[: len(full) - len(inp)]
            ),
            None,
        )
        if match is None:
            return None
        inserted = len(match[0]) - position
        mask += [0] * inserted + [1] * min(len(match[1]), len(full) - len(match[0]))
    return mask if len(mask) == len(completion) else None


def check_tool_mask_on_batch(batch: dict, turns) -> tuple[int, int]:
    """Compare TRL's tool_mask with the mask rebuilt from the recorded turns, on every rollout.
    Returns (masked tokens, trained tokens); raises SmokeFailure on any disagreement."""
    masked = trained = 0
    for row in range(batch["completion_ids"].shape[0]):
        prompt = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()].tolist()
        length = int(batch["completion_mask"][row].sum())
        completion = batch["completion_ids"][row][:length].tolist()
        expected = expected_tool_mask(prompt, completion, turns)
        check(expected is not None, f"rollout {row}: the recorded generation turns do not explain its completion")
        actual = batch["tool_mask"][row][:length].tolist()
        check(
            actual == expected,
            f"rollout {row}: tool_mask {actual} differs from the generated/inserted split {expected}",
        )
        masked += expected.count(0)
        trained += expected.count(1)
    return masked, trained


def recording_trainer_class():
    from trl import GRPOTrainer

    class RecordingGRPOTrainer(GRPOTrainer):
        """GRPOTrainer that records each generation turn (input ids, generated ids), so that the
        rehearsal can check TRL's tool_mask on TRL's own batch."""

        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            completion_ids, logprobs = super()._generate_single_turn(prompt_ids, *args, **kwargs)
            self.generated_turns.extend(zip(prompt_ids, completion_ids, strict=True))
            return completion_ids, logprobs

        def _generate_and_score_completions(self, inputs):
            self.generated_turns = []
            batch = super()._generate_and_score_completions(inputs)
            self.mask_counts.append(check_tool_mask_on_batch(batch, self.generated_turns))
            return batch

    return RecordingGRPOTrainer


def rehearsal_config(output_dir: str, steps: int, seed: int, **overrides):
    """The --full configuration (grpo_config), scaled down for a CPU: 2 prompts x 4 rollouts a step,
    transformers generation, short episodes, nothing saved or reported."""
    scale = argparse.Namespace(
        output_dir=output_dir,
        seed=seed,
        lora_rank=0,
        learning_rate=1e-4,
        num_generations=4,
        max_steps=steps,
        save_steps=1000,
        report_to="none",
        vllm_mode="none",
        vllm_server_url=None,
        vllm_gpu_memory_utilization=0.3,
    )
    cpu = dict(
        use_cpu=True,
        bf16=False,
        model_init_kwargs=None,
        gradient_checkpointing=False,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=1,
        max_completion_length=192,
        log_completions=False,
        save_strategy="no",
        disable_tqdm=True,
        seed=seed,
    )
    return grpo_config(scale, **{**cpu, **overrides})


def guess_dataset(rows: int):
    """The training prompts for GuessEnv. Each row is one prompt; its `seed` column reaches
    GuessEnv.reset(**row), so the G rollouts of a row share one hidden number, as GRPO needs."""
    from datasets import Dataset

    return Dataset.from_list([{"prompt": [{"role": "user", "content": ""}], "seed": i} for i in range(rows)])


def run_rehearse(args) -> None:
    started = time.perf_counter()
    torch.set_num_threads(1)  # tiny matrices: a second thread costs more than it saves (measured)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

    tokenizer = build_tiny_tokenizer(args.seed)
    model = build_tiny_model(tokenizer, args.seed)
    loss = warm_start(model, tokenizer, steps=args.warm_start_steps, seed=args.seed)
    print(f"warm start: {args.warm_start_steps} steps on random-guess episodes, final loss {loss:.3f}")

    dataset = guess_dataset(64)
    with tempfile.TemporaryDirectory(prefix="rehearsal-") as output_dir:
        config = rehearsal_config(output_dir, args.rehearse_steps, args.seed)
        trainer = build_grpo_trainer(
            config, model, dataset, GuessEnv, processing_class=tokenizer, trainer_class=recording_trainer_class()
        )
        trainer.mask_counts = []
        trainer.train()

    history = [entry for entry in trainer.state.log_history if "tools/call_frequency" in entry]
    rollouts_per_step = config.per_device_train_batch_size * config.gradient_accumulation_steps
    tool_calls = sum(entry["tools/call_frequency"] for entry in history) * rollouts_per_step  # it is per rollout
    masked = sum(m for m, _ in trainer.mask_counts)
    trained = sum(t for _, t in trainer.mask_counts)
    check(
        trainer.state.global_step == args.rehearse_steps,
        f"ran {trainer.state.global_step} GRPO steps, not {args.rehearse_steps}",
    )
    check(len(trainer.mask_counts) >= args.rehearse_steps, "the tool_mask check did not run on every batch")
    check(tool_calls > 0, "the model made no tool call TRL could parse: the warm start did not teach the format")
    check(masked > 0, "no token was masked: no tool response reached the completions")
    rewards = [round(entry.get("rewards/GuessEnv/mean", float("nan")), 3) for entry in history]
    print(
        f"grpo: {trainer.state.global_step} steps, reward per step {rewards}, {time.perf_counter() - started:.0f} s in all"
    )
    print(
        f"rehearsal ok: steps={trainer.state.global_step} tool_calls={tool_calls:.0f} masked_tokens={masked} trained_tokens={trained}"
    )


# =====================================================================================================
# 8. A tiny transformer learns: the same GRPOTrainer run, to a real result, on a CPU
# =====================================================================================================
# The rehearsal proves the plumbing; --learn makes it teach. The same
# GRPOTrainer(environment_factory=GuessEnv) run trains a 2-layer, 64-wide Qwen3 (about 0.15 M
# weights) that reads the tool responses and learns to binary-search. These choices make that fit in
# minutes on a laptop CPU; each was measured (README, "What limits a tiny model"):
# - Short episodes. TRL's Qwen3 chat template wraps a 3-guess episode in about 90 tokens of
#   boilerplate, and a tiny model's attention drowns in it. The tokenizer gets one token for each
#   constant piece: the prompt, the text around the guessed number, each whole tool response. An
#   episode becomes 16 tokens and every one of them carries information; the text is unchanged.
# - Numbers that know their order: the embeddings of 1..n start as a thermometer code, so 4 and 5
#   look alike from the first step, and 1 and 8 do not.
# - A format that holds. Every token of a call is trained, not only the number, and Adam's first
#   steps move every weight by about the full learning rate however small its gradient: at 3e-3
#   without a warm-up one step can knock the tool-call format over. So: a firm warm start, a
#   learning-rate warm-up, and after the last tool response the model just ends its turn (a closing
#   word is one more thing to unlearn; trained to say "Done." there, the model rambled instead).

LEARN_HPARAMS = dict(
    warm_start_steps=400,  # supervised format steps (batch 32), uniformly random guesses
    closing="",  # after the last tool response the model just ends its turn: no words to unlearn
    num_generations=8,  # G: rollouts per prompt
    learning_rate=3e-3,  # large by LLM standards: the model is tiny and starts from scratch
    warmup_steps=20,  # linear warm-up, then linear decay to 0 (TRL's default schedule)
    max_completion_length=32,  # the whole episode: 3 calls of 4 tokens, 3 responses, the closing
    max_tool_calling_iterations=3,  # GuessEnv allows 3 guesses
    mask_truncated_completions=True,  # an episode cut off at the budget teaches nothing
)


def learn_tokenizer(seed: int = 0):
    """build_tiny_tokenizer plus one token for each constant piece of a GuessEnv episode. The
    rendered text is unchanged, so TRL's tool-call parser and tool_mask see what they always see."""
    from tokenizers import AddedToken

    tokenizer = build_tiny_tokenizer(seed)
    before_number, after_number = guess_call_text("#").removesuffix(tokenizer.eos_token).split("#")
    pieces = [tokenizer.decode(render_prompt_ids(tokenizer, GuessEnv().reset())), before_number, after_number]
    pieces += [tokenizer.decode(tool_response_ids(tokenizer, "guess", word)) for word in ("higher", "lower", "correct")]
    # Added tokens match longest-first, so these win over the special tokens inside them.
    tokenizer.add_tokens([AddedToken(piece, normalized=False, special=False) for piece in pieces])
    return tokenizer


def three_guess_tokens(tokenizer) -> int:
    """Tokens in the prompt and three calls with their responses: the context a 3-guess episode fills."""
    prompt_ids, response_ids = rendered(tokenizer, GuessEnv().reset(), "higher")
    call_ids = tokenizer.encode(guess_call_text(4), add_special_tokens=False)
    return len(prompt_ids) + 3 * (len(call_ids) + len(response_ids))


def thermometer_number_embeddings(model, tokenizer, n: int) -> None:
    """Dimension j of number k's embedding is +1 if k > j, else -1 (j = 1..n-1): nearby numbers
    start close, far ones far apart. The other dimensions keep their random values."""
    embeddings = model.get_input_embeddings().weight
    with torch.no_grad():
        for k in range(1, n + 1):
            (token,) = tokenizer.encode(str(k), add_special_tokens=False)
            embeddings[token, : n - 1] = torch.tensor([1.0 if k > j else -1.0 for j in range(1, n)])


def first_tool_call(text: str):
    """The Qwen3 tool call in `text` as (name, arguments), or None if there is none. Raises
    ValueError for a call that is opened but cannot be read."""
    if "<tool_call>" not in text:
        return None
    try:
        call = json.loads(text.split("<tool_call>", 1)[1].split("</tool_call>", 1)[0])
        name, arguments = call["name"], call["arguments"]
    except (json.JSONDecodeError, KeyError, TypeError, IndexError) as error:
        raise ValueError(f"unreadable tool call: {error}") from None
    if not isinstance(arguments, dict):
        raise ValueError("tool call arguments are not an object")
    return name, arguments


@torch.no_grad()
def sampled_success(
    model, tokenizer, episodes: int, first_seed: int, max_calls: int = LEARN_HPARAMS["max_tool_calling_iterations"]
) -> tuple[float, float]:
    """(success rate, malformed tool calls per episode), sampling from the model (temperature 1, as in
    training) on seeded GuessEnv episodes, batched turn by turn the way TRL's tool loop runs them:
    a call is executed and its result, or the environment's error, is appended; a turn without a
    tool call ends the episode. An episode counts as solved only if the environment says so.
    Malformed: a call that cannot be read, or that the environment refuses (no turn is spent)."""
    model.eval()
    environments = [GuessEnv() for _ in range(episodes)]
    prompts = [environment.reset(seed=first_seed + i) for i, environment in enumerate(environments)]
    sequences = [list(rendered(tokenizer, prompt, "")[0]) for prompt in prompts]
    live, malformed = list(range(episodes)), 0
    for _ in range(max_calls):
        if not live:
            break
        width = max(len(sequences[i]) for i in live)
        ids = torch.full((len(live), width), tokenizer.pad_token_id)
        attention = torch.zeros_like(ids)
        for row, i in enumerate(live):  # left padding, as for any batched generation
            ids[row, width - len(sequences[i]) :] = torch.tensor(sequences[i])
            attention[row, width - len(sequences[i]) :] = 1
        output = model.generate(
            input_ids=ids,
            attention_mask=attention,
            max_new_tokens=8,  # a call is 4 tokens
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )[:, width:].tolist()
        still_live = []
        for row, i in enumerate(live):
            turn = output[row]
            if tokenizer.eos_token_id in turn:
                turn = turn[: turn.index(tokenizer.eos_token_id) + 1]
            try:
                call = first_tool_call(tokenizer.decode(turn))
            except ValueError:
                malformed += 1
                continue
            if call is None:
                continue  # the model ended the episode
            name, arguments = call
            try:
                if name != "guess":
                    raise ValueError(f"Tool {name} not found.")
                result = environments[i].guess(**arguments)
            except (ValueError, TypeError) as error:  # TRL hands the model {"error": message}
                malformed += 1
                result = str({"error": str(error)})
            if result != "correct":
                sequences[i] += turn + list(rendered(tokenizer, prompts[i], result)[1])
                still_live.append(i)
        live = still_live
    solved = sum(environment.get_reward() for environment in environments)
    return solved / episodes, malformed / episodes


def learning_trainer_class():
    from trl import GRPOTrainer

    class LearningGRPOTrainer(GRPOTrainer):
        """GRPOTrainer that remembers two answers it would otherwise work out again for every rollout:
        the tokens of a tool response (TRL renders the chat template twice per tool call to find them)
        and the parse of a generated turn (transformers' response parser, given the turn and what came
        before it). With a 0.15 M-weight model these took most of a step (measured: README). Both
        depend only on their inputs, which repeat: 512 rollouts a step share one prompt and a few
        dozen histories."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._tool_suffix_cache = {}
            parse, parsed = self._tokenizer.parse_response, {}

            def remembered_parse(response, **given):  # TRL passes prefix= and tools= where supported
                tools = tuple(getattr(tool, "__name__", None) or repr(tool) for tool in given.get("tools") or ())
                key = (tuple(response), tuple(given.get("prefix") or ()), tools)
                if key not in parsed:
                    parsed[key] = parse(response, **given)
                return copy.deepcopy(parsed[key])  # TRL edits the message it gets back

            self._tokenizer.parse_response = remembered_parse

        def _get_tool_suffix_ids(self, tool_messages):
            if not all(isinstance(message["content"], str) for message in tool_messages):
                return super()._get_tool_suffix_ids(tool_messages)
            key = tuple((message["name"], message["content"]) for message in tool_messages)
            if key not in self._tool_suffix_cache:
                self._tool_suffix_cache[key] = super()._get_tool_suffix_ids(tool_messages)
            return list(self._tool_suffix_cache[key])

    return LearningGRPOTrainer


def learn_config(output_dir: str, steps: int, seed: int, prompts: int):
    """The rehearsal's configuration with LEARN_HPARAMS: `prompts` groups of G rollouts per step."""
    trl_settings = {name: value for name, value in LEARN_HPARAMS.items() if name not in ("warm_start_steps", "closing")}
    batch = prompts * LEARN_HPARAMS["num_generations"]
    return rehearsal_config(output_dir, steps, seed, per_device_train_batch_size=batch, logging_steps=1, **trl_settings)


def run_learn(args) -> None:
    started = time.perf_counter()
    torch.set_num_threads(1)  # tiny matrices: a second thread costs more than it saves (measured)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    hp = LEARN_HPARAMS
    env = GuessEnv()
    optimum, random_rate = success_optimum(env.n, env.max_turns), success_random(env.n, env.max_turns)
    tokenizer = learn_tokenizer(args.seed)
    model = build_tiny_model(tokenizer, args.seed)
    thermometer_number_embeddings(model, tokenizer, env.n)
    print(
        f"tokenizer: a 3-guess episode is {three_guess_tokens(tokenizer)} tokens "
        f"({three_guess_tokens(build_tiny_tokenizer(args.seed))} with the rehearsal's tokenizer)"
    )
    loss = warm_start(model, tokenizer, hp["warm_start_steps"], batch=32, seed=args.seed, closing=hp["closing"])
    print(f"warm start: {hp['warm_start_steps']} steps on random-guess episodes, final loss {loss:.3f}")
    torch.manual_seed(args.seed)  # the evaluation samples: same seeds, same draws, before and after
    before, malformed_before = sampled_success(model, tokenizer, args.learn_eval_episodes, EVAL_FIRST_SEED)
    print(f"before GRPO: success {before:.3f}, malformed tool calls per episode {malformed_before:.3f}")

    dataset = guess_dataset(args.learn_prompts * args.learn_steps)  # a fresh prompt for every group
    with tempfile.TemporaryDirectory(prefix="learn-") as output_dir:
        config = learn_config(output_dir, args.learn_steps, args.seed, args.learn_prompts)
        trainer = build_grpo_trainer(
            config, model, dataset, GuessEnv, processing_class=tokenizer, trainer_class=learning_trainer_class()
        )
        grpo_started = time.perf_counter()
        trainer.train()
    curve = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    print(
        f"grpo: {trainer.state.global_step} steps of {config.per_device_train_batch_size} episodes, "
        f"batch success first {curve[0]:.3f} last {curve[-1]:.3f}, {time.perf_counter() - grpo_started:.0f} s"
    )
    torch.manual_seed(args.seed)
    after, malformed_after = sampled_success(trainer.model, tokenizer, args.learn_eval_episodes, EVAL_FIRST_SEED)
    print(f"malformed tool calls per episode before={malformed_before:.3f} after={malformed_after:.3f}")
    print(f"tiny model success before={before:.3f} after={after:.3f} (optimum {optimum:.3f}, random {random_rate:.3f})")
    if args.plot:
        plot_curve(
            args.plot, curve, optimum, random_rate, title="Tiny Qwen3, TRL GRPOTrainer, GuessEnv", xlabel="GRPO step"
        )
        print(f"plot: {args.plot}")
    print(
        f"learn: {args.learn_eval_episodes} evaluation episodes each side, {time.perf_counter() - started:.0f} s in all"
    )


# =====================================================================================================
# Command line: every hyperparameter in one place
# =====================================================================================================


def int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {value}")
        return value

    return parse


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def steps_or_all(text: str) -> int:
    value = int_at_least(-1)(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be a whole number >= 1, or -1 for one pass over the episodes")
    return value


# Which flags belong to which mode: a flag given to another mode is refused, not silently ignored.
MODE_FLAGS = {
    "smoke": ["n", "max_turns", "iterations", "prompts", "group", "lr", "eval_episodes", "plot"],
    "full": [
        "tier",
        "model",
        "env_url",
        "episodes",
        "output_dir",
        "num_generations",
        "learning_rate",
        "lora_rank",
        "max_steps",
        "save_steps",
        "vllm_mode",
        "vllm_server_url",
        "vllm_gpu_memory_utilization",
        "report_to",
        "resume",
    ],
    "rehearse": ["warm_start_steps", "rehearse_steps"],
    "learn": ["learn_steps", "learn_prompts", "learn_eval_episodes", "plot"],
}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default only where it has one worth showing (not for modes, switches, unset)."""

    def _get_help_string(self, action):
        if action.default is None or action.const is not None or action.nargs == 0:
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Agentic RL in one file: a tool environment, GRPO, observation masking.",
        formatter_class=HelpFormatter,
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--smoke",
        dest="mode",
        action="store_const",
        const="smoke",
        help="tabular GRPO on the number-guessing game, on a CPU in seconds, with checks (default)",
    )
    modes.add_argument(
        "--full",
        dest="mode",
        action="store_const",
        const="full",
        help="train Qwen3 with TRL's GRPOTrainer against OpenEnv Wordle (GPU, requirements-full.txt)",
    )
    modes.add_argument(
        "--rehearse",
        dest="mode",
        action="store_const",
        const="rehearse",
        help="the --full code path on a CPU, offline: tiny Qwen3, GuessEnv, TRL's tool loop, checks",
    )
    modes.add_argument(
        "--learn",
        dest="mode",
        action="store_const",
        const="learn",
        help="a tiny Qwen3 learns GuessEnv through TRL's GRPOTrainer on a CPU (minutes), evaluated before and after",
    )
    parser.set_defaults(mode="smoke")
    parser.add_argument("--seed", type=int_at_least(0), default=0, help="every mode: seed for training and evaluation")

    smoke = parser.add_argument_group("--smoke: the tabular lab")
    smoke.add_argument("--n", type=int_at_least(2), default=8, help="hidden number is in [1, n]")
    smoke.add_argument("--max-turns", type=int_at_least(1), default=3, help="guesses per episode")
    smoke.add_argument("--iterations", type=int_at_least(1), default=50, help="GRPO updates")
    smoke.add_argument("--prompts", type=int_at_least(1), default=12, help="prompts (seeds) per update, one group each")
    smoke.add_argument("--group", type=int_at_least(2), default=8, help="G: rollouts per prompt")
    smoke.add_argument("--lr", type=positive_float, default=0.25, help="Adam learning rate for the logit table")
    smoke.add_argument("--eval-episodes", type=int_at_least(100), default=2000, help="episodes to measure success on")
    smoke.add_argument(
        "--plot", metavar="PATH", help="--smoke and --learn: write the learning curve as a PNG (needs matplotlib)"
    )

    full = parser.add_argument_group("--full: TRL GRPOTrainer on OpenEnv Wordle (unset values come from --tier)")
    full.add_argument(
        "--tier",
        choices=sorted(TIERS),
        default="t1",
        help="t1: Qwen3-1.7B + LoRA on one 24 GB GPU; t2: Qwen3-4B + LoRA on 80 GB",
    )
    full.add_argument("--model", help="model id or path (tier default)")
    full.add_argument(
        "--env-url", default=WORDLE_URL, help="'local' plays the game in this process; or an OpenEnv Wordle server URL"
    )
    full.add_argument("--episodes", type=int_at_least(1), default=1000, help="dataset size: prompts to train on")
    full.add_argument("--output-dir", help="checkpoints and the final model (default wordle-grpo-<model>)")
    full.add_argument("--num-generations", type=int_at_least(2), default=4, help="G: rollouts per prompt")
    full.add_argument("--learning-rate", type=positive_float, help="learning rate (tier default)")
    full.add_argument("--lora-rank", type=int_at_least(0), help="LoRA rank; 0 = full fine-tuning (tier default)")
    full.add_argument(
        "--max-steps", type=steps_or_all, default=-1, help="optimizer steps; -1 = one pass over the episodes"
    )
    full.add_argument("--save-steps", type=int_at_least(1), default=10, help="checkpoint every this many steps")
    full.add_argument(
        "--vllm-mode",
        choices=["colocate", "server", "none"],
        default="colocate",
        help="colocate: vLLM shares the GPU; server: `trl vllm-serve` elsewhere; none: transformers generate",
    )
    full.add_argument("--vllm-server-url", help="with --vllm-mode server: the vLLM server, e.g. http://10.0.0.2:8000")
    full.add_argument(
        "--vllm-gpu-memory-utilization", type=positive_float, help="colocate: vLLM's share of the GPU (tier default)"
    )
    full.add_argument(
        "--report-to",
        choices=["none", "trackio", "wandb", "tensorboard"],
        default="none",
        help="where TRL sends its metrics",
    )
    full.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --output-dir")

    rehearse = parser.add_argument_group("--rehearse: the --full path offline on a CPU")
    rehearse.add_argument("--warm-start-steps", type=int_at_least(1), default=150, help="supervised format steps")
    rehearse.add_argument("--rehearse-steps", type=int_at_least(1), default=4, help="GRPO steps through TRL")

    learn = parser.add_argument_group(
        "--learn: a tiny transformer learns GuessEnv through TRL (the rest: LEARN_HPARAMS)"
    )
    learn.add_argument("--learn-steps", type=int_at_least(1), default=200, help="GRPO steps")
    learn.add_argument(
        "--learn-prompts", type=int_at_least(1), default=64, help="prompts per GRPO step (x G=8 rollouts)"
    )
    learn.add_argument(
        "--learn-eval-episodes", type=int_at_least(100), default=400, help="held-out episodes, before and after GRPO"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (only --plot needs it)
        except ImportError:
            parser.error("--plot needs matplotlib, which is not installed: pip install matplotlib")
    defaults = vars(parser.parse_args([]))
    owners = {}
    for mode, flags in MODE_FLAGS.items():
        for flag in flags:
            owners.setdefault(flag, []).append(mode)
    for flag, modes in owners.items():
        if args.mode not in modes and getattr(args, flag) != defaults[flag]:
            belongs = " and ".join(f"--{mode}" for mode in modes)
            parser.error(f"--{flag.replace('_', '-')} belongs to {belongs}, not --{args.mode}")
    if args.mode == "full" and ROLLOUTS_PER_STEP % args.num_generations:
        parser.error(f"--num-generations must divide the {ROLLOUTS_PER_STEP} rollouts of a step (2, 4, 8, 16 or 32)")
    if args.mode == "full" and args.episodes < ROLLOUTS_PER_STEP // args.num_generations:
        parser.error(
            f"--episodes must be at least {ROLLOUTS_PER_STEP // args.num_generations}, the prompts of one step"
        )
    if args.mode == "full" and args.vllm_mode == "server" and not args.vllm_server_url:
        parser.error("--vllm-mode server needs --vllm-server-url (the address `trl vllm-serve` listens on)")
    if args.mode == "full" and args.vllm_gpu_memory_utilization is not None and args.vllm_gpu_memory_utilization >= 1:
        parser.error("--vllm-gpu-memory-utilization must be a fraction below 1")
    try:
        {"smoke": run_smoke, "full": run_full, "rehearse": run_rehearse, "learn": run_learn}[args.mode](args)
    except (SmokeFailure, WordleServerError, MissingClientError, ModelLoadError) as failure:
        print(f"{args.mode} FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    exit_code = main()
    if build_parser().parse_args().mode == "smoke":
        # The interpreter's teardown takes about 0.5 s once torch is loaded (measured), longer than the
        # whole lesson. --smoke leaves no file, thread or server open, so it leaves at once.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)
    sys.exit(exit_code)
