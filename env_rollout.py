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

Read it top to bottom: environment, policy, rollout and trace, GRPO update, smoke checks, full path.
"""

import argparse
import math
import random
import sys
import time
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


class Episode(NamedTuple):
    trace: list[TraceEntry]
    beliefs: list[tuple[int, int]]  # the belief state before each guess
    guesses: list[int]  # the policy's guesses, one per weight-1 trace entry
    reward: float


def play_episode(env: GuessEnv, choose_guess, **reset_kwargs) -> Episode:
    """`env.reset(**reset_kwargs)`, then let `choose_guess(belief)` play until solved or out of turns.

    The agent starts from the whole range and narrows it with the feedback it reads: it never looks
    at the environment's private state. The range and the number of turns are in the prompt.
    """
    prompt = env.reset(**reset_kwargs)
    trace = [TraceEntry("user", prompt, 0)]
    belief, beliefs, guesses = (1, env.n), [], []
    for _ in range(env.max_turns):
        guess = choose_guess(belief)
        feedback = env.guess(guess)
        trace.append(TraceEntry("assistant", f"guess(value={guess})", 1))
        trace.append(TraceEntry("tool", feedback, 0))
        beliefs.append(belief)
        guesses.append(guess)
        if feedback == "correct":
            break
        belief = update_belief(belief, guess, feedback)
    return Episode(trace, beliefs, guesses, env.get_reward())


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
    """Summed log-probability of each episode's guesses: only the weight-1 (policy) entries count."""
    rows, columns, owners = [], [], []
    for index, episode in enumerate(episodes):
        for belief, guess in zip(episode.beliefs, episode.guesses, strict=True):
            rows.append(states[belief])
            columns.append(guess - 1)
            owners.append(index)
    log_probs = torch.log_softmax(logits + legal_guess_mask(states, logits.shape[1]), dim=-1)[rows, columns]
    return torch.zeros(len(episodes)).index_add(0, torch.tensor(owners), log_probs)


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

EVAL_FIRST_SEED = 1_000_000  # evaluation seeds, held out from training (training seeds are random)
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


def plot_curve(path: str, curve: list[float], optimum: float, random_rate: float) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    axes.plot(range(1, len(curve) + 1), curve, label="training success (batch mean)")
    axes.axhline(optimum, color="green", linestyle="--", label=f"optimum {optimum:.3f}")
    axes.axhline(random_rate, color="red", linestyle=":", label=f"random {random_rate:.3f}")
    axes.set(xlabel="iteration", ylabel="success rate", ylim=(0, 1.02), title="Tabular GRPO on GuessEnv")
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Agentic RL in one file: a tool environment, GRPO, observation masking.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--smoke",
        dest="mode",
        action="store_const",
        const="smoke",
        help="tabular GRPO on the number-guessing game, on a CPU in seconds, with checks (default)",
    )
    parser.set_defaults(mode="smoke")

    smoke = parser.add_argument_group("--smoke: the tabular lab")
    smoke.add_argument("--seed", type=int_at_least(0), default=0, help="seed for training and evaluation")
    smoke.add_argument("--n", type=int_at_least(2), default=8, help="hidden number is in [1, n]")
    smoke.add_argument("--max-turns", type=int_at_least(1), default=3, help="guesses per episode")
    smoke.add_argument("--iterations", type=int_at_least(1), default=50, help="GRPO updates")
    smoke.add_argument("--prompts", type=int_at_least(1), default=12, help="prompts (seeds) per update, one group each")
    smoke.add_argument("--group", type=int_at_least(2), default=8, help="G: rollouts per prompt")
    smoke.add_argument("--lr", type=positive_float, default=0.25, help="Adam learning rate for the logit table")
    smoke.add_argument("--eval-episodes", type=int_at_least(100), default=2000, help="episodes to measure success on")
    smoke.add_argument("--plot", metavar="PATH", help="write the learning curve as a PNG (needs matplotlib)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (only --plot needs it)
        except ImportError:
            parser.error("--plot needs matplotlib, which is not installed: pip install matplotlib")
    try:
        run_smoke(args)
    except SmokeFailure as failure:
        print(f"smoke FAILED: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
