"""labkit/trl_glue.py: the builder every mode shares (its metrics stated, its LoRA given as peft's
config), the Qwen3 tool call, and the guard that stops a run with LibraryChanged, naming the versions,
where TRL or transformers no longer does what the lab leans on. What the guards catch in TRL itself is
tested where the modes lean on it (test_trl_on_cpu_learn.py)."""

import inspect

import pytest

from labkit import trl_glue


def test_the_builder_takes_the_logged_metrics_and_peft_config_by_name_with_no_default():
    parameters = inspect.signature(trl_glue.build_grpo_trainer).parameters
    assert list(parameters)[:4] == ["args", "model", "train_dataset", "environment_factory"]
    metrics = parameters["metrics"]
    assert metrics.kind is inspect.Parameter.KEYWORD_ONLY and metrics.default is inspect.Parameter.empty
    peft_config = parameters["peft_config"]
    assert peft_config.kind is inspect.Parameter.KEYWORD_ONLY and peft_config.default is None
    assert "lora_rank" not in parameters  # the LoRA adapter is peft's LoraConfig (trl.get_peft_config(model_args))


def test_the_prompt_is_rendered_with_the_tool_it_is_given():
    parameters = inspect.signature(trl_glue.render_prompt_ids).parameters
    assert list(parameters) == ["tokenizer", "prompt_text", "tool"]
    assert parameters["tool"].default is inspect.Parameter.empty  # no default tool: GuessEnv's guess was one


def test_a_tool_call_as_qwen3_writes_it():
    call = trl_glue.qwen3_tool_call("guess", {"guess": "[crane]"})
    assert call == '<tool_call>\n{"name": "guess", "arguments": {"guess": "[crane]"}}\n</tool_call><|im_end|>'


def test_require_stops_with_library_changed_naming_the_installed_and_the_tested_versions():
    pytest.importorskip("trl")
    import transformers
    import trl

    trl_glue.require(True, "never said")
    with pytest.raises(trl_glue.LibraryChanged) as stopped:
        trl_glue.require(False, "TRL no longer does it.")
    message = str(stopped.value)
    assert message.startswith(
        f"TRL no longer does it. installed: trl {trl.__version__}, transformers {transformers.__version__}; "
        "the suite last passed with trl "
    )
    assert message.endswith("(tests/constraints.txt)") and "?" not in message  # read from tests/constraints.txt


def test_library_changed_is_its_own_failure_not_a_smoke_failure():
    """main() reports both, each as `MODE FAILED: ...`; a library change is not a failed lesson check."""
    import env_rollout

    assert not issubclass(trl_glue.LibraryChanged, env_rollout.SmokeFailure)
    assert issubclass(trl_glue.LibraryChanged, RuntimeError) and issubclass(trl_glue.ModelLoadError, RuntimeError)
