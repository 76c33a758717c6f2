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


class RecordingVllm:
    """A stand-in for vLLM's engine, as TRL's colocated sync reaches it: what load_weights received."""

    def __init__(self):
        self.received = {}
        self.llm_engine = self.model_executor = self.driver_worker = self.model_runner = self.model = self

    def load_weights(self, weights):
        self.received.update((name, weight.clone()) for name, weight in weights)

    def reset_prefix_cache(self):
        pass


def colocated_sync_of(model):
    """TRL's own VLLMGeneration, its colocated sync_weights unchanged, around `model`, with vLLM stood in."""
    from accelerate import Accelerator
    from trl.distributed import DistributedBackend
    from trl.generation.vllm_generation import VLLMGeneration

    generation = object.__new__(VLLMGeneration)  # its __init__ would start vLLM
    accelerator = Accelerator(cpu=True)
    generation.model, generation.accelerator, generation.mode = model, accelerator, "colocate"
    generation.enable_sleep_mode, generation._dist, generation.llm = (
        False,
        DistributedBackend(accelerator),
        RecordingVllm(),
    )
    return generation


def lora_model_in_bf16(seed: int):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    shape = dict(vocab_size=256, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4)
    base = Qwen3ForCausalLM(Qwen3Config(**shape, num_key_value_heads=2, head_dim=64)).to(torch.bfloat16)
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"]))
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.02)  # a trained adapter: B is 0 only before training
    return model


def test_vllm_syncs_leave_the_bf16_base_bit_for_bit_and_give_vllm_w_plus_delta():
    """100 colocated syncs through TRL's sync_weights, in bf16: the base weights are unchanged bit for bit,
    and vLLM receives each adapted weight as W + delta. TRL's own route (merge, read, unmerge in place)
    is run beside it on the same model, to show the drift the lab's route avoids."""
    pytest.importorskip("peft")
    import torch

    model = lora_model_in_bf16(0)
    base = {name: param.detach().clone() for name, param in model.named_parameters() if "base_layer" in name}
    generation = colocated_sync_of(model)
    trl_glue.keep_the_base_frozen_through_vllm_syncs(type("Trainer", (), {"vllm_generation": generation})())
    for _ in range(100):
        generation.sync_weights()
    for name, weight in base.items():
        assert torch.equal(dict(model.named_parameters())[name], weight), name
    received = generation.llm.received
    name = "model.layers.0.self_attn.q_proj.weight"
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    expected = (layer.base_layer.weight.float() + layer.get_delta_weight("default").float()).to(torch.bfloat16)
    assert torch.equal(received[name], expected) and not torch.equal(received[name], layer.base_layer.weight)
    assert "model.layers.0.mlp.up_proj.weight" in received and not any("lora" in key for key in received)

    drifting = lora_model_in_bf16(0)  # TRL's own in-place route on the same weights
    trls = colocated_sync_of(drifting)
    for _ in range(100):
        trls.sync_weights()
    moved = [n for n, w in base.items() if not torch.equal(dict(drifting.named_parameters())[n], w)]
    assert moved, "TRL's merge and unmerge no longer move a bf16 base: the lab's route may be needless"
