"""The learning curves the CPU modes draw with --plot, and the per-step figure of every --full run
(matplotlib, imported only here), and its steps as text.

    python -m labkit.plots FOLDER    # a --full run's GRPO steps, a line each, from its newest checkpoint
"""

import os
import sys

# The figure of a --full run: what TRL logged at each GRPO step (trainer.state.log_history), a panel each.
GRPO_STEP_PANELS = (
    ("reward", "reward (the training reward, group mean)"),
    ("frac_reward_zero_std", "frac_reward_zero_std (groups alike: no gradient)"),
    ("rewards/invalid_move_rate/mean", "invalid-move rate"),
    ("rewards/valid_guesses/mean", "valid guesses a game"),
)
GRPO_STEPS_FIGURE = "grpo_steps.png"  # in the run's output folder
# The same steps as text, a line each: a --full run prints them at its end, and
# `python -m labkit.plots FOLDER` reads them back from a run's saved trainer state.
GRPO_STEP_COLUMNS = (
    ("reward", "reward"),
    ("frac_reward_zero_std", "zero_std"),
    ("grad_norm", "grad_norm"),
    ("rewards/invalid_move_rate/mean", "invalid"),
    ("rewards/valid_guesses/mean", "valid"),
    ("rewards/solve_rate/mean", "solved"),
    ("tools/call_frequency", "calls"),
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


def grpo_steps(log_history: list[dict]) -> list[dict]:
    """The entries of TRL's log that are GRPO training steps (an evaluation's have no frac_reward_zero_std)."""
    return [entry for entry in log_history if "frac_reward_zero_std" in entry and "step" in entry]


def grpo_step_table(log_history: list[dict]) -> list[str]:
    """GRPO_STEP_COLUMNS for each GRPO step, under a header line ('-' where a step did not log one)."""
    lines = ["step " + " ".join(f"{label:>9}" for _, label in GRPO_STEP_COLUMNS)]
    for entry in grpo_steps(log_history):
        cells = (f"{entry[key]:>9.3f}" if key in entry else f"{'-':>9}" for key, _ in GRPO_STEP_COLUMNS)
        lines.append(f"{entry['step']:>4} " + " ".join(cells))
    return lines


def saved_log_history(folder: str) -> list[dict]:
    """TRL's log of the run in `folder` (a --full output folder, its run/ at the CPU scales, or one
    checkpoint): the trainer state of its newest complete checkpoint."""
    import json

    from labkit import runs

    for place in (folder, os.path.join(folder, "run")):
        checkpoint = place if runs.complete_checkpoint(place) else runs.last_complete_checkpoint(place)
        if checkpoint:
            with open(os.path.join(checkpoint, "trainer_state.json"), encoding="utf-8") as file:
                return json.load(file)["log_history"]
    raise SystemExit(f"{folder} holds no checkpoint with a trainer state: give a --full run's output folder")


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


def plot_episode_by_weight(path: str, rows: list[tuple[bool, str, str]], title: str) -> None:
    """An episode as the loss reads it, a row per piece: (in the loss, its text, a note at its right),
    blue where the loss trains it, grey where it weighs 0. Long text is cut to a line (the page or the
    terminal has it whole)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(9, 0.45 * len(rows) + 0.9))
    for row, (trained, text, note) in enumerate(rows):
        y = len(rows) - 1 - row
        shown = " ".join(text.split())  # a row is one line
        shown = (shown if len(shown) < 80 else shown[:77] + "...").replace("$", r"\$")  # "$": not mathtext
        axes.barh(y, 1, color="tab:blue" if trained else "lightgrey", height=0.8)
        axes.text(0.01, y, shown, va="center", fontsize=8, color="white" if trained else "black")
        axes.text(1.01, y, note, va="center", fontsize=8)
    axes.set(xlim=(0, 1.2), ylim=(-0.6, len(rows) - 0.4), title=title)
    axes.axis("off")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m labkit.plots FOLDER (a --full run's output folder)")
    print("\n".join(grpo_step_table(saved_log_history(sys.argv[1]))))
