"""Every `held-out games: before ...` line a page shows, sample or pattern, is in the format run_full
prints today: the three stages in order, each with the figures evaluate_games reads from TRL's logs,
written by held_out_figures. A figure added, dropped or renamed in the code fails here until the pages
follow."""

import glob
import os
import re
import types

from conftest import ROOT

from env_rollout import evaluate_games, held_out_figures

STAGES = ("before", "after warm start", "after GRPO")  # run_full's order
PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))) + [os.path.join(ROOT, "README.md")]


def figure_names() -> list[str]:
    """The figures evaluate_games reports, in its order: read off a trainer whose evaluation logged
    every reward function's mean."""
    from env_rollout import LOGGED_METRICS

    logged = {f"eval_rewards/{metric.__name__}/mean": 0.0 for metric in LOGGED_METRICS}
    trainer = types.SimpleNamespace(
        evaluate=lambda: None,
        state=types.SimpleNamespace(log_history=[logged]),
        eval_dataset=[{}] * 8,
        accelerator=types.SimpleNamespace(is_main_process=True),
    )
    return list(evaluate_games(trainer, "before"))


def held_out_line_pattern() -> re.Pattern:
    """The printed line, each figure a value of 3 decimals (a run's) or a capital letter (a page's
    placeholder); a later stage may be `...` (a page's shorthand) or `skipped` (--warm-start-games 0)."""
    sample = held_out_figures("before", {"before": dict.fromkeys(figure_names(), 0.125)})
    figures = re.escape(sample.removeprefix("before ")).replace(r"0\.125", r"(?:\d+\.\d{3}|[A-Z])")
    stages = [f"before {figures}"] + [rf"{re.escape(stage)} (?:{figures}|skipped|\.\.\.)" for stage in STAGES[1:]]
    return re.compile("held-out games: " + "; ".join(stages))


def held_out_lines_on_pages() -> list[tuple[str, str]]:
    """(page, line) for each `held-out games: before` a page shows: in a fenced block, to the line's
    end; in inline code, to its closing backtick (where a line break inside counts as a space)."""
    found = []
    for page in PAGES:
        with open(page, encoding="utf-8") as file:
            text = file.read()
        for start in (match.start() for match in re.finditer("held-out games: before", text)):
            in_block = text.count("```", 0, start) % 2 == 1
            end = text.index("\n" if in_block else "`", start)
            found.append((os.path.relpath(page, ROOT), " ".join(text[start:end].split())))
    return found


def test_the_pattern_matches_the_line_the_code_writes():
    evaluations = {"before": dict.fromkeys(figure_names(), 0.25), "after warm start": None}
    evaluations["after GRPO"] = dict.fromkeys(figure_names(), 0.5)
    printed = "held-out games: " + "; ".join(held_out_figures(stage, evaluations) for stage in STAGES)
    assert held_out_line_pattern().fullmatch(printed), printed
    assert not held_out_line_pattern().fullmatch(printed.replace(" valid_guess_made=0.250", ""))


def test_every_held_out_line_on_a_page_is_in_the_printed_format():
    lines = held_out_lines_on_pages()
    assert len(lines) >= 3  # at least full.md's held-out evaluation, its sample run of --full --tiny, its checklist
    pattern = held_out_line_pattern()
    wrong = [(page, line) for page, line in lines if not pattern.fullmatch(line)]
    assert not wrong, f"not what run_full prints ({pattern.pattern}):\n" + "\n".join(map(str, wrong))
