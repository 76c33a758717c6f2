"""The learning curves the CPU modes draw with --plot (matplotlib, imported only here)."""


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
