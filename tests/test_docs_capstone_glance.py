"""The capstone at a glance (docs/full.md's top, README's modes table) says per scale whether GRPO had a
gradient; the measured tables of docs/full.md, "Two stages", are the figures' one source. This test reads
those tables and holds the glance, and README, to them: a new measured row that says otherwise fails it."""

import os

from conftest import ROOT


def read(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as file:
        return file.read()


def table_after(text: str, heading: str) -> list[dict]:
    """The rows of the first table after `heading`, as dicts by column title."""
    rest = text[text.index(heading) :]
    lines = [line for line in rest[rest.index("\n|") + 1 :].split("\n\n")[0].splitlines() if line.startswith("|")]
    titles = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(titles, (cell.strip() for cell in line.strip("|").split("|")), strict=True)) for line in lines[2:]]


def seeds_with(rows: list[dict], has_gradient) -> tuple[list[str], list[str]]:
    """(seeds whose runs all had a gradient at every step, seeds with a run that had none at any)."""
    every = sorted({row["seed"] for row in rows if has_gradient(row) == "every"})
    none = sorted({row["seed"] for row in rows if has_gradient(row) == "none"})
    return every, none


def by_steps(row: dict) -> str:
    norms = [float(value) for value in row["`grad_norm` per step"].split()]
    return "every" if all(norms) else "none" if not any(norms) else "some"


def by_count(row: dict) -> str:
    done, _, steps = row["steps with `grad_norm` > 0"].partition(" of ")
    return "every" if done == steps else "none" if done == "0" else "some"


FULL = read("docs/full.md")
GAME = table_after(FULL, "**Measured on a CPU: cold against warm on a real model**")
SHAPED = table_after(FULL, "**Measured: the shaped reward on the warm-started SmolLM2**")
LEARNING = table_after(FULL, "**Measured: the learning run**")
GLANCE = {row["scale"]: row for row in table_after(FULL, "**The capstone at a glance**")}


def seeds(names: list[str]) -> str:
    return ("seed " if len(names) == 1 else "seeds ") + ", ".join(names)


def glance(scale_starts: str) -> str:
    (row,) = [row for scale, row in GLANCE.items() if scale.startswith(scale_starts)]
    return row["GRPO had a gradient"]


def test_the_sources_are_read():
    assert len(GAME) >= 6 and SHAPED and LEARNING and len(GLANCE) >= 5


def test_the_game_reward_row_says_no_gradient_exactly_where_the_table_measured_none():
    every, none = seeds_with(GAME, by_steps)
    cell = glance("`--full --smollm2`, the game's reward")
    if none and not every:
        assert cell.startswith("no:") and f"seeds {', '.join(none)}" in cell, cell
        readme = read("README.md")
        assert f"on the game's reward no GRPO step had a gradient (seeds {none[0]}-{none[-1]})" in readme
    else:
        assert not cell.startswith("no:"), f"the table has gradients on seeds {every}: {cell}"


def test_the_shaped_rows_say_a_gradient_at_every_step_where_the_tables_measured_one():
    shaped, shaped_none = seeds_with(SHAPED, by_steps)
    learned, learned_none = seeds_with(LEARNING, by_count)
    cell = glance("`--full --smollm2`, the shaped reward")
    if shaped and not shaped_none:
        assert cell.startswith("yes: at every step") and f"{seeds(shaped)} on the bench" in cell, cell
    if learned and not learned_none:
        assert f"{seeds(learned)} in the learning run" in cell, cell
        learning = glance("`make learn-wordle`")
        assert learning.startswith("yes: at every step") and f"({seeds(learned)})" in learning, learning


def test_the_gpu_row_says_not_measured_while_no_page_has_a_gpu_measurement():
    assert glance("`--full` on a GPU").startswith("not measured")
    assert "not yet run on a GPU by this project" in read("README.md")
