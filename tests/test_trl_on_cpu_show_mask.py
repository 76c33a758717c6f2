"""trl_on_cpu.py, --show-mask: one real Wordle episode from TRL's batch, printed as runs of tool_mask 1
(the model's tokens, trained) and 0 (what TRL inserted, masked), with the counts that sum up."""

import importlib.util
import os
import re

import pytest
from conftest import WORDLE_KIT, run_cli, run_script

import trl_on_cpu
from trl_on_cpu import SHOW_MASK_FIGURES, SHOW_MASK_SCALE, mask_runs, show_mask_model, shown_run


def real_wordle_missing() -> str | None:
    """Why the real Wordle cannot be played here, or None when it can."""
    try:
        import nltk
        import textarena_env.server.environment  # noqa: F401

        nltk.data.find("corpora/words")
    except (ImportError, LookupError) as error:
        return f"the real Wordle is not installed here ({error}); `make test` installs it"
    return None


needs_the_game = pytest.mark.skipif(
    importlib.util.find_spec("trl") is None or real_wordle_missing() is not None,
    reason="--show-mask needs trl and the real Wordle (`make test` installs both)",
)

FINAL = re.compile(
    r"^mask: one Wordle episode from TRL's batch, (\d+) completion tokens \(Qwen3's tokenizer\): "
    r"(\d+) trained, (\d+) masked$"
)
RUN_HEAD = re.compile(r"^(trained|masked) +(\d+) tokens \|(.*)$")
RUN_MORE = " " * 20 + "|"


def runs_printed(out: str) -> list[tuple[str, int, str]]:
    """(mark, token count, text) of each run the mode printed."""
    runs = []
    for line in out.splitlines():
        head = RUN_HEAD.match(line)
        if head:
            runs.append((head[1], int(head[2]), [head[3][1:]]))
        elif runs and line.startswith(RUN_MORE):
            runs[-1][2].append(line[len(RUN_MORE) + 1 :])
    return [(mark, count, "\n".join(lines)) for mark, count, lines in runs]


@pytest.fixture(scope="module")
def show_mask_runs(tmp_path_factory):
    """Two runs on the default seed as a student makes them, straight from the checkout (no NLTK_DATA
    exported where the kit lies beside it), into a cache of their own: the first builds the tiny
    model, the second reuses it."""
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path_factory.mktemp("cache"))}
    if os.path.isdir(os.path.join(WORDLE_KIT, "nltk_data")):
        for exported in ("NLTK_DATA", "TEXTARENA_DOWNLOAD_NLTK"):
            environment.pop(exported, None)
    plot = str(tmp_path_factory.mktemp("plot") / "episode.png")  # the second run draws its episode too
    runs = [run_script("--show-mask", *flags, timeout=600, env=environment) for flags in ([], ["--plot", plot])]
    for result in runs:
        assert result.returncode == 0, result.stderr[-3000:]
    return runs, environment["XDG_CACHE_HOME"]


@pytest.fixture(scope="module")
def show_mask_run(show_mask_runs):
    return show_mask_runs[0][0]


@pytest.mark.slow
@needs_the_game
def test_show_mask_ends_with_the_counts_of_one_episode(show_mask_run):
    last = show_mask_run.stdout.rstrip("\n").splitlines()[-1]
    final = FINAL.match(last)
    assert final, show_mask_run.stdout[-3000:]
    total, trained, masked = map(int, final.groups())
    assert trained > 0 and masked > 0 and trained + masked == total
    runs = runs_printed(show_mask_run.stdout)
    assert sum(count for mark, count, _ in runs if mark == "trained") == trained
    assert sum(count for mark, count, _ in runs if mark == "masked") == masked
    marks = [mark for mark, _, _ in runs]
    assert marks[0] == "trained"  # the model speaks first
    assert all(a != b for a, b in zip(marks[:-1], marks[1:], strict=True))  # runs alternate: each as long as it can be


@pytest.mark.slow
@needs_the_game
def test_masked_runs_are_the_games_answers_and_trained_runs_the_models_calls(show_mask_run):
    runs = runs_printed(show_mask_run.stdout)
    masked = [text for mark, _, text in runs if mark == "masked"]
    trained = [text for mark, _, text in runs if mark == "trained"]
    for text in masked:  # a tool's answer in the chat template's wrapping, up to the model's next turn
        assert "<|im_start|>user\n<tool_response>\n" in text and "</tool_response><|im_end|>" in text, text
        assert text.rstrip("\n").endswith("<|im_start|>assistant\n<think>\n\n</think>")
    assert any("<tool_response>\n[GAME] [" in text for text in masked)  # the game's own feedback on a guess
    assert any("<tool_call>" in text and "</tool_call><|im_end|>" in text for text in trained)
    assert not any("<tool_response>" in text for text in trained)


@pytest.mark.slow
@needs_the_game
def test_output_that_is_not_a_terminal_is_marked_plainly(show_mask_run):
    out = show_mask_run.stdout
    assert "\x1b" not in out
    assert re.search(r"^tool_mask 1 \(trained\): .*; tool_mask 0 \(masked\): ", out, re.M)
    assert re.search(r"^trained +\d+ tokens \| <tool_call>$", out, re.M)
    assert re.search(r"^masked +\d+ tokens \|$", out, re.M)  # a tool response starts on a new line


def test_runs_are_the_stretches_of_equal_tool_mask():
    assert mask_runs([5, 6, 7, 8, 9, 10], [1, 1, 0, 0, 0, 1]) == [(1, [5, 6]), (0, [7, 8, 9]), (1, [10])]
    assert mask_runs([], []) == []


def test_a_run_is_coloured_on_a_terminal_and_its_control_characters_escaped():
    plain = shown_run(0, 3, "\nabc\x1b[2J\n", colour=False)
    assert plain == "masked     3 tokens |\n                    | abc\\x1b[2J\n                    |"
    coloured = shown_run(1, 3, "<tool_call>", colour=True)
    assert coloured.startswith("\x1b[32mtrained    3 tokens | <tool_call>") and coloured.endswith("\x1b[0m")


def test_help_lists_the_mode_and_its_flags():
    listed = run_cli("--help")
    assert listed.returncode == 0
    assert "| --show-mask |" in listed.stdout and "usage: env_rollout.py --show-mask [--seed N]" in listed.stdout
    own = run_cli("--show-mask", "--help")
    assert own.returncode == 0 and own.stdout.startswith("usage: env_rollout.py --show-mask [--seed N]")
    assert "--iterations" not in own.stdout


@pytest.mark.slow
@needs_the_game
def test_the_local_game_tries_no_download_when_its_data_is_here(show_mask_run):
    # With the word lists found (the kit beside the checkout, nothing exported), no download is tried:
    # TextArena's dictionary would otherwise call nltk.download("words"), which offline prints a
    # four-line error a student would take for a fault.
    assert "[nltk_data]" not in show_mask_run.stderr, show_mask_run.stderr[-2000:]


@pytest.mark.slow
@needs_the_game
def test_a_second_run_reuses_the_tiny_model_and_shows_the_same_episode(show_mask_runs):
    (first, second), cache = show_mask_runs
    built, reused = first.stdout.splitlines()[0], second.stdout.splitlines()[0]
    assert "kept for the next run on this seed: " in built and "reused from an earlier run on this seed: " in reused
    folder = built.split(": ")[-1]
    assert reused.endswith(folder) and folder.startswith(os.path.join(cache, "env_rollout", "show-mask-tiny-seed0-"))
    kept = os.listdir(os.path.dirname(folder))  # beside it, the cache may hold Qwen3's tokenizer
    assert os.path.basename(folder) in kept and not [name for name in kept if name.startswith(".building")]
    # From the episode on, the same output: the reused model is the one the first run pre-trained.
    episode = [line.startswith("episode:") for line in first.stdout.splitlines()].index(True)
    *shown, plotted = second.stdout.splitlines()[episode:]
    assert first.stdout.splitlines()[episode:] == shown
    assert plotted.startswith("plot: ") and open(plotted[len("plot: ") :], "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    assert "pre-training on the Wordle tool-call format" in first.stderr  # its progress, on stderr
    assert "pre-training on the Wordle tool-call format" not in second.stderr


def fake_pre_training(calls: list, fail: bool = False):
    """build_tiny_wordle_model's stand-in: writes a weights file, or fails halfway, and counts its calls."""

    def build(folder, seed, scale):
        calls.append(seed)
        with open(os.path.join(folder, "model.safetensors"), "w") as file:
            file.write("weights")
        if fail:
            raise KeyboardInterrupt  # a student's Ctrl-C during the pre-training
        return 0.25

    return build


def test_the_tiny_model_is_built_once_per_seed_then_reused(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    monkeypatch.setattr(trl_on_cpu, "build_tiny_wordle_model", fake_pre_training(calls))
    words = ["crane", "spade"]
    folder, loss, reused = show_mask_model(0, SHOW_MASK_SCALE, words)
    assert (loss, reused, calls) == (0.25, False, [0])
    assert os.path.exists(os.path.join(folder, "model.safetensors"))
    assert show_mask_model(0, SHOW_MASK_SCALE, words) == (folder, 0.25, True) and calls == [0]
    other_seed, _, _ = show_mask_model(1, SHOW_MASK_SCALE, words)
    longer, _, _ = show_mask_model(0, trl_on_cpu.TinyFullScale(warm_start_steps=81, warm_start_batch=1), words)
    other_words, _, _ = show_mask_model(0, SHOW_MASK_SCALE, ["crane"])
    assert len({folder, other_seed, longer, other_words}) == 4 and calls == [0, 1, 0, 0]


def test_a_pre_training_stopped_halfway_leaves_nothing_to_reuse(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    monkeypatch.setattr(trl_on_cpu, "build_tiny_wordle_model", fake_pre_training(calls, fail=True))
    with pytest.raises(KeyboardInterrupt):
        show_mask_model(0, SHOW_MASK_SCALE, ["crane"])
    assert os.listdir(tmp_path / "env_rollout") == []  # the half-built folder is gone
    monkeypatch.setattr(trl_on_cpu, "build_tiny_wordle_model", fake_pre_training(calls))
    folder, _, reused = show_mask_model(0, SHOW_MASK_SCALE, ["crane"])
    assert not reused and calls == [0, 0] and os.path.exists(os.path.join(folder, SHOW_MASK_FIGURES))
