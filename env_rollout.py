"""env_rollout.py: agentic RL in one file.

Three ideas, in the order this file teaches them:

1. A *stateful environment* behind a tool interface. `GuessEnv` has `reset()`, one tool method
   (`guess`) and `get_reward()`: exactly the contract of TRL's `GRPOTrainer(environment_factory=...)`.
2. *Group-relative advantages* (GRPO). Play G rollouts of the same prompt; each rollout's advantage is
   its reward measured against its own group: (r - mean) / (std + eps). No value network.
3. *Observation masking*. An episode interleaves text the policy wrote (tool calls) with text the
   environment wrote (tool responses). Only the policy's text carries loss weight; the environment's
   text carries weight 0, because the policy did not choose it.

Read it top to bottom: the smoke lab's settings, 1. the environment, 2. the policy, 3. rollout and
trace, 4. the GRPO update, 5. the smoke run and its checks (`--smoke`, the default), 6. the full path
(`--full`: Qwen3 + TRL against OpenEnv Wordle on a GPU; `--full --dry-run` prints its settings).
Beside it, built on it (the lesson imports none of them): modes.py (the command line, which running
this file hands over to), trl_on_cpu.py (the CPU modes --rehearse, --learn, --show-mask, --full --tiny
and --smollm2), env_check.py (--check); beneath it labkit/ (the plumbing) and recipes/ (--full's
settings, TRL's own).
"""

import dataclasses
import functools
import math
import os
import random
import re
import sys
import time
import zlib
from typing import ClassVar, NamedTuple

try:
    import torch
except ModuleNotFoundError as missing:  # the wrong Python (not the lab's .venv): one line, not a traceback
    if missing.name == "torch":
        sys.exit(
            f"env_rollout.py needs PyTorch, which this Python ({sys.executable}) does not have: "
            "run make smoke, or use .venv/bin/python"
        )
    raise


def option(default, help: str, **accepts):
    """A hyperparameter: its default and its one-line doc. The command line makes a flag of it;
    `accepts` (at_least=, positive=, fraction=, choices=, ...) says which values the flag takes."""
    return dataclasses.field(default=default, metadata={"help": help, **accepts})


@dataclasses.dataclass
class SmokeConfig:
    """--smoke: tabular GRPO on the number-guessing game, on a CPU in seconds, with checks (the default)"""

    seed: int = option(0, "seed for training and evaluation", at_least=0, at_most=2**32 - 1)
    n: int = option(8, "the hidden number is in [1, n]", at_least=2, at_most=64, why=": its table grows as n^3")
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

    @property
    def moves(self) -> int:
        """Guesses made in this episode (a refused one is not made: it raised before counting)."""
        return self._turns

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
# per belief state, over the n possible guesses. All rows start at zero: a uniform pick among the numbers
# still possible (the legal-move mask below rules out the rest), which already solves about 0.62 of the
# games, against 0.33 for picking blindly among all n (--no-legal-mask starts there).


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
# From PPO. PPO's loss is -min(ratio * A, clip(ratio, 1 - clip_eps, 1 + clip_eps) * A), with
# ratio = pi(guess) / pi_old(guess), A from a learned value network (the critic), and often a KL
# penalty to a reference policy and an entropy bonus. The lesson keeps the policy gradient and changes
# four things:
# - The baseline is the group, not a critic: a rollout's advantage is its reward against the other
#   rollouts of the same prompt, (r - group mean) / group std. One advantage per episode, shared by
#   every choice in it: the reward comes only at the end.
# - The ratio is 1: each batch of rollouts feeds exactly one update, so pi_old is pi when the loss is
#   taken. The gradient of ratio * A is then A * grad log pi: the loss below, -A * log pi, has it.
# - No clipping: at ratio 1 the clip never acts, so the lesson leaves it out.
# - No KL term, no reference model, no entropy bonus (TRL's defaults too: beta = 0, entropy_coef = 0):
#   exploration is the sampling alone.
# Three more things a PPO reader will look for:
# - One advantage per episode is the Monte-Carlo case of PPO's GAE (gamma = lambda = 1): the episode's
#   return minus a baseline, here one per prompt (the group mean), where a critic gives one per state.
# - The group mean includes the rollout itself; RLOO leaves it out. Alone that only scales every
#   advantage by (G - 1) / G. Dividing by the group's std is the bias Dr. GRPO names: it weighs each
#   group by 1 / std, so groups that nearly all solve or nearly all fail count more (TRL's
#   scale_rewards="none" drops the division).
# - The lesson is exactly on-policy: it samples from the same masked softmax the loss scores. The CPU
#   Wordle scales are not quite: with min_p 0.1 (recipes/tiny.yaml, smollm2.yaml) their rollouts drop
#   tokens under a tenth of the likeliest one's probability, the loss scores the full distribution,
#   and at ratio 1 nothing corrects for the difference.
# What TRL's GRPOTrainer adds: the clipped ratio, for when a batch feeds several updates
# (num_iterations > 1, or steps_per_generation > gradient_accumulation_steps); with vLLM generating,
# a correction for vLLM's sampling probabilities differing from the trainer's (importance sampling);
# a KL term to a reference model (beta > 0); the loss averaged per token (loss_type); the sample std;
# gradient clipping (max_grad_norm). docs/smoke.md, "Where the lesson and TRL differ", compares them.


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


# Learning-rate warm-up. With its bias correction, Adam's first step moves every logit that has a
# gradient by the full learning rate, however small that gradient, in the direction of one batch's
# gradient, and momentum carries that direction on. A logit with no gradient stays put: a masked guess,
# or any logit of a belief state that no rollout with a nonzero advantage passed through.
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
# Why Adam: it rescales each logit's step by that logit's own gradient history, so rarely visited
# belief states (deep in the game) learn as fast as the opening move.


def train_tabular_grpo(args) -> dict:
    """GRPO on the tabular policy. Returns the trained logits, the learning curve and the traces."""
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)  # drives the prompts (seeds) and the sampled guesses
    states = belief_states(args.n)
    logits = torch.zeros(len(states), args.n, requires_grad=True)  # all zeros: uniform over the legal guesses
    optimizer = torch.optim.Adam([logits], lr=args.lr)
    warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / LR_WARMUP_ITERATIONS))
    # One environment per rollout of a group, re-used through reset(): what TRL does with its pool.
    envs = [GuessEnv(args.n, args.max_turns) for _ in range(args.group)]
    curve, traces, lesson_group, zero_advantage = [], [], None, []
    for _ in range(args.iterations):
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
        # Optimizer step, at the warm-up's share of the learning rate.
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        warmup.step()

        curve.append(rewards.mean().item())
        traces.extend(episode.trace for episode in episodes)
        if lesson_group is None and 0 < rewards[0].sum() < args.group:  # a group with signal, to show
            lesson_group = (rewards[0].tolist(), advantages[0].tolist(), groups[0][0].trace)
    return {
        "logits": logits.detach(),
        "states": states,
        "curve": curve,
        "traces": traces,
        "lesson_group": lesson_group or (rewards[0].tolist(), advantages[0].tolist(), groups[0][0].trace),
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


def opening_guess(logits: torch.Tensor, states: dict[tuple[int, int], int], legal: bool = True) -> tuple[int, float]:
    """The policy's likeliest first guess (before any feedback: the whole interval 1..n) and its probability."""
    n = logits.shape[1]
    row = states[(1, n)]
    mask = legal_guess_mask(states, n)[row] if legal else 0.0
    probs = torch.softmax(logits[row] + mask, dim=-1)
    return int(probs.argmax()) + 1, float(probs.max())


BLOCKS, ASCII_LEVELS = "▁▂▃▄▅▆▇█", "_.-~=+*#"  # 8 levels, low to high; the second where the terminal lacks the first


def curve_levels() -> str:
    """The block characters where stdout can print them (a Windows console piped to a file may not)."""
    try:
        BLOCKS.encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return ASCII_LEVELS
    return BLOCKS


def text_curve(values: list[float], levels: str = BLOCKS, width: int = 60) -> str:
    """The curve in one line of text, a character per point from 0 (levels[0]) to 1 (levels[-1]);
    longer curves are averaged down to `width` characters."""
    size = max(1, math.ceil(len(values) / width))
    means = [sum(values[i : i + size]) / len(values[i : i + size]) for i in range(0, len(values), size)]
    return "".join(levels[min(len(levels) - 1, max(0, int(mean * len(levels))))] for mean in means)


def print_lesson(rewards: list[float], advantages: list[float], trace: list[TraceEntry]) -> None:
    """One episode as the trainer sees it, its reward and advantage, and what the update does with it."""
    print("lesson: one training episode, as the trainer sees it (weight 1 = in the loss, 0 = masked)")
    for entry in trace:
        print(f"  weight {entry.weight}  {entry.role:<9}  {entry.text}")
    push = {1: "pushes its guesses up (more likely)", -1: "pushes its guesses down (less likely)"}
    push[0] = "leaves its guesses as they are: its group all scored the same"
    push = push[(advantages[0] > 0) - (advantages[0] < 0)]
    print(f"  reward {rewards[0]:+.2f}, advantage {advantages[0]:+.2f}: the update {push}")
    print("lesson: its group (one prompt, its rollouts; the episode above is the first): reward -> advantage")
    print("  rewards    " + " ".join(f"{r:+6.2f}" for r in rewards))
    print("  advantages " + " ".join(f"{a:+6.2f}" for a in advantages))
    print("  solved rollouts are pushed up, failed ones down; a group that all solved (or all failed) teaches nothing")


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
    guess, probability = opening_guess(result["logits"], result["states"], args.legal_mask)
    start = 1 / args.n  # the untrained policy: uniform over 1..n
    print(
        f"opening guess: the trained policy opens with {guess} (probability {probability:.3f}; untrained: each of 1..{args.n} {start:.3f})"
    )
    curve, levels = result["curve"], curve_levels()
    print(
        f"learning curve: batch success, updates 1 to {len(curve)}, one character from 0 ({levels[0]}) to 1 "
        f"({levels[-1]}): {text_curve(curve, levels)}"
    )
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

    print_lesson(*result["lesson_group"])
    if args.plot:
        from labkit.plots import plot_curve

        plot_curve(args.plot, result["curve"], optimum, random_rate)
        print(f"learning curve written to {args.plot}")
    print("smoke ok")


# =====================================================================================================
# 6. The full path: Qwen3 + TRL's GRPOTrainer against OpenEnv Wordle
# =====================================================================================================
# The same three ideas at scale. The environment is TextArena's Wordle, played in this process (the
# default) or behind an OpenEnv server; the policy is a language model; TRL runs the tool-calling loop,
# builds `tool_mask` (observation masking, token by token) and computes group-relative advantages.
# The settings are TRL's own (GRPOConfig, ModelConfig), read by TRL's parser from recipes/*.yaml, and
# the few of WordleSettings below. The plumbing (the game's sessions, the TRL glue, the recipe parser)
# lives beneath this file, in labkit/; heavy imports happen inside these functions.

WORDLE_PROMPT = (
    "You are an expert Wordle solver. Find the secret 5-letter English word in at most 6 tries. "
    "Make each guess by calling the tool `guess` with the word in square brackets, like [crane]. "
    "After each guess you get one mark per letter: G = right letter in the right place, "
    "Y = in the word but in another place, X = not in the word.\n\n"
)
INVALID_MOVE_MARK, VALID_GUESS_MARK = "You attempted an invalid move", "You submitted"  # TextArena's texts
# A valid guess that does not win is answered with its letters and one mark per letter: "C R A N E\nG Y X X X".
GUESS_MARKS = re.compile(r"Feedback:\s*\n[A-Z](?: [A-Z]){4}\s*\n(?P<marks>[GYX](?: [GYX]){4})")


class WordleEnv:
    """TextArena Wordle, with the environment_factory contract of GuessEnv.

    `env_url` is "local" (the default: the game runs in this process) or an OpenEnv server (a local
    Docker container or uvicorn, a duplicate of the hosted Space). One game per instance: TRL pools
    instances and calls `reset()` again for each episode, which re-uses the session
    (labkit/wordle_sessions.py holds the sessions, their retries and the in-process seeding).

    Rewards: exactly 1.0 for a win; TextArena's partial credit for a game lost at the 6-guess limit;
    0.0 for a game lost on invalid moves (TextArena ends a game at the second invalid move in a row,
    and would pay partial credit for it).
    """

    def __init__(self, env_url: str = "local"):
        from labkit.wordle_sessions import GameSession

        self._session = GameSession(env_url)
        self._seen_text = ""  # what the game has shown so far: feedback is what comes after it
        self._started = self._done = self._solved = False
        self._reward = 0.0
        self._moves = self._invalid_moves = 0
        self._words, self._marks = [], []  # every word tried; the marks of each valid guess ("GYXXX")

    def reset(self, seed: int | None = None, **kwargs) -> str:
        """Start a new game; return the game's opening text. The dataset's `seed` column picks the
        secret word, so the G rollouts of one prompt play the same word (in-process; an OpenEnv
        server is sent the seed, and today's ignores it). Other columns are ignored."""
        self._started = False  # until the game has answered
        text = self._session.reset(seed)
        self._seen_text = ""
        self._started, self._done, self._solved, self._reward = True, False, False, 0.0
        self._moves = self._invalid_moves = 0
        self._words, self._marks = [], []
        return self._new_text(text)

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
        from labkit.wordle_sessions import SessionLost

        if not self._started:
            raise RuntimeError("no game is running: call reset() before guess()")
        if self._done:
            raise ValueError("the game is over: no guesses are left in this episode")
        if not isinstance(guess, str) or not guess.strip("[] \n"):
            raise ValueError(f"guess must be a word in square brackets, like [crane], got {guess!r}")
        word = "[" + guess.strip().strip("[]").strip() + "]"  # brackets are what TextArena parses
        try:
            text, game_reward, self._done = self._session.step(word)
        except SessionLost:
            self._done, self._reward = True, 0.0  # this episode ends; the next reset() opens a new session
            raise ValueError("the game server stopped answering: this game is over") from None
        feedback = self._new_text(text)
        self._moves += 1
        # What ended the game is read from the text: a win and a second invalid move both add only
        # an echo of the guess, but a win pays exactly 1.0; a valid guess says "You submitted".
        invalid = INVALID_MOVE_MARK in feedback
        if self._done and not invalid:
            invalid = game_reward != 1.0 and VALID_GUESS_MARK not in feedback  # the game-ending second one
        self._invalid_moves += invalid
        self._solved = self._done and not invalid and game_reward == 1.0
        self._words.append(word.strip("[]").strip().lower())
        marks = GUESS_MARKS.search(feedback)
        if marks or self._solved:  # a win is answered without marks: every letter was right
            self._marks.append(marks["marks"].replace(" ", "") if marks else "G" * 5)
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

    @property
    def latest_marks(self) -> str:
        """The marks of the latest valid guess ("GYXXX"; "GGGGG" for a win), "" before any."""
        return self._marks[-1] if self._marks else ""

    @property
    def repeated_guesses(self) -> int:
        """Guesses of a word already tried in this game (TextArena refuses each as an invalid move)."""
        return len(self._words) - len(set(self._words))

    def _new_text(self, text: str) -> str:
        new = text[len(self._seen_text) :] if text.startswith(self._seen_text) else text
        self._seen_text = text
        return new.strip()

    def __del__(self):
        if getattr(self, "_session", None):
            self._session.close()


# Extra reward functions with weight 0 (the recipe's reward_weights): they change nothing in
# training, but TRL logs each one every step as rewards/<name>/mean. Wordle's reward mixes wins with
# partial credit, so the solve rate and the invalid-move rate are the figures to watch; a model that
# has not learned to call the tool yet shows in the last three. All work for any environment that
# counts its moves (GuessEnv makes no invalid moves), so every run logs them.
def solve_rate(environments, **kwargs) -> list[float]:
    """1 for a rollout whose game was won (reward exactly 1.0: partial credit is no win), else 0."""
    return [1.0 if environment.get_reward() == 1.0 else 0.0 for environment in environments]


def invalid_move_rate(environments, **kwargs) -> list[float]:
    """The fraction of a rollout's guesses that were invalid moves."""
    return [getattr(env, "invalid_moves", 0) / max(1, getattr(env, "moves", 0)) for env in environments]


def solve_guesses(environments, **kwargs) -> list[float]:
    """The guesses a won game spent (invalid moves spend none), 0 for a lost one: its mean over the
    solve rate's mean is the number of guesses per solve (both are plain means over the same rollouts)."""
    return [
        float(getattr(environment, "moves", 1) - getattr(environment, "invalid_moves", 0))
        if environment.get_reward() == 1.0
        else 0.0
        for environment in environments
    ]


def valid_guesses(environments, **kwargs) -> list[float]:
    """The valid guesses a rollout made: 0 for a model that never called the tool or never wrote a word."""
    return [float(getattr(env, "moves", 0) - getattr(env, "invalid_moves", 0)) for env in environments]


def valid_guess_made(environments, **kwargs) -> list[float]:
    """1 for a rollout with at least one valid guess: its mean is the share of games really played."""
    return [1.0 if count > 0 else 0.0 for count in valid_guesses(environments)]


def tool_call_made(environments, **kwargs) -> list[float]:
    """1 for a rollout with at least one call that TRL read and ran (valid or not), else 0. A cold model
    that writes prose instead of calls scores 0 in every rollout: every group alike, nothing to learn."""
    return [1.0 if getattr(env, "moves", 0) > 0 else 0.0 for env in environments]


LOGGED_METRICS = (solve_rate, invalid_move_rate, solve_guesses, valid_guesses, valid_guess_made, tool_call_made)


# Idea 2's second remedy. A group whose rollouts all score alike teaches nothing; the warm start changes
# who plays, these change what is paid. The game pays only a win (1.0) or, at the 6-guess limit, partial
# credit; a small model whose games all end on invalid moves scores 0 in every rollout, however its
# rollouts differ. These terms see progress short of a win, each read from the game's own text, each in
# [0, 1]. With `--reward shaped` they are added to the game's reward with the weights of SHAPED_REWARD;
# with `--reward game` they are weighed 0, and only logged. Each can be gamed: said below.
def greens(environments, **kwargs) -> list[float]:
    """Letters in the right place in the latest valid guess, over 5 (a win: 1). Gamed by stopping after
    a good guess instead of going on to win: what it pays is kept, the game's own reward is not earned."""
    return [getattr(env, "latest_marks", "").count("G") / 5 for env in environments]


def yellows(environments, **kwargs) -> list[float]:
    """Letters of the word in the wrong place in the latest valid guess, over 5. Gamed by guesses that
    shuffle known letters (yellows) rather than placing them (greens): weighed below the greens."""
    return [getattr(env, "latest_marks", "").count("Y") / 5 for env in environments]


def fresh_guesses(environments, **kwargs) -> list[float]:
    """The share of a rollout's guesses that repeat no earlier guess of its game (0 with no guess): a repeat
    is an invalid move. Gamed by nothing short of guessing new words, valid or not: it pays for new
    non-words too, so it never pays alone."""
    return [
        1 - getattr(env, "repeated_guesses", 0) / env.moves if getattr(env, "moves", 0) else 0.0 for env in environments
    ]


PROGRESS_TERMS = (greens, yellows, fresh_guesses)
WORDLE_REWARD_FUNCTIONS = LOGGED_METRICS + PROGRESS_TERMS  # what --full hands TRL, in this order
# The shaped reward's weights, over the game's own (weight 1). From the anchors (docs/full.md, "Two
# stages"): PrimeIntellect's Wordle pays 0.2 a green and 0.1 a yellow of the final marks, TRL's earlier
# example a repetition term, RLDiary's a valid-word term. Here the marks' terms are fractions of 5, so
# a guess's marks pay at most 0.2 + 0.1, and each valid guess 0.05 (at most 0.3 in a game): with the
# repetition term, progress short of a win pays at most 0.7, under a win's 1.0 (a loss at the limit
# one letter short, which also earns the game's partial credit, can still pass a one-guess win).
SHAPED_REWARD = {"greens": 0.2, "yellows": 0.1, "fresh_guesses": 0.1, "valid_guesses": 0.05}
REWARDS = ("game", "shaped")  # --reward's choices


def training_reward_weights(reward: str) -> list[float]:
    """GRPOConfig.reward_weights for `--reward`, one per WORDLE_REWARD_FUNCTIONS: 'game', all 0 (only the
    game's own reward, WordleEnv.get_reward, which TRL adds with weight 1, is trained on); 'shaped', the
    progress terms at SHAPED_REWARD's weights."""
    weights = SHAPED_REWARD if reward == "shaped" else {}
    return [weights.get(function.__name__, 0.0) for function in WORDLE_REWARD_FUNCTIONS]


def training_reward(settings, args) -> tuple[str, list[tuple[str, float]]]:
    """What a --full run trains on: where its weights come from ("reward = shaped", say), and by name
    ("WordleEnv.get_reward", 1.0) first (TRL adds the environment's reward with weight 1), then each
    reward function with its weight. Sets args.reward_weights from --reward, unless reward_weights were
    given (a flag or --config), which must then weigh each function in WORDLE_REWARD_FUNCTIONS."""
    names = [function.__name__ for function in WORDLE_REWARD_FUNCTIONS]
    if args.reward_weights is None:
        args.reward_weights = training_reward_weights(settings.reward)
    elif len(args.reward_weights) != len(names):
        raise SystemExit(
            f"--reward_weights takes {len(names)} weights, one per reward function ({' '.join(names)}), "
            f"got {len(args.reward_weights)}; or leave it out and choose --reward {' or '.join(REWARDS)}"
        )
    # Named by what the weights are: a resumed run finds the first run's weights set already.
    same = list(map(float, args.reward_weights)) == training_reward_weights(settings.reward)
    source = f"reward = {settings.reward}" if same else "reward_weights, given"
    return source, [("WordleEnv.get_reward", 1.0)] + list(zip(names, map(float, args.reward_weights), strict=True))


# The seeded dataset. In-process, a prompt's `seed` picks its secret word, so the evaluation can keep
# words of its own that training never sees; a server ignores seeds today, and then training and
# evaluation draw from all words alike.
HELD_OUT_WORDS = 4  # in-process, one secret word in 4 is kept for the evaluation, never trained on


def held_out(word: str) -> bool:
    return zlib.crc32(word.encode()) % HELD_OUT_WORDS == 0


def wordle_dataset(episodes: int, seed: int, words: list[str] | None = None):
    """The training prompts: the same instruction each time, and a `seed` column that reaches
    WordleEnv.reset(**row), so the G rollouts of a prompt play one secret word and different prompts
    play (mostly) different ones. Seeds are drawn below EVAL_FIRST_SEED, and, given the word list
    (in-process), only seeds whose word is not held out for the evaluation."""
    from labkit.wordle_sessions import secret_word

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
    from labkit.wordle_sessions import secret_word

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


def evaluate_games(trainer, stage: str) -> dict:
    """Play the held-out games through TRL's own evaluation (the same prompt, tools, chat template
    and tool loop as training; one sampled game per seed) and read the figures it logged. A line before
    and after: at the CPU scales the games take minutes, in one generation batch that TRL's bar counts as one."""
    started = time.perf_counter()
    games = len(trainer.eval_dataset) if trainer.eval_dataset is not None else 0
    if trainer.accelerator.is_main_process:
        print(f"held-out games ({stage}): playing {games}...", flush=True)
    trainer.evaluate()
    if trainer.accelerator.is_main_process:
        print(f"held-out games ({stage}): {games} played in {time.perf_counter() - started:.0f} s", flush=True)
    logged = trainer.state.log_history[-1]
    shown = ("solve_rate", "invalid_move_rate", "valid_guesses", "valid_guess_made")
    return {name: logged[f"eval_rewards/{name}/mean"] for name in shown}


def held_out_stage(trainer, stage: str, settings, args) -> dict:
    """One stage's held-out figures, played; on a resumed run, read back where the first run saved them:
    the same model on the same games, which a CPU scale would pay minutes to replay. A run resumed from a
    checkpoint trains as before: the trainer takes its random state from the checkpoint."""
    from labkit import runs

    saved = runs.saved_held_out(args.output_dir, settings.eval_games) if settings.resume else {}
    if stage in saved:
        return saved[stage]
    figures = evaluate_games(trainer, stage)
    if trainer.accelerator.is_main_process:
        runs.save_held_out(args.output_dir, settings.eval_games, stage, figures)
    return figures


@dataclasses.dataclass
class WordleSettings:
    """--full's own settings. Every training setting is a field of TRL's GRPOConfig or ModelConfig:
    the recipes (recipes/*.yaml) set them and these, and any of them is a flag (--beta 0.02)."""

    # The values these settings take, checked after TRL's parser (labkit/ranges.py). Not in option()'s
    # metadata: TRL's parser hands a field's metadata to argparse, which takes no at_least=.
    RANGES: ClassVar[dict] = {
        "episodes": {"at_least": 1},
        "eval_games": {"at_least": 0},
        "warm_start_games": {"at_least": 0, "note": " (0: no warm start)"},
        # The warm start's own settings, where there is one (with 0 games they are unused).
        "warm_start_steps": {"at_least": 1, "only_with": "warm_start_games"},
        "warm_start_batch": {"at_least": 1, "only_with": "warm_start_games"},
        "warm_start_learning_rate": {"positive": True, "only_with": "warm_start_games"},
    }

    tier: str = option("t1", "t1: Qwen3-1.7B + LoRA, one 24 GB GPU; t2: Qwen3-4B, 80 GB", choices=["t1", "t2"])
    env_url: str = option("local", "'local' plays Wordle in this process; or an OpenEnv Wordle server's URL")
    episodes: int = option(None, "prompts in the dataset, each with its own secret word")
    eval_games: int = option(None, "held-out games played before and after each stage (0: none)")
    reward: str = option(
        None,
        "the training reward: 'game', the game's own (a win 1, a loss at the limit partial credit, else 0); "
        "'shaped', plus progress short of a win (env_rollout.SHAPED_REWARD)",
        choices=list(REWARDS),
    )
    warm_start_games: int = option(None, "solver games the warm start learns from (0: no warm start, pure RL)")
    warm_start_steps: int = option(None, "supervised steps of the warm start")
    warm_start_batch: int = option(None, "solver games per warm-start step")
    warm_start_learning_rate: float = option(None, "the warm start's learning rate (LoRA)")
    warm_start_gradient_checkpointing: bool = option(
        None,
        "recompute activations in the warm start's backward instead of keeping them, as gradient_checkpointing does GRPO's",
    )
    resume: bool = option(False, "continue from the newest checkpoint in --output_dir")
    tiny: bool = option(False, "on a CPU, offline: this path with a tiny Qwen3 and the real game (recipes/tiny.yaml)")
    smollm2: bool = option(
        False, "on a CPU, offline: this path with SmolLM2-135M-Instruct and the real game (recipes/smollm2.yaml)"
    )
    dry_run: bool = option(False, "print the resolved settings, one `name = value` a line, and exit")

    def __post_init__(self):
        if self.tiny and self.smollm2:
            raise ValueError("--tiny and --smollm2 are two CPU scales of --full: pass one of them")


def run_full(settings: WordleSettings, args, model_args, trainer_class=None) -> dict:
    """Warm-start, then train with GRPO; return what a caller may check: the three evaluations, the
    checkpoint resumed from, the warm start's figures and the trainer. `args` is TRL's GRPOConfig,
    `model_args` its ModelConfig. `trainer_class`: a GRPOTrainer subclass for the CPU rehearsal
    (`--full --tiny --vllm-mode colocate` passes one that syncs weights into vLLM's CPU build)."""
    from labkit import recipes, runs, trl_glue, warm_start
    from labkit import wordle_sessions as sessions

    # Refuse in seconds what cannot run here, before TRL, the game or a model is loaded.
    checkpoint = recipes.refuse_what_cannot_run(settings, args, model_args, trainer_class)
    # The training reward: the game's own or shaped (--reward); every reward function is logged.
    print("training reward: " + reward_sum(*training_reward(settings, args)))
    from trl import get_peft_config  # after the refusals: they answer at once

    # Improvement 1 over TRL's recipe: fail in seconds, before a model is loaded, if the game cannot be
    # played: first a bare connection, then every session this process will hold at once.
    sessions.check_server_reachable(settings.env_url)
    in_flight = args.per_device_train_batch_size * args.steps_per_generation
    opened, seconds = sessions.preflight(settings.env_url, in_flight)
    print(f"preflight: {opened} Wordle sessions opened and reset at {settings.env_url} in {seconds:.1f} s")

    # Improvement 2: seeded prompts, and held-out words for an evaluation before and after each stage.
    words = sessions.wordle_words() if settings.env_url == "local" else None
    train_dataset = wordle_dataset(settings.episodes, args.seed, words)
    eval_dataset = wordle_eval_dataset(settings.eval_games, words) if settings.eval_games else None
    # TRL loads the model by name, with these: its dtype, revision and attention, from ModelConfig.
    args.model_init_kwargs = recipes.model_init_kwargs(model_args, torch.cuda.is_available(), args.bf16)
    try:
        trainer = trl_glue.build_grpo_trainer(
            args,
            model_args.model_name_or_path,
            train_dataset,
            functools.partial(WordleEnv, settings.env_url),
            metrics=WORDLE_REWARD_FUNCTIONS,  # each logged as rewards/<name>/mean, weighed by --reward
            eval_dataset=eval_dataset,
            peft_config=get_peft_config(model_args),
            trainer_class=trainer_class,
        )
    except OSError as error:  # what transformers raises for a model it cannot find or download
        raise trl_glue.ModelLoadError(
            f"cannot load the model {model_args.model_name_or_path!r}: {error}\nOffline, pass --model with a local "
            "folder that holds the model (or set HF_HOME to a cache that has it)."
        ) from None
    # Improvement 3: stop before the first rollout if TRL cannot read the model's tool calls back.
    trl_glue.check_trl_reads_tool_calls(trainer, WORDLE_PROMPT, WordleEnv(settings.env_url).guess, {"guess": "[crane]"})
    evaluations = {"before": held_out_stage(trainer, "before", settings, args) if eval_dataset else None}

    # Improvement 4, stage 1: the warm start. The same LoRA adapter learns from a fair solver's games
    # (training words only), so that GRPO's groups differ (labkit/warm_start.py says why and how).
    figures = None
    if settings.warm_start_games:
        games = warm_start.solver_games(
            WordleEnv("local"),
            WORDLE_PROMPT,
            wordle_dataset(settings.warm_start_games, args.seed + 1, sessions.wordle_words())["seed"],
            [word for word in sessions.wordle_guess_words() if not held_out(word)],
            args.seed,
        )
        figures = warm_start.run_stage(trainer, games, WordleEnv("local").guess, settings, args)
        print(warm_start.warm_start_line(figures))
        evaluations["after warm start"] = (
            held_out_stage(trainer, "after warm start", settings, args) if eval_dataset else None
        )

    # Stage 2: GRPO, from the warm-started adapter.
    try:
        trainer.train(resume_from_checkpoint=checkpoint if settings.resume else None)
    except KeyboardInterrupt:  # improvement 5: a checkpoint every save_steps, and --resume
        last = runs.last_complete_checkpoint(args.output_dir) or "none yet"
        raise runs.Interrupted(f"interrupted; last checkpoint: {last}. Continue with --resume.") from None
    evaluations["after GRPO"] = evaluate_games(trainer, "after GRPO") if eval_dataset else None
    trainer.save_model(args.output_dir)
    if trainer.accelerator.is_main_process:
        what = "LoRA adapter (merge with peft's merge_and_unload)" if model_args.use_peft else "model"
        print(f"trained {what} saved to {args.output_dir}")
        if eval_dataset:
            stages = ("before", "after warm start", "after GRPO")
            print("held-out games: " + "; ".join(held_out_figures(stage, evaluations) for stage in stages))
        title = f"GRPO on Wordle: {os.path.basename(model_args.model_name_or_path.rstrip('/'))}, seed {args.seed}"
        print(grpo_steps_figure(trainer.state.log_history, args.output_dir, title))
        print("\n".join(grpo_step_lines(trainer.state.log_history, args.output_dir)))
    resumed_from = os.path.basename(checkpoint) if settings.resume and checkpoint else None
    return {**evaluations, "resumed_from": resumed_from, "warm_start": figures, "trainer": trainer}


def reward_sum(source: str, rewards: list[tuple[str, float]]) -> str:
    """The training reward as a sum: the terms with a weight, where the weights come from, and how many
    functions are logged only."""
    terms = " + ".join(f"{weight:g} x {name}" for name, weight in rewards if weight)
    logged = sum(1 for _, weight in rewards if not weight)
    return f"{terms} ({source}; {logged} more reward functions logged, weighed 0)"


def grpo_steps_figure(log_history: list[dict], folder: str, title: str) -> str:
    """Draw what TRL logged at each GRPO step into `folder` (labkit/plots.py); say where, in one line."""
    from labkit import plots

    path = os.path.join(folder, plots.GRPO_STEPS_FIGURE)
    try:
        steps = plots.plot_grpo_steps(path, log_history, title)
    except ImportError:
        return "no figure of the GRPO steps: matplotlib is not installed (pip install matplotlib)"
    return f"figure of the {steps} GRPO steps (reward, frac_reward_zero_std, invalid moves, valid guesses): {path}"


def grpo_step_lines(log_history: list[dict], folder: str) -> list[str]:
    """The GRPO steps as text, a line each: the figure's numbers, and where they can be read again."""
    from labkit import plots

    return [f"GRPO steps (python -m labkit.plots {folder} reads them again):", *plots.grpo_step_table(log_history)]


def held_out_figures(stage: str, evaluations: dict) -> str:
    figures = evaluations.get(stage)  # a stage not run is absent
    return f"{stage} skipped" if figures is None else f"{stage} " + " ".join(f"{k}={v:.3f}" for k, v in figures.items())


if __name__ == "__main__":
    # The command line, modes.py, imports this lesson and the modes built beside it on the lesson; the
    # lesson imports none of them. So the script hands over to it, as `python modes.py` would run it.
    import runpy

    runpy.run_module("modes", run_name="__main__")
