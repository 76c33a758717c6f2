"""What ties the lab to TRL: the trainer builder every mode shares, the chat template TRL renders
with, the check that TRL reads the model's tool calls back, and the guards on TRL's private methods
that the CPU modes override. A change in TRL or transformers that these lean on stops the run with
the installed and the tested versions named. Nothing here imports the lesson."""

import functools
import inspect
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTED_VERSIONS = os.path.join(ROOT, "tests", "constraints.txt")


class LibraryChanged(RuntimeError):
    """TRL or transformers no longer does what this project leans on; the message names the versions."""


class ModelLoadError(RuntimeError):
    """The model named by --model_name_or_path could not be loaded."""


FAILURES = (LibraryChanged, ModelLoadError)  # what a mode reports as `MODE FAILED: why`


# Fields that a newer transformers renamed: the recipes keep the name every supported release knows,
# and it is given under the new one where the installed release has it (5.25 warns on the old name).
RENAMED_FIELDS = {"gradient_checkpointing": "activation_checkpointing"}


def current_names(recipe: dict) -> dict:
    """The recipe with each renamed field under the name the installed GRPOConfig takes."""
    import dataclasses

    from trl import GRPOConfig

    fields = {field.name for field in dataclasses.fields(GRPOConfig)}
    return {RENAMED_FIELDS[k] if RENAMED_FIELDS.get(k) in fields else k: v for k, v in recipe.items()}


def tested_versions() -> dict[str, str]:
    """{distribution: version} of the tested set (tests/constraints.txt), as the file spells the names;
    empty where the file is not there (an installed copy of the lab)."""
    if not os.path.exists(TESTED_VERSIONS):
        return {}
    with open(TESTED_VERSIONS, encoding="utf-8") as file:
        return dict(line.strip().split("==", 1) for line in file if "==" in line and not line.startswith("#"))


def library_versions() -> str:
    """The installed trl and transformers, and the ones the test suite last passed with."""
    import transformers
    import trl

    tested = tested_versions()
    return (
        f"installed: trl {trl.__version__}, transformers {transformers.__version__}; the suite last passed with "
        f"trl {tested.get('trl', '?')}, transformers {tested.get('transformers', '?')} (tests/constraints.txt)"
    )


def require(condition: bool, message: str) -> None:
    """Stop with LibraryChanged (the versions named) where a library no longer does what is leaned on."""
    if not condition:
        raise LibraryChanged(f"{message} {library_versions()}")


def build_grpo_trainer(
    args,
    model,
    train_dataset,
    environment_factory,
    *,
    metrics,
    eval_dataset=None,
    processing_class=None,
    peft_config=None,
    trainer_class=None,
):
    """GRPOTrainer with an environment: the one builder that --full, --rehearse, --learn and the
    memory benchmark share. The environment's get_reward() is the training reward (weight 1);
    `metrics` are reward functions that `args.reward_weights` weighs 0: logged, never trained on."""
    from trl import GRPOTrainer

    trainer = (trainer_class or GRPOTrainer)(
        model=model,
        args=args,
        train_dataset=train_dataset,
        reward_funcs=list(metrics),
        eval_dataset=eval_dataset,
        environment_factory=environment_factory,
        processing_class=processing_class,
        peft_config=peft_config,
    )
    keep_the_base_frozen_through_vllm_syncs(trainer)
    return trainer


# TRL's weight sync into vLLM, with a LoRA adapter, merges the adapter into the base weights, reads them
# and unmerges, in place (trl/generation/vllm_generation.py, VLLMGeneration._iter_named_params). In bf16
# the unmerge does not give the base back: one 2048 x 2048 layer through 125 merge/unmerge pairs drifted
# by 4.9e-5 rms, 30 % of the adapter's own delta. So the lab gives vLLM the same merged weights, W + delta,
# each computed into a new tensor, and never writes into the base. Only where every weight is whole in
# this process (no FSDP, no DeepSpeed ZeRO-3, which shard them): there TRL's own route stays.


def merged_weight(layer):
    """A LoRA layer's base weight plus its active adapters' delta (peft's get_delta_weight), in a new tensor."""
    require(
        not any(layer.use_dora.get(adapter, False) for adapter in layer.active_adapters),
        "DoRA's merge is not a LoRA delta: the frozen-base weight sync handles LoRA adapters only.",
    )
    weight = layer.get_base_layer().weight.detach()
    delta = sum(layer.get_delta_weight(adapter) for adapter in layer.active_adapters if adapter in layer.lora_A)
    return (weight.float() + delta.detach().float()).to(weight.dtype)


def frozen_base_weights(model, vllm_name):
    """(name, weight) pairs for vLLM, as TRL's sync yields them with a LoRA adapter: each adapted layer's
    merged weight, made only as it is yielded (one layer's copy at a time, as TRL sends them one by one);
    every other weight as it is; the adapter's own tensors left out. `vllm_name(name, extra_prefixes)` is
    TRL's renaming."""
    from peft.tuners.lora import LoraLayer

    adapted = {
        f"{name}.base_layer.weight": layer for name, layer in model.named_modules() if isinstance(layer, LoraLayer)
    }
    for name, param in model.named_parameters():
        layer = adapted.get(name)
        weight = param.data if layer is None else merged_weight(layer)
        name = name.removeprefix("base_model.model.").replace(".base_layer", "")
        if model.prefix in name or "original_module" in name:
            continue  # the adapter's tensors (merged above), and a modules_to_save's frozen original
        yield vllm_name(name, extra_prefixes=["modules_to_save.default."]), weight


def keep_the_base_frozen_through_vllm_syncs(trainer) -> None:
    """Route TRL's colocated or server weight sync through frozen_base_weights (see above)."""
    import functools

    from peft import PeftModel

    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or not isinstance(getattr(generation, "model", None), PeftModel):
        return
    require(
        all(hasattr(generation, name) for name in ("_iter_named_params", "_fix_param_name_to_vllm", "_dist")),
        "TRL's VLLMGeneration no longer has _iter_named_params, _fix_param_name_to_vllm and _dist, through "
        "which the lab gives vLLM merged weights without writing into the frozen base.",
    )
    if generation._dist.is_fsdp or getattr(generation._dist, "zero_stage", 0) == 3:
        return  # sharded weights: TRL gathers them for its own in-place merge
    generation._iter_named_params = functools.partial(
        frozen_base_weights, generation.model, generation._fix_param_name_to_vllm
    )


# What no library promises: TRL must be able to read the model's tool calls. TRL hands the generated
# ids to transformers' response parser, whose rules move between releases (5.25 began to parse token
# ids, where a control token such as <tool_call> counts only when generated as its own id). A release
# that broke it would leave every call unread: the run would train on nothing and say nothing. So
# each run parses one well-formed call through TRL before its first rollout, and stops if it fails.


def qwen3_tool_call(name: str, arguments: dict) -> str:
    """A tool call as Qwen3 writes it, closed by its end-of-turn token."""
    return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(arguments)}}}\n</tool_call><|im_end|>'


@functools.lru_cache(maxsize=4)
def training_chat_template(tokenizer) -> str:
    """The template TRL renders with: for Qwen3, a prefix-preserving variant of the chat template,
    so that earlier turns render the same whether or not a later message follows."""
    from trl.chat_template_utils import get_training_chat_template

    return get_training_chat_template(tokenizer) or tokenizer.chat_template


def render_prompt_ids(tokenizer, prompt_text: str, tool) -> list[int]:
    """The prompt tokens exactly as TRL renders them: the tool's schema, the user turn, and the
    generation prompt (with the empty think block of enable_thinking=False)."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": prompt_text}],
        chat_template=training_chat_template(tokenizer),
        tools=[tool],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
        enable_thinking=False,
    )


def check_trl_reads_tool_calls(trainer, prompt_text: str, tool, arguments: dict) -> None:
    """Parse one well-formed call of `tool` after the prompt, as TRL parses every generated turn;
    stop, naming the versions, if TRL does not read back exactly that call."""
    from trl.chat_template_utils import parse_response

    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    call = qwen3_tool_call(tool.__name__, arguments)
    prompt_ids = render_prompt_ids(tokenizer, prompt_text, tool)
    ids = tokenizer.encode(call, add_special_tokens=False)
    message = parse_response(tokenizer, ids, prefix=prompt_ids, tools=[tool])  # as TRL parses a generated turn
    calls = [tool_call.get("function") for tool_call in message.get("tool_calls") or []]
    require(
        calls == [{"name": tool.__name__, "arguments": arguments}],
        f"TRL cannot read the model's tool calls: from {call!r} it parsed {message!r}, not the call "
        f"{tool.__name__}({arguments}). Every episode would end unread and train on nothing.",
    )


# The trainer subclasses of the CPU modes (trl_on_cpu.py) override private GRPOTrainer methods, which
# TRL may change in any release. Before a subclass is made, each method it overrides is checked to
# exist with the parameters it was written against (trl 1.16; 1.15 has the same), and what the
# overrides read back is checked as it arrives: a change stops the run, naming the versions, instead
# of training on something else.
TRL_OVERRIDDEN = {
    "_generate_single_turn": ("prompt_ids", "images", "multimodal_fields", "num_generations"),
    "_generate_and_score_completions": ("inputs",),
    "_get_tool_suffix_ids": ("tool_messages",),
    "_tool_call_loop": (
        "prompts",
        "prompt_ids",
        "completion_ids",
        "completions",
        "logprobs",
        "images",
        "multimodal_fields",
    ),
}


def grpo_trainer_to_override(*names: str):
    """TRL's GRPOTrainer, once each private method in `names` is found with the expected parameters."""
    from trl import GRPOTrainer

    for name in names:
        method, expected = getattr(GRPOTrainer, name, None), TRL_OVERRIDDEN[name]
        found = tuple(inspect.signature(method).parameters)[1:] if callable(method) else None
        require(
            found is not None and found[: len(expected)] == expected,
            f"this project overrides TRL's private GRPOTrainer.{name}({', '.join(expected)}), and the installed "
            f"TRL {'has no such method' if found is None else 'defines ' + name + '(' + ', '.join(found) + ')'}.",
        )
    return GRPOTrainer


def check_trl_returned(condition: bool, method: str, what: str) -> None:
    require(condition, f"TRL's GRPOTrainer.{method} returned {what}, not what this project expects.")
