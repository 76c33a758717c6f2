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
    python env_rollout.py --smoke          the whole loop in miniature on a CPU, in seconds (the default)
    python env_rollout.py --full           Qwen3 + TRL GRPOTrainer against OpenEnv Wordle on a GPU
    python env_rollout.py --full --tiny    the same run on a CPU, offline, with a tiny model (before GPU time)
    python env_rollout.py --rehearse       the --full code path offline on a CPU, with a tiny model, GuessEnv
    python env_rollout.py --learn          that tiny model learns GuessEnv through TRL, on a CPU, in minutes
    python env_rollout.py --learn --no-mask   the same, trained on the environment's tokens too (the ablation)
    python env_rollout.py --check M:CLASS  your own environment class against TRL's contract (env_check.py)

Read it top to bottom: the smoke lab's hyperparameters, then 1. the environment, 2. the policy,
3. rollout and trace, 4. the GRPO update, 5. the smoke run and its checks, 6. the full path (Wordle,
TRL), and the command line. The tiny model behind --rehearse and --learn lives beside this file, in
tiny_qwen.py.
"""

import argparse
import atexit
import copy
import dataclasses
import functools
import inspect
import json
import math
import os
import queue
import random
import socket
import sys
import threading
import time
import urllib.parse
import zlib
from typing import NamedTuple

import torch


def option(default, help: str, **accepts):
    """A hyperparameter: its default and its one-line doc. The command line makes a flag of it;
    `accepts` (at_least=, positive=, fraction=, choices=, ...) says which values the flag takes."""
    return dataclasses.field(default=default, metadata={"help": help, **accepts})


@dataclasses.dataclass
class SmokeConfig:
    """--smoke: tabular GRPO on the number-guessing game, on a CPU in seconds, with checks (the default)"""

    seed: int = option(0, "seed for training and evaluation", at_least=0)
    n: int = option(8, "the hidden number is in [1, n]", at_least=2)
    max_turns: int = option(3, "guesses per episode", at_least=1)
    iterations: int = option(60, "GRPO updates", at_least=1)
    prompts: int = option(12, "prompts (seeds) per update, one group of rollouts each", at_least=1)
    group: int = option(8, "G: rollouts per prompt", at_least=2)
    lr: float = option(0.35, "Adam learning rate for the table of logits, after the warm-up", positive=True)
    legal_mask: bool = option(True, "guess only inside the interval still possible (--no-legal-mask: any of 1..n)")
    eval_episodes: int = option(2000, "held-out episodes to measure success on, before and after", at_least=100)
    plot: str | None = option(None, "write the learning curve to this PNG (needs matplotlib)", metavar="PATH")


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
            One word: `higher` (the secret is larger), `lower` (it is smaller) or `correct`.
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

    def __init__(self, logits: torch.Tensor, states: dict[tuple[int, int], int], rng: random.Random, legal=True):
        mask = legal_guess_mask(states, logits.shape[1]) if legal else 0.0  # legal=False: --no-legal-mask
        probs = torch.softmax(logits.detach() + mask, dim=-1)
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


def success_rate_per_number(env: GuessEnv, choose_guess, episodes: int) -> float:
    """Fraction of episodes solved, each hidden number played equally often. Seeded targets are not
    (the 2000 evaluation seeds hold between 225 and 279 of each number), and an optimal policy, which
    must give up one number, would then score anywhere from 0.861 to 0.888 depending on which one."""
    solved = sum(play_episode(env, choose_guess, target=1 + i % env.n).reward for i in range(episodes))
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


def episode_log_probs(logits: torch.Tensor, states: dict, episodes: list[Episode], legal=True) -> torch.Tensor:
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
    mask = legal_guess_mask(states, logits.shape[1]) if legal else 0.0  # the sampler's mask, as it sampled
    log_probs = torch.log_softmax(logits + mask, dim=-1)[rows, columns]
    return torch.zeros(len(episodes)).index_add(0, torch.tensor(owners), torch.tensor(weights) * log_probs)


# Learning-rate warm-up. With its bias correction, Adam's first step moves every logit by the full
# learning rate, in the direction of one batch's gradient, and momentum carries that direction on.
# The opening guess is where this hurts. While the later guesses are still random, opening 3 wins only
# 0.03 less often than opening 4 (0.700 against 0.729), so the noise of the first batches decides
# between them; once the later guesses have learned, 3 is worth 0.75 and 4 the optimum, 0.875. Without
# a warm-up, the first steps made opening 3 (or 6) all but certain before that gap showed, on about
# 1 seed in 75 (measured at lr 0.25), and the policy stayed there: the guesses that follow opening 4
# were no longer played, so never learned, and 4 kept looking worse than the 3 the policy had learned
# to follow up (a local optimum). Small first steps let the worth of each opening show first, and
# they make a larger learning rate safe afterwards (lr 0.35 over 60 updates, against 0.25 over 50):
# the final policy is more decisive, and an opening that started wrong has time to turn.
LR_WARMUP_ITERATIONS = 20  # the learning rate rises linearly from lr / 20 to lr over the first 20 updates


@torch.no_grad()
def adam_step(param: torch.Tensor, grad: torch.Tensor, state: dict, lr: float, step: int) -> None:
    """One Adam step on `param`, in place: the same arithmetic as `torch.optim.Adam` with its defaults
    (betas 0.9 and 0.999, eps 1e-8, no weight decay); a test checks it step for step.

    Why Adam: it rescales each logit's step by that logit's own gradient history, so rarely visited
    belief states (deep in the game) learn as fast as the opening move. Why written out: constructing
    `torch.optim.Adam` imports torch's compiler (torch._dynamo), about 1.2 s, several times this whole
    training. `state` holds the running averages `m` and `v`; `step` counts from 1.
    """
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    state["m"].lerp_(grad, 1 - beta1)  # running mean of the gradient
    state["v"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)  # running mean of its square
    # Both averages start at zero; dividing by (1 - beta**step) removes that bias from the first steps.
    denominator = (state["v"].sqrt() / (1 - beta2**step) ** 0.5).add_(eps)
    param.addcdiv_(state["m"], denominator, value=-lr / (1 - beta1**step))


def train_tabular_grpo(args) -> dict:
    """GRPO on the tabular policy. Returns the trained logits, the learning curve and the traces."""
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)  # drives the prompts (seeds) and the sampled guesses
    states = belief_states(args.n)
    logits = torch.zeros(len(states), args.n, requires_grad=True)  # all zeros = uniform guessing
    adam_state = {"m": torch.zeros_like(logits), "v": torch.zeros_like(logits)}
    # One environment per rollout of a group, re-used through reset(): what TRL does with its pool.
    envs = [GuessEnv(args.n, args.max_turns) for _ in range(args.group)]
    curve, traces, lesson_group, zero_advantage = [], [], None, []
    for iteration in range(args.iterations):
        # Rollouts. Several prompts per step, each with its own group: more signal per update, and each
        # group's advantages are still computed within that group only (the GRPO lesson is unchanged).
        sampler = TabularSampler(logits, states, rng, args.legal_mask)
        groups = []
        for _ in range(args.prompts):
            prompt_seed = rng.randrange(EVAL_FIRST_SEED)  # one prompt = one seed = one hidden number
            groups.append([play_episode(env, sampler, seed=prompt_seed) for env in envs])
        # Advantages, within each group.
        rewards = torch.tensor([[episode.reward for episode in group] for group in groups])
        advantages = group_advantages(rewards)  # shape (prompts, group)
        zero_advantage.append(int((advantages == 0).all(dim=-1).sum()))  # all solved or all failed: no gradient
        # Loss: the policy gradient, on the policy's own choices only.
        episodes = [episode for group in groups for episode in group]
        log_probs = episode_log_probs(logits, states, episodes, args.legal_mask)
        loss = -(advantages.flatten() * log_probs).mean()
        # Optimizer step, after the warm-up's share of the learning rate.
        logits.grad = None
        loss.backward()
        lr = args.lr * min(1.0, (iteration + 1) / LR_WARMUP_ITERATIONS)
        adam_step(logits, logits.grad, adam_state, lr, step=iteration + 1)

        curve.append(rewards.mean().item())
        traces.extend(episode.trace for episode in episodes)
        if lesson_group is None and 0 < rewards[0].sum() < args.group:  # a group with signal, to show
            lesson_group = (rewards[0].tolist(), advantages[0].tolist())
    return {
        "logits": logits.detach(),
        "states": states,
        "curve": curve,
        "traces": traces,
        "lesson_group": lesson_group,
        "zero_advantage": zero_advantage,  # per update: how many of its groups had zero advantage
    }


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
    """Success of the untrained and of the trained policy on the same evaluation episodes (every
    hidden number equally often), and the training result (with its wall time in seconds).
    Evaluation samples from the policy."""
    env, states = GuessEnv(args.n, args.max_turns), belief_states(args.n)
    eval_rng = random.Random(args.seed + 1)
    untrained = TabularSampler(torch.zeros(len(states), args.n), states, eval_rng, args.legal_mask)
    before = success_rate_per_number(env, untrained, args.eval_episodes)
    started = time.perf_counter()
    result = train_tabular_grpo(args)
    result["seconds"] = time.perf_counter() - started
    trained = TabularSampler(result["logits"], states, eval_rng, args.legal_mask)
    after = success_rate_per_number(env, trained, args.eval_episodes)
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
    if args.legal_mask:
        print("  (before = the untrained policy: uniform over the numbers still possible, so better than blind random)")
    else:
        print("  (before = the untrained policy, --no-legal-mask: uniform over 1..n, repeats allowed: blind random)")
    # A group whose rollouts all solved (or all failed) has advantage 0 everywhere: it adds no gradient.
    zero, k = result["zero_advantage"], min(10, args.iterations)
    print(
        f"zero advantage: {sum(zero)} of {len(zero) * args.prompts} groups all solved or all failed, so taught nothing "
        f"({sum(zero[:k])} of {k * args.prompts} in the first {k} updates, {sum(zero[-k:])} in the last {k})"
    )
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
    print("  (the weights the rollouts wrote, read back; TRL's own tool_mask is checked token by token: --rehearse)")

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
        invalid = INVALID_MOVE_MARK in feedback
        if self._done and not invalid:
            invalid = game_reward != 1.0 and VALID_GUESS_MARK not in feedback  # the game-ending second one
        self._invalid_moves += invalid
        self._solved = self._done and not invalid and game_reward == 1.0
        if self._done:
            feedback += "\n" + (
                "You won: that is the secret word. The game is over."
                if self._solved
                else "A second invalid guess in a row: you lost. The game is over."
                if invalid
                else "No guesses left: you lost. The game is over."
            )
        # Nothing is paid before the end, nor for a loss on invalid moves (TextArena would pay partial
        # credit for it); a win pays 1.0, a loss at the limit TextArena's partial credit.
        self._reward = game_reward if self._done and not invalid else 0.0
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
            return new_local_game()  # returns observations, not step results
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


# Plumbing of the in-process game and of the sessions: seeds, copies, sessions kept for training.

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


FIRST_LOCAL_GAME = {}  # the first in-process game built, by game class: the one the others copy
LOCAL_GAME_LOCK = threading.Lock()


def first_local_game():
    """The in-process Wordle game built once per process (TextArena's class, or a test's double)."""
    from textarena_env.server.environment import TextArenaEnvironment

    with LOCAL_GAME_LOCK:
        if TextArenaEnvironment not in FIRST_LOCAL_GAME:
            # Offline, NLTK's download attempt only prints an error; TEXTARENA_DOWNLOAD_NLTK=0 skips it.
            download = os.environ.get("TEXTARENA_DOWNLOAD_NLTK", "1").lower() in ("1", "true")
            FIRST_LOCAL_GAME[TextArenaEnvironment] = TextArenaEnvironment("Wordle-v0", download_nltk=download)
        return FIRST_LOCAL_GAME[TextArenaEnvironment]


def new_local_game():
    """A new in-process Wordle game. Building one costs TextArena about 1.5 s (it tags every word of
    its word list); a copy of one already built takes about 0.13 s and plays exactly the same, so
    every game is a copy of the first: 32 games in about 6 s instead of 48."""
    return copy.deepcopy(first_local_game())


# Sessions the preflight opened, kept for training to take over, so that no session is paid for twice
# (each new one costs a server about 1.1 s of CPU). Keyed by env URL.
PARKED_CLIENTS: dict[str, list] = {}


# Extra reward functions with weight 0: they change nothing in training, but TRL logs each one every
# step as rewards/<name>/mean. Wordle's reward mixes wins with partial credit, so the solve rate and
# the invalid-move rate are the figures to watch.
# Both work for any environment (GuessEnv makes no invalid moves), so every run logs them.
def solve_rate(environments, **kwargs) -> list[float]:
    """1 for a rollout whose game was won (reward exactly 1.0: partial credit is no win), else 0."""
    return [1.0 if environment.get_reward() == 1.0 else 0.0 for environment in environments]


def solve_guesses(environments, **kwargs) -> list[float]:
    """The guesses a won game spent (invalid moves spend none), 0 for a lost one: its mean over the
    solve rate's mean is the number of guesses per solve (both are plain means over the same rollouts)."""
    return [
        float(getattr(environment, "moves", 1) - getattr(environment, "invalid_moves", 0))
        if environment.get_reward() == 1.0
        else 0.0
        for environment in environments
    ]


def invalid_move_rate(environments, **kwargs) -> list[float]:
    """The fraction of a rollout's guesses that were invalid moves."""
    rates = []
    for environment in environments:
        moves = getattr(environment, "moves", 0)
        rates.append(getattr(environment, "invalid_moves", 0) / moves if moves else 0.0)
    return rates


LOGGED_METRICS = (solve_rate, invalid_move_rate, solve_guesses)


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
    and its word lists work (training copies it for the rest). Returns (sessions opened, seconds); raises
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


# Hardware tiers. T1: one 24 GB GPU. Full fine-tuning in fp32 with AdamW needs about 16 bytes per
# parameter (1.72e9 x 16 = 27.5 GB) before vLLM takes its share, so T1 trains LoRA adapters on a
# bf16 model; vLLM gets 45 % of the card so that its KV cache holds a whole generation batch (README,
# "The 24 GB plan", has the arithmetic). T2: an 80 GB GPU, Qwen3-4B, LoRA as well.
TIERS = {
    "t1": {"model": "Qwen/Qwen3-1.7B", "lora_rank": 32, "learning_rate": 1e-5, "vllm_gpu_memory_utilization": 0.45},
    "t2": {"model": "Qwen/Qwen3-4B", "lora_rank": 64, "learning_rate": 1e-5, "vllm_gpu_memory_utilization": 0.3},
}


@dataclasses.dataclass
class FullConfig:
    """--full: Qwen3 + TRL's GRPOTrainer against OpenEnv Wordle (GPU; unset values come from --tier)"""

    tier: str = option("t1", "t1: Qwen3-1.7B + LoRA on one 24 GB GPU; t2: Qwen3-4B + LoRA on 80 GB", choices=TIERS)
    model: str | None = option(None, "model id or local folder (tier default)")
    env_url: str = option(WORDLE_URL, "'local' plays Wordle in this process; or an OpenEnv Wordle server's URL")
    episodes: int = option(1000, "prompts in the dataset, each with its own secret word", at_least=1)
    output_dir: str | None = option(None, "checkpoints and the final model (default wordle-grpo-<model>)")
    seed: int = option(0, "seed for TRL and for the dataset's secret words", at_least=0)
    num_generations: int = option(4, "G: rollouts per prompt, one group", at_least=2)
    per_device_train_batch_size: int = option(1, "rollouts per forward and backward pass", at_least=1)
    gradient_accumulation_steps: int = option(
        32, "passes per optimizer step: 1 x 32 = 32 rollouts, 8 prompts", at_least=1
    )
    learning_rate: float | None = option(None, "learning rate (tier default)", positive=True)
    lora_rank: int | None = option(None, "LoRA rank; 0 = full fine-tuning in float32 (tier default)", at_least=0)
    max_completion_length: int = option(
        1024,
        "tokens in a whole episode, every turn and tool response (longest found: 689, make bench-tokens)",
        at_least=1,
    )
    max_tool_calling_iterations: int = option(8, "tool calls per episode (Wordle allows 6 guesses)", at_least=1)
    max_steps: int = option(-1, "optimizer steps; -1 = one pass over the episodes", steps_or_all=True)
    save_steps: int = option(10, "checkpoint every this many steps: a crash loses at most these", at_least=1)
    vllm_mode: str | None = option(
        None,
        "colocate (the default): vLLM shares the GPU; server: `trl vllm-serve`; none: transformers (slow). "
        "With --tiny: none (the default) or colocate (vLLM's CPU build: make rehearse-vllm)",
        choices=("colocate", "server", "none"),
    )
    vllm_server_url: str | None = option(None, "with --vllm-mode server: where `trl vllm-serve` listens")
    vllm_gpu_memory_utilization: float | None = option(
        None, "colocate: vLLM's share of the GPU (tier default)", fraction=True
    )
    # Qwen3's own context is 40960 tokens: a KV cache for it would not fit vLLM's share of 24 GB.
    vllm_max_model_length: int = option(
        2048, "vLLM's context: the prompt (461 Qwen3 tokens: make bench-tokens) and the episode", at_least=1
    )
    report_to: str = option("none", "where TRL sends its metrics", choices=("none", "trackio", "wandb", "tensorboard"))
    resume: bool = option(False, "continue from the newest checkpoint in --output-dir")
    eval_games: int = option(64, "held-out games played before and after training (0: none)", at_least=0)
    tiny: bool = option(False, "on a CPU, offline: this path with a tiny Qwen3 and the real game (tiny_qwen.py)")

    @property
    def rollouts_per_step(self) -> int:
        return self.per_device_train_batch_size * self.gradient_accumulation_steps

    def __post_init__(self):
        """Values that are wrong together (each flag alone was checked when it was read)."""
        if self.vllm_mode is None:  # vLLM on a GPU; a tiny run on a CPU generates with transformers unless asked
            self.vllm_mode = "none" if self.tiny else "colocate"
        if self.tiny:
            if self.vllm_mode == "server":
                raise ValueError("--tiny generates with --vllm-mode none (the default) or colocate, not server")
            kept = ("tiny", "seed", "env_url", "output_dir", "vllm_mode")  # --tiny sets the rest to its own scale
            changed = [
                flag_of(f.name)
                for f in dataclasses.fields(self)
                if f.name not in kept and getattr(self, f.name) != f.default
            ]
            if changed:
                raise ValueError(
                    f"--tiny runs at its own scale and takes only --seed, --env-url, --output-dir and --vllm-mode, "
                    f"not {', '.join(changed)}"
                )
            return
        if self.rollouts_per_step % self.num_generations:
            raise ValueError(
                f"--num-generations {self.num_generations} must divide the {self.rollouts_per_step} rollouts of a step"
            )
        if self.episodes < self.rollouts_per_step // self.num_generations:
            raise ValueError(
                f"--episodes must be at least {self.rollouts_per_step // self.num_generations}, the prompts of one step"
            )
        if self.vllm_mode == "server" and not self.vllm_server_url:
            raise ValueError("--vllm-mode server needs --vllm-server-url (the address `trl vllm-serve` listens on)")


def resolve_tier(config: FullConfig) -> FullConfig:
    """The flags the user left unset, filled from the chosen tier."""
    filled = {name: value for name, value in TIERS[config.tier].items() if getattr(config, name) is None}
    config = dataclasses.replace(config, **filled)
    if config.output_dir is None:
        config = dataclasses.replace(
            config, output_dir="wordle-grpo-" + config.model.rstrip("/").split("/")[-1].lower()
        )
    return config


def grpo_config(config: FullConfig, **overrides):
    """TRL's GRPOConfig for a FullConfig; `overrides` are for runs on a CPU (the rehearsal, --learn,
    the memory benchmark's own check), which change where it runs and what is saved, not the shape."""
    from trl import GRPOConfig

    on_gpu = torch.cuda.is_available()  # without one (--vllm-mode none, for debugging): float32, slow
    # LoRA trains float32 adapters on a frozen bf16 base. Full fine-tuning (rank 0) keeps float32
    # weights: in bf16, updates at these learning rates round away (README, "The 24 GB plan").
    dtype = "bfloat16" if on_gpu and config.lora_rank else "float32"
    settings = dict(
        output_dir=config.output_dir,
        seed=config.seed,
        learning_rate=config.learning_rate,
        num_generations=config.num_generations,
        per_device_train_batch_size=config.per_device_train_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        max_completion_length=config.max_completion_length,
        max_tool_calling_iterations=config.max_tool_calling_iterations,
        chat_template_kwargs={"enable_thinking": False},
        max_steps=config.max_steps,
        num_train_epochs=1,  # with max_steps=-1: one pass over the episodes
        logging_steps=1,
        log_completions=True,
        save_strategy="steps",  # a crash or Ctrl-C loses at most the steps since the last save
        save_steps=config.save_steps,
        save_total_limit=2,
        report_to=config.report_to,
        use_vllm=config.vllm_mode != "none",
        vllm_mode=config.vllm_mode if config.vllm_mode != "none" else "colocate",
        vllm_server_base_url=config.vllm_server_url,
        vllm_gpu_memory_utilization=config.vllm_gpu_memory_utilization,
        vllm_max_model_length=config.vllm_max_model_length,
        bf16=on_gpu,  # mixed precision on a GPU
        use_cpu=not on_gpu,  # also makes several processes (torchrun) one distributed CPU run
        model_init_kwargs={"dtype": dtype},  # TRL would otherwise load float32 in every case
        gradient_checkpointing=True,
        reward_weights=[0.0] * len(LOGGED_METRICS),  # logged, never trained on
        # The held-out evaluation: each game played once, one game per pass as in training (its loss
        # pass over a whole batch of 32 long games at once would not fit a 24 GB card).
        num_generations_eval=1,
        per_device_eval_batch_size=config.per_device_train_batch_size,
    )
    settings.update(overrides)
    return GRPOConfig(**settings)


def build_grpo_trainer(
    config,
    model,
    train_dataset,
    environment_factory,
    *,
    eval_dataset=None,
    processing_class=None,
    lora_rank=0,
    trainer_class=None,
    metrics=LOGGED_METRICS,
):
    """GRPOTrainer with an environment: the one builder that --full, --rehearse, --learn and the
    memory benchmark share. The environment's get_reward() is the training reward (weight 1);
    `metrics` are reward functions the config weighs 0: logged, never trained on."""
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
        reward_funcs=list(metrics),
        eval_dataset=eval_dataset,
        environment_factory=environment_factory,
        processing_class=processing_class,
        peft_config=peft_config,
    )


# What no library promises: TRL must be able to read the model's tool calls. TRL hands the generated
# ids to transformers' response parser, whose rules move between releases (5.25 began to parse token
# ids, where a control token such as <tool_call> counts only when generated as its own id). A release
# that broke it would leave every call unread: the run would train on nothing and say nothing. So
# each run parses one well-formed call through TRL before its first rollout, and stops if it fails.
TESTED_VERSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "constraints.txt")


def library_versions() -> str:
    """The installed trl and transformers, and the ones the test suite last passed with."""
    import transformers
    import trl

    tested = {}
    if os.path.exists(TESTED_VERSIONS):
        with open(TESTED_VERSIONS, encoding="utf-8") as file:
            tested = dict(line.strip().split("==", 1) for line in file if "==" in line and not line.startswith("#"))
    return (
        f"installed: trl {trl.__version__}, transformers {transformers.__version__}; the suite last passed with "
        f"trl {tested.get('trl', '?')}, transformers {tested.get('transformers', '?')} (tests/constraints.txt)"
    )


def qwen3_tool_call(name: str, arguments: dict) -> str:
    """A tool call as Qwen3 writes it, closed by its end-of-turn token."""
    return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(arguments)}}}\n</tool_call><|im_end|>'


@functools.lru_cache(maxsize=4)
def training_chat_template(tokenizer) -> str:
    """The template TRL renders with: for Qwen3, a prefix-preserving variant of the chat template,
    so that earlier turns render the same whether or not a later message follows."""
    from trl.chat_template_utils import get_training_chat_template

    return get_training_chat_template(tokenizer) or tokenizer.chat_template


def render_prompt_ids(tokenizer, prompt_text: str, tool=None) -> list[int]:
    """The prompt tokens exactly as TRL renders them: the tool's schema (GuessEnv's guess unless
    another is given), the user turn, and the generation prompt (with the empty think block of
    enable_thinking=False)."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt_text}],
        chat_template=training_chat_template(tokenizer),
        tools=[tool or GuessEnv().guess],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
        enable_thinking=False,
    )


def check_trl_reads_tool_calls(trainer, prompt_text: str, tool, arguments: dict) -> None:
    """Parse one well-formed call of `tool` after the prompt, as TRL parses every generated turn;
    stop, naming the versions, if TRL does not read back exactly that call."""
    from trl.chat_template_utils import parse_response

    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    call = qwen3_tool_call(tool.__name__, arguments)
    prompt_ids = render_prompt_ids(tokenizer, prompt_text, tool)
    ids = tokenizer.encode(call, add_special_tokens=False)
    message = parse_response(tokenizer, ids, prefix=prompt_ids, tools=[tool])  # as TRL parses a generated turn
    calls = [tool_call.get("function") for tool_call in message.get("tool_calls") or []]
    check(
        calls == [{"name": tool.__name__, "arguments": arguments}],
        f"TRL cannot read the model's tool calls: from {call!r} it parsed {message!r}, not the call "
        f"{tool.__name__}({arguments}). Every episode would end unread and train on nothing. {library_versions()}",
    )


HELD_OUT_WORDS = 4  # in-process, one secret word in 4 is kept for the evaluation, never trained on


def textarena_wordle():
    """TextArena's own Wordle game inside the local one, to read (no copy needed)."""
    game = first_local_game()._ta_env
    while hasattr(game, "env"):  # TextArena wraps its game in observation wrappers
        game = game.env
    return game


def wordle_words() -> list[str]:
    """The secret words TextArena's Wordle draws from (156 with NLTK's lists), from the local game."""
    return list(textarena_wordle().word_list)


def secret_word(seed: int, words: list[str]) -> str:
    """The word an in-process game plays after reset(seed=seed): the draw seeded_local_reset makes."""
    return random.Random(seed).choice(words)


def held_out(word: str) -> bool:
    return zlib.crc32(word.encode()) % HELD_OUT_WORDS == 0


def wordle_dataset(episodes: int, seed: int, words: list[str] | None = None):
    """The training prompts: the same instruction each time, and a `seed` column that reaches
    WordleEnv.reset(**row), so the G rollouts of a prompt play one secret word and different prompts
    play (mostly) different ones. Seeds are drawn below EVAL_FIRST_SEED, and, given the word list
    (in-process), only seeds whose word is not held out for the evaluation."""
    rng, seeds = random.Random(seed), []
    while len(seeds) < episodes:
        candidate = rng.randrange(EVAL_FIRST_SEED)
        if words is None or not held_out(secret_word(candidate, words)):
            seeds.append(candidate)
    return wordle_rows(seeds)


def wordle_eval_dataset(games: int, words: list[str] | None = None):
    """The held-out games: the training prompt with seeds from EVAL_FIRST_SEED on, which training
    never draws, and, given the word list (in-process), only those whose word is held out: the
    evaluation plays words training never saw. The same games before and after training."""
    seeds, candidate = [], EVAL_FIRST_SEED
    while len(seeds) < games:
        if words is None or held_out(secret_word(candidate, words)):
            seeds.append(candidate)
        candidate += 1
    return wordle_rows(seeds)


def wordle_rows(seeds: list[int]):
    """A dataset of the Wordle instruction, one row per seed: the rows TRL passes to reset(**row)."""
    from datasets import Dataset

    prompt = [{"role": "user", "content": WORDLE_PROMPT}]
    return Dataset.from_list([{"prompt": prompt, "seed": seed} for seed in seeds])


def evaluate_games(trainer) -> dict:
    """Play the held-out games through TRL's own evaluation (the same prompt, tools, chat template
    and tool loop as training; one sampled game per seed) and read the figures it logged."""
    trainer.evaluate()
    logged = trainer.state.log_history[-1]
    solve = logged["eval_rewards/solve_rate/mean"]
    return {
        "solve_rate": solve,
        "invalid_move_rate": logged["eval_rewards/invalid_move_rate/mean"],
        "guesses_per_solve": logged["eval_rewards/solve_guesses/mean"] / solve if solve else float("nan"),
    }


def run_full(config: FullConfig, trainer_class=None) -> dict:
    """Train, and return what a caller may check: the evaluation before and after, the checkpoint
    resumed from, and the trainer. `trainer_class`: a GRPOTrainer subclass for the CPU rehearsal
    (`--full --tiny --vllm-mode colocate` passes one that syncs weights into vLLM's CPU build)."""
    if config.tiny:
        import tiny_qwen

        return tiny_qwen.run_full_tiny(config)
    config = resolve_tier(config)
    vllm_on_cpu = getattr(trainer_class, "vllm_on_cpu", False)
    if config.vllm_mode == "colocate" and not torch.cuda.is_available() and not vllm_on_cpu:
        raise SystemExit(
            "--full: vLLM colocated (the default) needs a CUDA GPU, and this machine has none. To debug the path "
            "on a CPU, slowly, pass --vllm-mode none; to rehearse it end to end with a tiny model, --tiny."
        )
    if config.lora_rank == 0 and config.tier == "t1":
        raise SystemExit(
            "--lora-rank 0 (full fine-tuning) does not fit tier t1: float32 weights, gradients and Adam "
            "moments of Qwen3-1.7B take about 27.5 GB, more than the 24 GB card (and bf16 weights would "
            "round the updates away). Train LoRA adapters (--lora-rank 32), or use a larger GPU (--tier t2)."
        )
    from transformers.trainer_utils import get_last_checkpoint  # after the checks above: they answer at once

    checkpoint = get_last_checkpoint(config.output_dir) if os.path.isdir(config.output_dir) else None
    if config.resume and checkpoint is None:
        raise SystemExit(f"--resume: no checkpoint in {config.output_dir}; run without --resume to start")
    if checkpoint and not config.resume:
        raise SystemExit(
            f"{config.output_dir} already holds {checkpoint}: pass --resume to continue it, or another --output-dir"
        )

    # Fail in seconds, before a model is loaded, if the game cannot be played: first a bare connection
    # (before TRL is even imported), then every session this process will hold at once.
    check_server_reachable(config.env_url)
    trl_config = grpo_config(config)
    sessions = trl_config.per_device_train_batch_size * trl_config.steps_per_generation  # rollouts in flight here
    opened, seconds = preflight(config.env_url, sessions)
    print(f"preflight: {opened} Wordle sessions opened and reset at {config.env_url} in {seconds:.1f} s")

    # In-process, the seed picks the word, so the evaluation can keep words of its own; a server
    # ignores seeds today, and then training and evaluation draw from all words alike.
    words = wordle_words() if config.env_url == "local" else None
    try:
        trainer = build_grpo_trainer(
            trl_config,
            config.model,
            wordle_dataset(config.episodes, config.seed, words),
            functools.partial(WordleEnv, config.env_url),
            eval_dataset=wordle_eval_dataset(config.eval_games, words) if config.eval_games else None,
            lora_rank=config.lora_rank,
            trainer_class=trainer_class,
        )
    except OSError as error:  # what transformers raises for a model it cannot find or download
        raise ModelLoadError(
            f"cannot load the model {config.model!r}: {error}\nOffline, pass --model with a local folder that "
            "holds the model (or set HF_HOME to a cache that has it)."
        ) from None
    check_trl_reads_tool_calls(trainer, WORDLE_PROMPT, WordleEnv(config.env_url).guess, {"guess": "[crane]"})
    before = evaluate_games(trainer) if config.eval_games else None
    try:
        trainer.train(resume_from_checkpoint=checkpoint if config.resume else None)
    except KeyboardInterrupt:
        last = get_last_checkpoint(config.output_dir) or "none yet"
        raise SystemExit(f"interrupted; last checkpoint: {last}. Continue with --resume.") from None
    after = evaluate_games(trainer) if config.eval_games else None
    trainer.save_model(config.output_dir)
    if trainer.accelerator.is_main_process:
        what = "LoRA adapter (merge with peft's merge_and_unload)" if config.lora_rank else "model"
        print(f"trained {what} saved to {config.output_dir}")
        if before:
            print(
                f"wordle solve rate before={before['solve_rate']:.3f} after={after['solve_rate']:.3f} "
                f"(invalid-move rate before={before['invalid_move_rate']:.3f} after={after['invalid_move_rate']:.3f}, "
                f"guesses per solve before={before['guesses_per_solve']:.2f} after={after['guesses_per_solve']:.2f})"
            )
    resumed_from = os.path.basename(checkpoint) if config.resume else None
    return {"before": before, "after": after, "resumed_from": resumed_from, "trainer": trainer, "config": config}


# =====================================================================================================
# Command line: one flag per field of the chosen mode's config
# =====================================================================================================
# Each mode reads only the fields of its own config (SmokeConfig at the top, FullConfig in section 6,
# RehearseConfig, LearnConfig and ShowMaskConfig in tiny_qwen.py): a flag of another mode is not a flag of this one.


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


def checked_float(text: str, accepted, wanted: str) -> float:
    """`text` as a finite float that `accepted(value)` allows, or an error saying it must be `wanted`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}") from None
    if not (math.isfinite(value) and accepted(value)):
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    return checked_float(text, lambda value: value > 0, "a positive number")


def non_negative_float(text: str) -> float:
    return checked_float(text, lambda value: value >= 0, "a number >= 0")


def fraction_below_one(text: str) -> float:
    value = positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must be a fraction below 1, got {text!r}")
    return value


def steps_or_all(text: str) -> int:
    value = int_at_least(-1)(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be a whole number >= 1, or -1 for one pass over the episodes")
    return value


MODES = ("smoke", "full", "rehearse", "learn", "show-mask", "check")  # --check last: it takes a value


@dataclasses.dataclass
class CheckConfig:
    """--check MODULE:CLASS (or path/file.py:CLASS): check an environment class against TRL's
    environment_factory contract before any GPU time (env_check.py): its tools and their schemas, the
    prompt, reset, K episodes, pooling and seeds, pickling"""

    target: str = option("", "the class to check", flag=False)
    episodes: int = option(20, "episodes to play, with well-formed and malformed tool calls", at_least=1)


def config_class_of(mode: str):
    """A mode's config class. The tiny-model modes' live in tiny_qwen.py, imported only for them."""
    if mode in ("rehearse", "learn", "show-mask"):
        import tiny_qwen

        return {
            "rehearse": tiny_qwen.RehearseConfig,
            "learn": tiny_qwen.LearnConfig,
            "show-mask": tiny_qwen.ShowMaskConfig,
        }[mode]
    return {"smoke": SmokeConfig, "full": FullConfig, "check": CheckConfig}[mode]


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default only where it has one worth showing (not for switches or unset values)."""

    def _get_help_string(self, action):
        if action.default is None or action.nargs == 0 or isinstance(action, argparse.BooleanOptionalAction):
            return action.help
        return super()._get_help_string(action)


def config_parser(mode: str, config_class) -> argparse.ArgumentParser:
    """The flags of one mode, one per field of its config, with the field's default and doc."""
    parser = argparse.ArgumentParser(
        prog=f"env_rollout.py --{mode}" + (" MODULE:CLASS" if mode == "check" else ""),
        description=config_class.__doc__,
        formatter_class=HelpFormatter,
        allow_abbrev=False,
        add_help=False,
    )
    for field in dataclasses.fields(config_class):
        accepts = dict(field.metadata)
        if not accepts.pop("flag", True):
            continue  # given with the mode flag itself (--check TARGET)
        kwargs = {"default": field.default, "help": accepts.pop("help"), "dest": field.name}
        kinds = {"at_least": "N", "steps_or_all": "N", "positive": "X", "non_negative": "X", "fraction": "X"}
        kwargs["metavar"] = accepts.pop("metavar", next((kinds[k] for k in kinds if k in accepts), "TEXT"))
        if isinstance(field.default, bool):
            kwargs["action"] = argparse.BooleanOptionalAction if field.default else "store_true"
            del kwargs["metavar"]
        elif "choices" in accepts:
            kwargs["choices"] = list(accepts.pop("choices"))
            del kwargs["metavar"]
        elif "at_least" in accepts:
            kwargs["type"] = int_at_least(accepts.pop("at_least"))
        elif accepts.pop("positive", False):
            kwargs["type"] = positive_float
        elif accepts.pop("non_negative", False):
            kwargs["type"] = non_negative_float
        elif accepts.pop("fraction", False):
            kwargs["type"] = fraction_below_one
        elif accepts.pop("steps_or_all", False):
            kwargs["type"] = steps_or_all
        parser.add_argument(flag_of(field.name), **kwargs)
    return parser


def mode_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="env_rollout.py",
        description="Agentic RL in one file: a tool environment, GRPO, observation masking.",
        allow_abbrev=False,
        add_help=False,
    )
    modes = parser.add_mutually_exclusive_group()
    for mode in MODES[:-1]:
        modes.add_argument(flag_of(mode), dest="mode", action="store_const", const=mode)
    modes.add_argument("--check", metavar="MODULE:CLASS", dest="check_target")
    parser.add_argument("-h", "--help", action="store_true")
    parser.set_defaults(mode="smoke")
    return parser


def full_help() -> str:
    lines = [
        "usage: env_rollout.py [--smoke | --full | --rehearse | --learn | --show-mask | --check MODULE:CLASS] "
        "[flags of that mode]",
        "",
        "Agentic RL in one file: a tool environment, GRPO, observation masking.",
    ]
    for mode in MODES:
        text = config_parser(mode, config_class_of(mode)).format_help()
        lines += ["", "=" * 100, text.rstrip()]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None):
    """(mode, config): the mode flag first, then that mode's own flags, read into its config."""
    chooser = mode_parser()
    chosen, rest = chooser.parse_known_args(argv)
    if chosen.check_target is not None:
        chosen.mode = "check"
    if chosen.help:  # one mode's flags when a mode was named, every mode's otherwise
        named = chosen.mode != "smoke" or "--smoke" in (sys.argv[1:] if argv is None else argv)
        print(config_parser(chosen.mode, config_class_of(chosen.mode)).format_help() if named else full_help())
        raise SystemExit(0)
    config_class = config_class_of(chosen.mode)
    parser = config_parser(chosen.mode, config_class)
    values, unknown = parser.parse_known_args(rest)
    for word in unknown:
        flag = word.split("=")[0]
        owners = [f"--{mode}" for mode in MODES if flag in map(flag_of, fields_of(config_class_of(mode)))]
        if owners:
            parser.error(f"{flag} belongs to {' and '.join(owners)}, not --{chosen.mode}")
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if chosen.mode == "check":
        values.target = chosen.check_target
    try:
        config = config_class(**vars(values))
    except ValueError as error:
        parser.error(str(error))
    if getattr(config, "plot", None):
        try:
            import matplotlib  # noqa: F401  (only --plot needs it)
        except ImportError:
            parser.error("--plot needs matplotlib, which is not installed: pip install matplotlib")
    return chosen.mode, config


def fields_of(config_class) -> list[str]:
    return [field.name for field in dataclasses.fields(config_class)]


def main(argv: list[str] | None = None) -> int:
    mode, config = parse_args(argv)
    if mode == "check":
        import env_check

        return env_check.main(config.target, config.episodes)
    if mode in ("rehearse", "learn", "show-mask"):
        import tiny_qwen

        run = {
            "rehearse": tiny_qwen.run_rehearse,
            "learn": tiny_qwen.run_learn,
            "show-mask": tiny_qwen.run_show_mask,
        }[mode]
    else:
        run = {"smoke": run_smoke, "full": run_full}[mode]
    try:
        run(config)
    except (SmokeFailure, WordleServerError, MissingClientError, ModelLoadError) as failure:
        print(f"{mode} FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # tiny_qwen.py imports this file as the module `env_rollout`. Run that module's main(), so that
    # its classes (the exceptions main() catches among them) exist once, not as two copies.
    import env_rollout

    sys.exit(env_rollout.main())
