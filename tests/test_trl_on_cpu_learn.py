"""trl_on_cpu.py, --learn's pieces (the short-episode tokenizer, the thermometer embeddings, the
cached tool suffix, the evaluation's figures, the evaluation through TRL, the --no-mask ablation) and
the mode itself."""

import inspect
import os
import random
import re

import pytest
import torch
from conftest import run_cli, run_script

from env_rollout import EVAL_FIRST_SEED, GuessEnv
from labkit.trl_glue import LibraryChanged, build_grpo_trainer, render_prompt_ids
from trl_on_cpu import (
    LEARN_METRICS,
    RESPONSES_WRITTEN,
    build_tiny_model,
    build_tiny_tokenizer,
    evaluate_guessing,
    expected_tool_mask,
    format_example,
    guess_call_text,
    guess_dataset,
    learn_config,
    learn_tokenizer,
    learning_trainer_class,
    recording_trainer_class,
    responses_written,
    thermometer_number_embeddings,
    three_guess_tokens,
    tool_response_ids,
    warm_start,
    wasted_calls,
)

pytest.importorskip("trl")


@pytest.fixture(scope="module")
def tokenizer():
    return learn_tokenizer(0)


def test_learn_tokenizer_shortens_episodes_and_keeps_the_text(tokenizer):
    plain = build_tiny_tokenizer(0)
    assert three_guess_tokens(tokenizer) == 16 < 100 < three_guess_tokens(plain)
    call = tokenizer.encode(guess_call_text(5), add_special_tokens=False)
    assert len(call) == 4 and tokenizer.decode(call[1:2]) == "5" and call[-1] == tokenizer.eos_token_id
    ids, _ = format_example(tokenizer, random.Random(1))
    text = tokenizer.decode(ids)
    assert tokenizer.encode(text, add_special_tokens=False) == ids  # rendering then encoding: same tokens
    assert plain.decode(plain.encode(text, add_special_tokens=False)) == text  # the same text as before


def test_thermometer_embeddings_order_the_numbers(tokenizer):
    model = build_tiny_model(tokenizer)
    thermometer_number_embeddings(model, tokenizer, 8)
    embeddings = model.get_input_embeddings().weight[:, :7]
    number = {k: embeddings[tokenizer.convert_tokens_to_ids(str(k))] for k in range(1, 9)}
    assert number[1].tolist() == [-1.0] * 7 and number[8].tolist() == [1.0] * 7
    assert number[5].tolist() == [1.0] * 4 + [-1.0] * 3
    assert torch.dist(number[4], number[5]) < torch.dist(number[1], number[8])


def test_wasted_calls_counts_every_call_that_played_no_guess():
    call = {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "guess", "arguments": {}}}]}
    two_calls = {"role": "assistant", "tool_calls": call["tool_calls"] * 2}
    refused = {"role": "tool", "name": "guess", "content": str({"error": "the game is over"})}  # as TRL writes it
    answer = {"role": "tool", "name": "guess", "content": "higher"}
    completions = [
        [call, answer, call, {"role": "tool", "name": "guess", "content": "correct"}, {"role": "assistant"}],
        [{"role": "assistant", "content": "<tool_call>\nnot json\n</tool_call>"}],  # TRL's parser left it as text
        [call, answer, call, refused],  # refused by the environment
        [call, answer, call],  # never answered: TRL ran no more tools
        [two_calls, answer, answer, two_calls, answer],  # one call of the second pair was not answered
        [{"role": "assistant", "content": "Done."}],  # no call at all: nothing wasted
    ]
    assert wasted_calls(completions) == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]


def test_responses_written_counts_only_the_models_own_tokens(tokenizer):
    call = tokenizer.encode(guess_call_text(4), add_special_tokens=False)
    (response,) = tool_response_ids(tokenizer, "guess", "higher")  # one token with the learn tokenizer
    played = call + [response] + call  # TRL's episode: the response was the environment's
    assert responses_written(tokenizer, played, [1] * len(call) + [0] + [1] * len(call)) == 0
    assert responses_written(tokenizer, played, [1] * len(played)) == 1  # the model wrote it itself
    spelled = tokenizer.encode("<tool_response>\nhigher\n</tool_response>", add_special_tokens=False)
    assert responses_written(tokenizer, call + spelled, [1] * (len(call) + len(spelled))) == 1


def test_grpo_with_the_learn_tokenizer_keeps_observation_masking_exact(tokenizer, tmp_path):
    """Two GRPO steps through TRL with the merged tokens: tool_mask is checked on every batch, and
    the cached tool suffix gives the tokens TRL itself computes."""
    from trl import GRPOTrainer

    model = build_tiny_model(tokenizer)
    thermometer_number_embeddings(model, tokenizer, 8)
    warm_start(model, tokenizer, steps=60, batch=32, closing="")
    dataset = guess_dataset(8)
    _, config = learn_config(
        "--learn-steps", "2", "--per_device_train_batch_size", "32", "--beta", "0", "--output_dir", str(tmp_path)
    )

    class Checked(learning_trainer_class(), recording_trainer_class()):
        pass

    trainer = build_grpo_trainer(
        config, model, dataset, GuessEnv, processing_class=tokenizer, trainer_class=Checked, metrics=LEARN_METRICS
    )
    trainer.mask_counts = []
    trainer.train()
    assert len(trainer.mask_counts) == 2 and all(masked > 0 and trained > 0 for masked, trained in trainer.mask_counts)
    messages = [{"role": "tool", "name": "guess", "content": "higher"}]
    cached = trainer._get_tool_suffix_ids(messages)
    assert cached == trainer._get_tool_suffix_ids(messages) == GRPOTrainer._get_tool_suffix_ids(trainer, messages)
    assert tokenizer.decode(cached).startswith("\n<|im_start|>user\n<tool_response>\nhigher\n")
    prompt_ids = render_prompt_ids(tokenizer, GuessEnv().reset(), GuessEnv().guess)
    turn = tokenizer.encode(guess_call_text(4), add_special_tokens=False)
    parse = type(tokenizer).parse_response
    given = {"prefix": prompt_ids} if "prefix" in inspect.signature(parse).parameters else {}  # transformers >= 5.13
    remembered = [trainer._tokenizer.parse_response(turn, **given) for _ in range(2)]
    assert remembered[0] == remembered[1] == parse(tokenizer, turn, **given)
    assert remembered[0] is not remembered[1]  # a copy each time: TRL edits what it gets back
    assert remembered[0]["tool_calls"][0]["function"] == {"name": "guess", "arguments": {"value": 4}}


@pytest.mark.parametrize("observation_masking", [True, False])
def test_no_mask_trains_on_the_environments_tokens(tokenizer, tmp_path, observation_masking):
    """--no-mask, on TRL's own batch: tool_mask is 1 on every completion token, the tool responses TRL
    inserted included; with masking on, those responses are 0."""
    model = build_tiny_model(tokenizer)
    thermometer_number_embeddings(model, tokenizer, 8)
    warm_start(model, tokenizer, steps=60, batch=32, closing="")
    masking = [] if observation_masking else ["--no-mask"]
    _, config = learn_config(
        "--learn-steps", "1", "--per_device_train_batch_size", "32", "--beta", "0", "--output_dir", str(tmp_path)
    )
    assert learn_config(*masking)[0].mask is observation_masking
    batches, turns = [], []

    class Kept(learning_trainer_class(observation_masking=observation_masking)):
        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            completion_ids, logprobs = super()._generate_single_turn(prompt_ids, *args, **kwargs)
            turns.extend(zip(prompt_ids, completion_ids, strict=True))
            return completion_ids, logprobs

        def _generate_and_score_completions(self, inputs):
            batches.append(super()._generate_and_score_completions(inputs))
            return batches[-1]

    trainer = build_grpo_trainer(
        config, model, guess_dataset(4), GuessEnv, processing_class=tokenizer, trainer_class=Kept, metrics=LEARN_METRICS
    )
    trainer.train()
    (batch,) = batches
    inserted = 0
    for row in range(batch["completion_ids"].shape[0]):
        prompt = batch["prompt_ids"][row][batch["prompt_mask"][row].bool()].tolist()
        length = int(batch["completion_mask"][row].sum())
        generated = expected_tool_mask(prompt, batch["completion_ids"][row][:length].tolist(), turns)
        weights = batch["tool_mask"][row][:length].tolist()
        assert [w for w, own in zip(weights, generated, strict=True) if own] == [1] * sum(generated)
        environments = [w for w, own in zip(weights, generated, strict=True) if not own]
        assert environments == [0 if observation_masking else 1] * len(environments)
        inserted += len(environments)
    assert inserted > 0  # the environment answered some calls


@pytest.mark.slow
def test_learn_end_to_end_at_toy_size(tmp_path):
    plot = tmp_path / "curve.png"
    result = run_script(
        "--learn",
        "--learn-steps",
        "2",
        "--per_device_train_batch_size",
        "16",
        "--learn-eval-episodes",
        "100",
        "--plot",
        str(plot),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = re.search(
        r"^tiny model success before=(\d\.\d{3}) after=(\d\.\d{3}) \(optimum 0\.875, random 0\.330\)$",
        result.stdout,
        re.M,
    )
    assert line, result.stdout
    assert all(0.0 <= float(rate) <= 1.0 for rate in line.groups())
    for figure in ("tool calls that played no guess", "tool responses written by the model"):
        assert re.search(rf"^{figure} per episode before=\d\.\d{{3}} after=\d\.\d{{3}}$", result.stdout, re.M)
    assert "a 3-guess episode is 16 tokens" in result.stdout
    assert os.path.getsize(plot) > 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--learn", "--learn-eval-episodes", "50"], "must be a whole number >= 100"),
        (["--learn", "--learn-steps", "0"], "must be a whole number >= 1"),
        (["--learn", "--beta", "-0.1"], "--beta must be a number >= 0, got -0.1"),
        (["--learn", "--max-grad-norm", "-1"], "--max_grad_norm must be a number >= 0 (0: no clipping), got -1.0"),
        (["--learn", "--learning-rate", "0"], "--learning_rate must be a positive number, got 0.0"),
        (["--smoke", "--learn-eval-episodes", "400"], "--learn-eval-episodes belongs to --learn, not --smoke"),
        (["--rehearse", "--plot", "x.png"], "--plot belongs to --smoke, --learn and --show-mask, not --rehearse"),
    ],
)
def test_learn_flags_are_checked(argv, message):
    result = run_cli(*argv)
    assert result.returncode == 2 and message in result.stderr


def test_the_gradient_clip_reaches_trl_and_defaults_to_trls_own(tmp_path):
    """--max-grad-norm is GRPOConfig's own field: unset, the run clips exactly as TRL would."""
    from trl import GRPOConfig

    trl_default = GRPOConfig.__dataclass_fields__["max_grad_norm"].default
    assert learn_config()[1].max_grad_norm == trl_default
    assert learn_config("--max-grad-norm", "0.2")[1].max_grad_norm == 0.2


def test_the_evaluation_measures_the_policy_trl_trains(tokenizer, tmp_path):
    """One model, two measures: the held-out evaluation (TRL's evaluate, one episode per seed) and
    the rollouts of TRL's own training step (generated before the update). A sloppy model, so that
    wasted calls and self-written tool responses occur, and any difference in budget, parser or
    tool handling would show. Every figure agrees within sampling noise (measured: success 0.166 and
    0.174, wasted calls per episode 0.428 and 0.381, written responses 0.049 and 0.047)."""
    model = build_tiny_model(tokenizer)
    thermometer_number_embeddings(model, tokenizer, 8)
    warm_start(model, tokenizer, steps=60, batch=32, closing="")
    episodes = 512
    _, config = learn_config(
        "--learn-steps", "1", "--per_device_train_batch_size", str(episodes), "--learn-eval-episodes", str(episodes), "--beta", "0",
        "--output_dir", str(tmp_path),
    )  # fmt: skip
    trainer = build_grpo_trainer(
        config,
        model,
        guess_dataset(episodes // 8),
        GuessEnv,
        eval_dataset=guess_dataset(episodes, first_seed=EVAL_FIRST_SEED),
        processing_class=tokenizer,
        trainer_class=learning_trainer_class(),
        metrics=LEARN_METRICS,
    )
    evaluation = evaluate_guessing(trainer, seed=0)
    evaluation_spread = trainer.state.log_history[-1]["eval_rewards/wasted_calls/std"]  # train() starts a new log
    trainer.train()
    rollouts = next(entry for entry in trainer.state.log_history if "loss" in entry)
    training = {
        "success": rollouts["rewards/solve_rate/mean"],
        "wasted": rollouts["rewards/wasted_calls/mean"],
        "written": rollouts[RESPONSES_WRITTEN],
        "clipped": rollouts["completions/clipped_ratio"],
    }
    assert evaluation["wasted"] > 0.1 and evaluation["written"] > 0.01  # the sloppiness the test needs
    for name in ("success", "clipped", "written"):  # rates (written: nearly one): a binomial's error
        p = (evaluation[name] + training[name]) / 2
        noise = 4 * (p * (1 - p) * 2 / episodes) ** 0.5 + 1e-9
        assert abs(evaluation[name] - training[name]) <= noise, (name, evaluation, training)
    spread = evaluation_spread, rollouts["rewards/wasted_calls/std"]
    noise = 4 * ((spread[0] ** 2 + spread[1] ** 2) / episodes) ** 0.5
    assert abs(evaluation["wasted"] - training["wasted"]) <= noise, (evaluation, training, spread)


# --- what --learn leans on in TRL and transformers: a change stops the run, naming the versions ------


def test_the_merged_pieces_are_declared_control_tokens_so_trl_reads_the_calls():
    """The cause of transformers 5.25's silent zero. From 5.25 the response parser reads token ids,
    and a control token (<tool_call>, <|im_end|>) counts only when generated as its own id: inside an
    undeclared merged piece it is text, and no call is parsed. Declared, TRL reads the call on every
    version; undeclared, 5.25 and later read none (shown where the installed transformers is one)."""
    import copy

    import transformers
    from packaging.version import Version
    from trl.chat_template_utils import add_response_schema, parse_response

    tokenizer = learn_tokenizer(0)  # not the module's: a learning trainer wraps the parse of the tokenizer it gets
    prompt_ids = render_prompt_ids(tokenizer, GuessEnv().reset(), GuessEnv().guess)
    call = tokenizer.encode(guess_call_text(4), add_special_tokens=False)
    assert len(prompt_ids) == 1 and len(call) == 4  # the prompt and the text around the number: merged pieces
    declared = add_response_schema(tokenizer)  # what GRPOTrainer does to its tokenizer
    assert set(declared.chat_control_tokens) >= {declared.decode(prompt_ids), declared.decode(call[:1])}
    parsed = parse_response(declared, call, prefix=prompt_ids)
    assert parsed["tool_calls"][0]["function"] == {"name": "guess", "arguments": {"value": 4}}
    if Version(transformers.__version__) >= Version("5.25.0"):
        undeclared = copy.deepcopy(declared)
        undeclared.chat_control_tokens = None
        assert "tool_calls" not in parse_response(undeclared, call, prefix=prompt_ids)


def unreadable_calls(tokenizer):
    """What transformers 5.25 made of the undeclared pieces, on any version: every turn left as text."""
    tokenizer.parse_response = lambda response, **given: {"role": "assistant", "content": tokenizer.decode(response)}
    return tokenizer


LEARN_IN_SECONDS = ["--learn", "--warm-start-steps", "1", "--learn-steps", "1", "--per_device_train_batch_size", "8"]


def test_learn_stops_naming_the_versions_when_trl_cannot_read_a_call(monkeypatch, capsys):
    import transformers
    import trl

    import modes
    import trl_on_cpu

    made = trl_on_cpu.learn_tokenizer
    monkeypatch.setattr(trl_on_cpu, "learn_tokenizer", lambda seed=0: unreadable_calls(made(seed)))
    assert modes.main([*LEARN_IN_SECONDS, "--learn-eval-episodes", "100"]) == 1
    output = capsys.readouterr()
    failure = output.err[output.err.index("learn FAILED") :]  # after the warm start's progress bar
    assert "Traceback" not in output.err
    assert failure.startswith("learn FAILED: TRL cannot read the model's tool calls: from '<tool_call>\\n")
    assert "Every episode would end unread and train on nothing." in output.err
    assert (
        f"installed: trl {trl.__version__}, transformers {transformers.__version__}; the suite last passed"
        in output.err
    )
    assert "before GRPO" not in output.out  # stopped before the evaluation and the training


def test_learn_stops_when_the_evaluation_parses_no_call(monkeypatch, capsys):
    """The second guard: the warm-started model's own episodes, through TRL's evaluation."""
    import transformers

    import modes
    import trl_on_cpu

    made = trl_on_cpu.learn_tokenizer
    monkeypatch.setattr(trl_on_cpu, "learn_tokenizer", lambda seed=0: unreadable_calls(made(seed)))
    monkeypatch.setattr(trl_on_cpu, "check_trl_reads_tool_calls", lambda *args: None)  # the first guard, passed
    assert modes.main([*LEARN_IN_SECONDS, "--learn-eval-episodes", "100"]) == 1
    output = capsys.readouterr()
    failure = output.err[output.err.index("learn FAILED") :]  # after the warm start's progress bar
    assert "Traceback" not in output.err
    assert failure.startswith("learn FAILED: TRL parsed no tool call in 100 episodes of the warm-started model")
    assert f"transformers {transformers.__version__}" in output.err and "before GRPO" not in output.out


def test_a_changed_private_trl_method_stops_before_a_trainer_is_made(monkeypatch):
    from trl import GRPOTrainer

    monkeypatch.setattr(GRPOTrainer, "_tool_call_loop", lambda self, prompts, completion_ids: None)
    with pytest.raises(
        LibraryChanged,
        match=r"private GRPOTrainer\._tool_call_loop\(prompts, prompt_ids, .*installed TRL "
        r"defines _tool_call_loop\(prompts, completion_ids\)\. installed: trl ",
    ):
        learning_trainer_class()
    monkeypatch.delattr(GRPOTrainer, "_generate_single_turn")
    with pytest.raises(LibraryChanged, match=r"_generate_single_turn\(.*the installed TRL has no such method"):
        recording_trainer_class()


def test_an_unexpected_result_from_a_private_trl_method_stops_the_run(monkeypatch):
    from trl import GRPOTrainer

    trainer_class = learning_trainer_class()
    trainer = object.__new__(trainer_class)  # no trainer is needed: the check comes first

    def mismatched(self, prompts, prompt_ids, completion_ids, completions, logprobs, images, multimodal_fields):
        return [[1]], [[]], [[5, 6]]  # a tool mask one token short of its completion

    monkeypatch.setattr(GRPOTrainer, "_tool_call_loop", mismatched)
    with pytest.raises(LibraryChanged, match=r"GRPOTrainer\._tool_call_loop returned .* installed: trl"):
        trainer._tool_call_loop(*[None] * 7)
