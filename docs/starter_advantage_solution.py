"""One way to fill in docs/starter_advantage.py (exercise 8 of docs/exercises.md). Read it after yours passes:

python docs/exercise_check.py advantage docs/starter_advantage_solution.py
"""

import torch


def advantages(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """(r - mean) / (std + eps) within each group, with the sample standard deviation."""
    mean = rewards.mean(dim=-1, keepdim=True)
    std = rewards.std(dim=-1, correction=1, keepdim=True)  # the lesson's: correction=0
    return (rewards - mean) / (std + eps)
