"""Section 5 and the command line: the smoke run itself, its output lines, and the parser's refusals."""

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, run_cli, run_script


def test_smoke_passes_and_prints_the_spelled_lines(smoke_run):
    assert smoke_run.returncode == 0, smoke_run.stderr
    out = smoke_run.stdout
    assert "scripted binary search: 7/8 targets solved" in out
    match = re.search(
        r"^success rate before=(\d\.\d{3}) after=(\d\.\d{3}) \(optimum 0\.875, random 0\.330\)$", out, re.M
    )
    assert match, out
    before, after = map(float, match.groups())
    assert after >= 0.85 and after - before > 0.2
    assert "weight 0  tool" in out and "weight 1  assistant" in out
    assert "advantages" in out
    assert out.strip().splitlines()[-1] == "smoke ok"
    # The checks run in the order the lesson goes.
    markers = ["scripted binary search:", "determinism:", "success rate before=", "masking:", "lesson:", "smoke ok"]
    positions = [out.index(marker) for marker in markers]
    assert positions == sorted(positions)


def test_smoke_prints_the_trained_opening_guess_and_its_curve_in_one_line(smoke_run):
    out = smoke_run.stdout
    opening = re.search(
        r"^opening guess: the trained policy opens with (\d) \(probability (\d\.\d{3}); untrained: each of 1\.\.8 0\.125\)$",
        out,
        re.M,
    )
    assert opening, out
    # Binary search's opening: 4 or 5 both leave intervals that two more guesses cover (7 of 8 numbers).
    assert opening.group(1) in ("4", "5") and float(opening.group(2)) > 0.5
    curve = re.search(r"^learning curve: batch success, updates 1 to 60, one character from 0 \((.)\) to 1 \((.)\): (\S+)$",
                      out, re.M)  # fmt: skip
    assert curve, out
    low, high, line = curve.groups()
    assert len(line) == 60 and set(line) <= set(env_rollout_levels(low, high))
    # It climbs: the last ten updates sit higher than the first ten.
    levels = env_rollout_levels(low, high)
    assert sum(map(levels.index, line[-10:])) > sum(map(levels.index, line[:10]))


def env_rollout_levels(low: str, high: str) -> str:
    """The curve's characters, known by its first and last (the smoke line names them)."""
    import env_rollout

    return next(levels for levels in (env_rollout.BLOCKS, env_rollout.ASCII_LEVELS) if levels[::7] == low + high)


def test_the_text_curve_averages_a_long_curve_down_and_spans_its_levels():
    import env_rollout

    assert env_rollout.text_curve([0.0, 0.5, 0.999, 1.0]) == "▁▅██"
    assert env_rollout.text_curve([0.0] * 60 + [1.0] * 60) == "▁" * 30 + "█" * 30  # 120 points, 2 a character
    assert env_rollout.text_curve([0.2, 0.9], env_rollout.ASCII_LEVELS) == "." + "#"


def test_the_lesson_episode_shows_its_reward_advantage_and_the_sign_of_its_update(smoke_run):
    """The episode shown is the first of the group shown: its reward and advantage are that group's
    first, and the line says the update pushes its guesses up for a positive advantage, down otherwise."""
    out = smoke_run.stdout
    line = re.search(
        r"^  reward ([+-]\d\.\d\d), advantage ([+-]\d\.\d\d): the update pushes its guesses (up|down)", out, re.M
    )
    assert line, out
    rewards = re.search(r"^  rewards +(.+)$", out, re.M).group(1).split()
    advantages = re.search(r"^  advantages +(.+)$", out, re.M).group(1).split()
    assert float(line.group(1)) == float(rewards[0]) and float(line.group(2)) == float(advantages[0])
    assert line.group(3) == ("up" if float(advantages[0]) > 0 else "down")
    episode = out[out.index("lesson: one training episode") : line.start()]
    solved = "tool       correct" in episode
    assert float(rewards[0]) == (1.0 if solved else 0.0)


def test_the_lesson_says_down_for_a_failed_episode(capsys):
    import env_rollout

    trace = [env_rollout.TraceEntry("user", "pick", 0), env_rollout.TraceEntry("assistant", "guess(value=4)", 1)]
    env_rollout.print_lesson([0.0, 1.0], [-0.71, 0.71], trace)
    assert "reward +0.00, advantage -0.71: the update pushes its guesses down (less likely)" in capsys.readouterr().out


def test_smoke_imports_only_torch_and_the_standard_library():
    # The baseline holds what torch's own Adam imports when built (torch._dynamo, and with it torch's
    # dependencies numpy, sympy, triton): the lesson's optimizer is torch.optim.Adam, and they come with torch.
    code = (
        "import sys, torch\n"
        "torch.optim.Adam([torch.zeros(1, requires_grad=True)])\n"
        "baseline = set(sys.modules)\n"
        "import modes\n"
        "assert modes.main(['--smoke']) == 0\n"
        "extra = {m.split('.')[0] for m in set(sys.modules) - baseline}\n"
        "extra -= set(sys.stdlib_module_names) | {'torch', 'env_rollout', 'modes', 'labkit'}\n"  # labkit: the lab's own
        "print('EXTRA', sorted(extra))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "EXTRA []" in result.stdout, result.stdout


def test_failed_learning_exits_non_zero_with_a_message():
    result = run_cli("--smoke", "--iterations", "1")
    assert result.returncode == 1
    assert "smoke FAILED" in result.stderr and "below" in result.stderr


@pytest.mark.parametrize(
    "flags, complaint",
    [
        (["--group", "1"], "--group: must be a whole number >= 2"),
        (["--iterations", "0"], "--iterations: must be a whole number >= 1"),
        (["--n", "1"], "--n: must be a whole number from 2 to 64, got 1: its table grows as n^3"),
        (["--n", "1000000"], "--n: must be a whole number from 2 to 64, got 1000000"),  # was killed for memory
        (["--max-turns", "0"], "--max-turns: must be a whole number >= 1"),
        (["--lr", "0"], "--lr: must be a positive number"),
        (["--lr", "nan"], "--lr: must be a positive number"),
        (["--seed", "-1"], "--seed: must be a whole number from 0 to 4294967295"),
        (["--seed", "99999999999999999999"], "--seed: must be a whole number from 0 to 4294967295"),  # torch's range
        (["--no-mask"], "--no-mask belongs to --learn, not --smoke"),
        (["--prompts", "two"], "--prompts: must be a whole number >= 1, got 'two'"),
        (["--eval-episodes", "10"], "--eval-episodes: must be a whole number >= 100"),
        (["--learn", "--seed", "99999999999999999999"], "--seed must be a whole number from 0 to 4294967295"),
        (["--rehearse", "--seed", "-1"], "--seed must be a whole number from 0 to 4294967295"),
    ],
)
def test_parser_refuses_nonsense(flags, complaint):
    result = run_cli(*flags)
    assert result.returncode == 2
    assert complaint in result.stderr and len(result.stderr.strip().splitlines()) == 1  # one line, no usage block


@pytest.mark.parametrize("mode", ["--smoke", "--learn"])
@pytest.mark.parametrize(
    "name, complaint",
    [
        ("missing/x.png", "/missing does not exist"),
        ("x.txt", "matplotlib writes avif, eps"),
    ],
)
def test_a_plot_path_that_cannot_be_written_is_refused_before_training(tmp_path, mode, name, complaint):
    pytest.importorskip("matplotlib")
    result = run_cli(mode, "--plot", str(tmp_path / name))
    assert result.returncode == 2 and complaint in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not result.stdout  # before any work


@pytest.mark.parametrize(
    "path, complaint",
    [
        ("", "--plot needs a file name"),
        ("  ", "--plot needs a file name"),
        ("/proc/x.png", "nothing can be written in the folder /proc"),  # root may "access" it; nothing is made
    ],
)
def test_a_plot_path_that_names_no_writable_file_is_one_line(path, complaint):
    pytest.importorskip("matplotlib")
    result = run_cli("--smoke", "--plot", path)
    assert result.returncode == 2 and complaint in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not result.stdout


def test_a_plot_path_without_an_extension_is_written_as_png_and_printed_so(tmp_path):
    pytest.importorskip("matplotlib")
    result = run_cli("--smoke", "--plot", str(tmp_path / "curve"))
    assert result.returncode == 0, result.stderr
    assert f"learning curve written to {tmp_path / 'curve.png'}" in result.stdout
    assert (tmp_path / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("mode", ["--learn", "--rehearse", "--show-mask", "--full", "--check=m:C"])
def test_a_mode_without_its_libraries_says_which_make_target_installs_them(tmp_path, mode):
    """As in the venv `make smoke` makes: torch alone. One line, no traceback, before any work."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['transformers'] = None\n")
    result = run_script(mode, env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert result.returncode == 1 and "needs transformers" in result.stderr and "`make test`" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_help_explains_each_mode():
    result = run_cli("--help")
    assert result.returncode == 0
    for mode, words in [("--smoke", "tabular GRPO"), ("--full", "OpenEnv Wordle"), ("--rehearse", "offline")]:
        assert mode in result.stdout and words in result.stdout
    for mode in ("smoke", "full", "rehearse", "learn", "check"):  # one group per mode, each flag with its default
        assert f"usage: env_rollout.py --{mode}" in result.stdout
    assert re.search(r"--iterations N +GRPO updates \(default: 60\)", result.stdout)


def test_help_after_a_mode_shows_that_mode_only():
    result = run_cli("--smoke", "--help")
    assert result.returncode == 0 and result.stdout.startswith("usage: env_rollout.py --smoke")
    assert "--iterations N" in result.stdout
    assert "--eval-games" not in result.stdout and "--rehearse" not in result.stdout


def test_full_help_is_trls_parser_help_over_the_recipe_layers():
    """--full's flags are TRL's: its help is TrlParser's over WordleSettings, GRPOConfig and ModelConfig
    (each field with its underscore and its dash spelling), after the layers the settings are read from."""
    result = run_cli("--full", "--help")
    assert result.returncode == 0 and result.stderr == ""
    out = result.stdout
    assert "recipes/wordle_grpo.yaml" in out and "recipes/<tier>.yaml" in out and "--config FILE.yaml" in out
    assert "usage: env_rollout.py --full [-h] [--tier {t1,t2}]" in out
    assert out.index("recipes/wordle_grpo.yaml") < out.index("usage: env_rollout.py --full")  # the layers first
    for shown in (
        "--eval_games EVAL_GAMES, --eval-games EVAL_GAMES",  # the lab's WordleSettings
        "--env_url ENV_URL, --env-url ENV_URL",
        "--loss_type LOSS_TYPE, --loss-type LOSS_TYPE",  # TRL's GRPOConfig
        "--beta BETA",
        "--max_completion_length MAX_COMPLETION_LENGTH, --max-completion-length MAX_COMPLETION_LENGTH",
        "--model_name_or_path MODEL_NAME_OR_PATH, --model-name-or-path MODEL_NAME_OR_PATH",  # TRL's ModelConfig
        "--lora_r LORA_R, --lora-r LORA_R",
    ):
        assert shown in out, shown
    assert (
        "--iterations" not in out and "--learn-eval-episodes" not in out and "--rollouts-per-step" not in out
    )  # others


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "curve.png"
    result = run_cli("--smoke", "--plot", str(path))
    assert result.returncode == 0, result.stderr
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_how_to_install(tmp_path):
    # A sitecustomize that hides matplotlib, as on a machine without it.
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['matplotlib'] = None\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = run_script("--smoke", "--plot", str(tmp_path / "x.png"), env=env)
    assert result.returncode == 2
    assert "pip install matplotlib" in result.stderr
    assert not (tmp_path / "x.png").exists()


def test_every_make_target_the_makefile_lists_resolves_once():
    """Each `make X` of the Makefile's opening comment is a target with one recipe: make -n shows its
    commands without running them, and warns of no target defined twice (a second `learn:` once made
    `make learn` run the learning bench)."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as file:
        listed = re.findall(r"^#   make ([a-z0-9-]+)", file.read(), re.M)
    assert {"smoke", "test", "test-all", "learn", "bench-learn", "rehearse-smollm2"} <= set(listed)
    for target in listed:
        result = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and "warning" not in result.stderr, (target, result.stderr)
    learn = subprocess.run(["make", "-n", "learn"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "env_rollout.py --learn" in learn and "learn_bench" not in learn
