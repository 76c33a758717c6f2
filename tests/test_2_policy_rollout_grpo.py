"""Sections 2 to 4: belief states, the rollout and its trace, group-relative advantages, the update."""

import random

import pytest
import torch

from env_rollout import (
    LR_WARMUP_ITERATIONS,
    GuessEnv,
    SmokeConfig,
    SmokeFailure,
    TabularSampler,
    TraceEntry,
    belief_states,
    binary_search_guess,
    check_masking,
    episode_log_probs,
    group_advantages,
    legal_guess_mask,
    play_episode,
    train_tabular_grpo,
    update_belief,
)


def test_belief_narrows_with_feedback():
    assert update_belief((1, 8), 4, "higher") == (5, 8)
    assert update_belief((1, 8), 4, "lower") == (1, 3)
    assert update_belief((1, 8), 4, "correct") == (4, 4)
    assert update_belief((5, 8), 2, "higher") == (5, 8)  # a guess outside the interval teaches nothing new


def test_belief_states_cover_every_interval():
    states = belief_states(8)
    assert len(states) == 8 * 9 // 2
    assert sorted(states.values()) == list(range(len(states)))


def test_legal_mask_allows_exactly_the_interval():
    states = belief_states(8)
    mask = legal_guess_mask(states, 8)
    row = mask[states[(3, 5)]]
    assert torch.isfinite(row).tolist() == [False, False, True, True, True, False, False, False]


def test_sampler_only_guesses_inside_the_interval():
    states = belief_states(8)
    sampler = TabularSampler(torch.randn(len(states), 8), states, random.Random(0))
    assert all(3 <= sampler((3, 5)) <= 5 for _ in range(200))


def test_trace_weights_only_the_policy_text():
    env = GuessEnv()
    episode = play_episode(env, binary_search_guess, target=7)
    roles = [entry.role for entry in episode.trace]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool"]
    assert [entry.weight for entry in episode.trace] == [0, 1, 0, 1, 0, 1, 0]
    assert [entry.text for entry in episode.trace if entry.role == "tool"] == ["higher", "higher", "correct"]
    assert [entry.guess for entry in episode.trace if entry.weight] == [4, 6, 7] and episode.reward == 1.0
    assert [entry.belief for entry in episode.trace if entry.weight] == [(1, 8), (5, 8), (7, 8)]
    assert check_masking([episode.trace]) == 1


def test_masking_check_fails_on_a_weighted_tool_response():
    bad = [
        TraceEntry("user", "prompt", 0),
        TraceEntry("assistant", "guess(value=4)", 1),
        TraceEntry("tool", "higher", 1),
    ]
    with pytest.raises(SmokeFailure, match="tool entry"):
        check_masking([bad])


def test_advantages_of_an_all_equal_group_are_zero():
    for value in (0.0, 1.0):
        assert torch.equal(group_advantages(torch.full((2, 8), value)), torch.zeros(2, 8))


def test_advantages_are_normalised_within_each_group_only():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    advantages = group_advantages(rewards)
    assert torch.allclose(advantages.mean(dim=1), torch.zeros(2), atol=1e-6)
    # population std: group 0 has mean 0.25, std sqrt(0.1875)
    assert advantages[0, 0].item() == pytest.approx(0.75 / (0.1875**0.5 + 1e-4))
    assert advantages[1, 3].item() == pytest.approx(-0.75 / (0.1875**0.5 + 1e-4))


def test_episode_log_probs_sum_the_policy_choices():
    states = belief_states(8)
    logits = torch.zeros(len(states), 8, requires_grad=True)
    episode = play_episode(GuessEnv(), binary_search_guess, target=7)  # intervals of size 8, 4, 2
    log_probs = episode_log_probs(logits, states, [episode])
    expected = torch.log(torch.tensor(1 / 8)) + torch.log(torch.tensor(1 / 4)) + torch.log(torch.tensor(1 / 2))
    assert log_probs.item() == pytest.approx(expected.item())
    log_probs.sum().backward()
    assert logits.grad[states[(1, 8)]].abs().sum() > 0


def test_the_loss_reads_the_trace_weights():
    # Zeroing a tool call's weight removes it from the loss, as tool_mask removes tokens in TRL.
    states = belief_states(8)
    logits = torch.randn(len(states), 8)
    episode = play_episode(GuessEnv(), binary_search_guess, target=7)
    full = episode_log_probs(logits, states, [episode]).item()
    masked_trace = [entry._replace(weight=0) if entry.guess == 6 else entry for entry in episode.trace]
    masked = episode_log_probs(logits, states, [episode._replace(trace=masked_trace)]).item()
    mask = legal_guess_mask(states, 8)
    dropped = torch.log_softmax(logits + mask, dim=-1)[states[(5, 8)], 5].item()
    assert masked == pytest.approx(full - dropped, abs=1e-5)


def test_training_is_deterministic_and_keeps_every_trace():
    args = SmokeConfig(iterations=5, seed=3)
    first, second = train_tabular_grpo(args), train_tabular_grpo(args)
    assert torch.equal(first["logits"], second["logits"])
    assert len(first["curve"]) == 5
    assert len(first["traces"]) == 5 * args.prompts * args.group


def test_the_first_update_is_a_warm_up_step():
    # Adam's first step moves every logit with a gradient by the full learning rate, whatever the
    # gradient's size; the warm-up is what keeps that first, noisiest step small.
    args = SmokeConfig(iterations=1)
    logits = train_tabular_grpo(args)["logits"]
    assert logits.abs().max().item() == pytest.approx(args.lr / LR_WARMUP_ITERATIONS, rel=1e-4)


def test_the_optimizer_is_torch_adam_warmed_up_from_a_twentieth_of_lr_to_lr(monkeypatch):
    # The lesson's optimizer is torch.optim.Adam itself, with its defaults (betas 0.9 and 0.999, eps
    # 1e-8, no weight decay), stepped once per update at a learning rate that rises linearly from
    # lr / 20 to lr over the first LR_WARMUP_ITERATIONS updates, then stays at lr.
    steps = []

    class RecordingAdam(torch.optim.Adam):
        def step(self, closure=None):
            group = self.param_groups[0]
            steps.append((group["lr"], group["betas"], group["eps"], group["weight_decay"]))
            return super().step(closure)

    monkeypatch.setattr(torch.optim, "Adam", RecordingAdam)
    args = SmokeConfig(iterations=LR_WARMUP_ITERATIONS + 5, seed=3)
    recorded = train_tabular_grpo(args)["logits"]
    rates = [args.lr * min(1.0, update / LR_WARMUP_ITERATIONS) for update in range(1, args.iterations + 1)]
    assert [lr for lr, _, _, _ in steps] == pytest.approx(rates, rel=1e-12)
    assert rates[0] == pytest.approx(args.lr / 20) and rates[-1] == args.lr
    assert {(betas, eps, decay) for _, betas, eps, decay in steps} == {((0.9, 0.999), 1e-8, 0)}
    monkeypatch.undo()  # the same run with torch's own Adam, unobserved: the same table, exactly
    assert torch.equal(train_tabular_grpo(args)["logits"], recorded)
