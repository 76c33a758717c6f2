"""The learning curves the CPU modes draw with --plot, and the per-step figure of every --full run
(matplotlib, imported only here)."""

# The figure of a --full run: what TRL logged at each GRPO step (trainer.state.log_history), a panel each.
GRPO_STEP_PANELS = (
    ("reward", "reward (the training reward, group mean)"),
    ("frac_reward_zero_std", "frac_reward_zero_std (groups alike: no gradient)"),
    ("rewards/invalid_move_rate/mean", "invalid-move rate"),
    ("rewards/valid_guesses/mean", "valid guesses a game"),
)
GRPO_STEPS_FIGURE = "grpo_steps.png"  # in the run's output folder


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


def grpo_steps(log_history: list[dict]) -> list[dict]:
    """The entries of TRL's log that are GRPO training steps (an evaluation's have no frac_reward_zero_std)."""
    return [entry for entry in log_history if "frac_reward_zero_std" in entry and "step" in entry]


def plot_grpo_steps(path: str, log_history: list[dict], title: str) -> int:
    """GRPO_STEP_PANELS against the step, from TRL's own log; returns the steps drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    steps = grpo_steps(log_history)
    figure, panels = plt.subplots(2, 2, figsize=(9, 6), sharex=True)
    for axes, (key, label) in zip(panels.flat, GRPO_STEP_PANELS, strict=True):
        points = [(entry["step"], entry[key]) for entry in steps if key in entry]
        axes.plot([step for step, _ in points], [value for _, value in points], marker="o")
        axes.set(title=label, xlabel="GRPO step")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        if key in ("frac_reward_zero_std", "rewards/invalid_move_rate/mean"):
            axes.set_ylim(-0.02, 1.02)  # shares
        elif all(value >= 0 for _, value in points):
            axes.set_ylim(bottom=0)  # from 0: a small change looks small
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return len(steps)
