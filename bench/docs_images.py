"""The smoke lesson's figures that docs/ shows, drawn from the lesson's own functions (env_rollout.py), so
that a figure on a page is what the code computes today. Each page names the command that made its image.

    python bench/docs_images.py advantages   # docs/images/advantage-by-group-success.png
    python bench/docs_images.py trace        # docs/images/smoke-episode-mask.png
    python bench/docs_images.py              # both

The smoke learning curve is the classroom's own command (`python env_rollout.py --smoke --plot
docs/images/smoke-curve.png`), and each --full run draws its GRPO steps itself (grpo_steps.png).
"""

import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend)
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import env_rollout  # noqa: E402 (found above)
from labkit.plots import plot_episode_by_weight  # noqa: E402

IMAGES = os.path.join(ROOT, "docs", "images")


def advantages(path: str) -> None:
    """The advantage a solved and a failed rollout get, against how many of the group solved (G = 2, 4, 8),
    from group_advantages itself: the less common outcome gets the larger push; all alike, none."""
    figure, axes = plt.subplots(figsize=(7, 4))
    for group, style in ((2, ":"), (4, "--"), (8, "-")):
        shares, solved, failed = [], [], []
        for wins in range(group + 1):
            rewards = torch.tensor([[1.0] * wins + [0.0] * (group - wins)])
            row = env_rollout.group_advantages(rewards)[0]
            shares.append(wins / group)
            solved.append(row[0].item() if wins else None)
            failed.append(row[-1].item() if wins < group else None)
        axes.plot(shares, solved, style, marker="o", color="tab:green", label=f"a solved rollout, G = {group}")
        axes.plot(shares, failed, style, marker="o", color="tab:red", label=f"a failed rollout, G = {group}")
    axes.axhline(0, color="grey", linewidth=0.8)
    axes.set(xlabel="share of the group that solved", ylabel="advantage (r - mean) / std",
             title="GRPO's advantage within a group (env_rollout.group_advantages)")  # fmt: skip
    axes.annotate("all failed or all solved:\nadvantage 0, no gradient", xy=(0.0, 0.0), xytext=(0.05, -2.6),
                  arrowprops={"arrowstyle": "->"})  # fmt: skip
    axes.legend(fontsize=8, ncol=2, loc="upper right")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def trace(path: str) -> None:
    """The smoke lesson's episode (the one --smoke prints), each entry a box coloured by its loss weight."""
    result = env_rollout.train_tabular_grpo(env_rollout.SmokeConfig())
    rows = [
        (bool(entry.weight), f"{entry.role}: {entry.text}", f"weight {entry.weight}")
        for entry in result["lesson_group"][2]
    ]
    plot_episode_by_weight(
        path, rows, "One smoke episode as the loss reads it: blue in the loss (the policy's calls), grey masked"
    )


FIGURES = {
    "advantages": (advantages, "advantage-by-group-success.png"),
    "trace": (trace, "smoke-episode-mask.png"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"which figures: {', '.join(FIGURES)} (default: all)")
    names = parser.parse_args().names or list(FIGURES)
    unknown = [name for name in names if name not in FIGURES]
    if unknown:
        raise SystemExit(f"no figure named {', '.join(unknown)}: the figures are {', '.join(FIGURES)}")
    os.makedirs(IMAGES, exist_ok=True)
    for name in names:
        draw, filename = FIGURES[name]
        path = os.path.join(IMAGES, filename)
        draw(path)
        print(f"{name}: {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
