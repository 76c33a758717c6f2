"""trl_on_cpu.py, --full --tiny --vllm-mode colocate: which generation each run takes, and the check that
vLLM's weights are the trained ones. The run itself needs vLLM's CPU build, which has an environment of
its own: `make rehearse-vllm` (run by .ci/run) is its end-to-end test."""

import os

import pytest
import torch
from conftest import ROOT, run_cli

import env_rollout
from env_rollout import SmokeFailure
from labkit import recipes

pytest.importorskip("trl")
from trl_on_cpu import VLLM_CPU_ROUNDING, compare_vllm_weights, stacked_weight  # noqa: E402


@pytest.mark.parametrize(
    "flags, generation",
    [
        (["--full"], "colocate"),  # the GPU run: vLLM colocated
        (["--full", "--vllm-mode", "none"], "none"),
        (["--full", "--tiny"], "none"),  # a CPU run: transformers, unless asked
        (["--full", "--tiny", "--vllm-mode", "colocate"], "colocate"),
        (["--full", "--tiny", "--vllm-mode", "none"], "none"),
    ],
)
def test_which_generation_each_run_takes(flags, generation):
    # What the recipes and flags resolve to (the command line itself refuses colocate on a CPU at once).
    _, args, _ = recipes.parse_full(flags[1:], env_rollout.WordleSettings)
    assert (args.vllm_mode if args.use_vllm else "none") == generation


def test_tiny_refuses_server_mode_and_says_what_it_takes():
    # The flags parse (any flag overrides the tiny recipe); --full --tiny itself refuses, before it makes anything.
    result = run_cli("--full", "--tiny", "--vllm-mode", "server", "--output_dir", "unused-tiny-server-run")
    assert result.returncode == 1
    assert "--tiny generates with --vllm-mode none (the default) or colocate, not server" in result.stderr
    assert not os.path.exists(os.path.join(ROOT, "unused-tiny-server-run"))


PACKED = {"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]}


def checkpoint(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shapes = {"q_proj": (4, 3), "k_proj": (2, 3), "v_proj": (2, 3), "o_proj": (3, 4)}
    return {
        f"model.layers.0.self_attn.{name}.weight": torch.randn(shape, generator=generator)
        for name, shape in shapes.items()
    }


def test_vllms_stacked_layers_are_built_in_its_order():
    weights = checkpoint(0)
    qkv = stacked_weight("model.layers.0.self_attn.qkv_proj", weights, PACKED)
    prefix = "model.layers.0.self_attn."
    assert torch.equal(qkv, torch.cat([weights[prefix + f"{p}_proj.weight"] for p in "qkv"]))
    assert torch.equal(stacked_weight(prefix + "o_proj", weights, PACKED), weights[prefix + "o_proj.weight"])


class VllmDouble:
    """What LLM.apply_model returns from the rehearsal's read-back: the linear weights as vLLM holds
    them (here: a checkpoint in bfloat16) and the model's packed_modules_mapping."""

    def __init__(self, weights: dict[str, torch.Tensor]):
        self.held = {
            f"model.layers.0.self_attn.{name}": stacked_weight(f"model.layers.0.self_attn.{name}", weights, PACKED).to(
                torch.bfloat16
            )
            for name in ("qkv_proj", "o_proj")
        }

    def apply_model(self, func):
        return [(self.held, PACKED)]


def test_the_sync_check_passes_within_bfloat16_rounding_and_measures_the_move():
    warm, trained = checkpoint(0), checkpoint(1)
    synced, moved = compare_vllm_weights(VllmDouble(trained), trained, warm)
    largest = max(weight.abs().max().item() for weight in trained.values())
    assert 0 < synced <= largest * VLLM_CPU_ROUNDING and moved > 0.5  # two independent draws differ by ~1
    synced, moved = compare_vllm_weights(VllmDouble(warm), warm, warm)
    assert moved == 0.0  # vLLM holds the warm start exactly as it loaded it


def test_the_sync_check_stops_when_vllm_kept_other_weights():
    warm, trained = checkpoint(0), checkpoint(1)
    with pytest.raises(SmokeFailure, match=r"qkv_proj differs from the trained weights .* did not reach vLLM"):
        compare_vllm_weights(VllmDouble(warm), trained, warm)  # the sync never happened
    nudged = {name: weight.clone() for name, weight in trained.items()}
    nudged["model.layers.0.self_attn.o_proj.weight"][0, 0] += 0.05  # one weight, past rounding
    with pytest.raises(SmokeFailure, match="o_proj differs"):
        compare_vllm_weights(VllmDouble(trained), nudged, warm)
