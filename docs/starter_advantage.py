"""Starter: the group-relative advantage as TRL computes it (exercise 8 of docs/exercises.md).

    cp docs/starter_advantage.py my_advantage.py
    python docs/exercise_check.py advantage my_advantage.py

The lesson's `group_advantages` (env_rollout.py, section 4) divides by the *population* standard
deviation of the group. TRL's GRPOTrainer divides by the *sample* standard deviation (n - 1 in the
denominator of the variance). Write that version below.
"""

import torch


def advantages(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """(r - mean) / (std + eps) within each group, with the sample standard deviation.

    Args:
        rewards: one group per row (the last dimension), e.g. shape (prompts, G).
        eps: keeps the division finite for a group whose rewards are all equal.

    Returns:
        A tensor of the same shape: each reward's advantage within its own group.
    """
    raise NotImplementedError("TODO: the mean and the sample std of each row, then (r - mean) / (std + eps)")
