"""labkit/memory.py: freed memory handed back between a CPU run's stages and steps, which changes nothing
the run computes; and the CPU scales' trainers carry it."""

import gc
import platform
import weakref

import pytest
import torch

from labkit import memory


class Cycle:
    def __init__(self):
        self.me = self


def test_it_frees_what_only_cycles_hold_and_trims_where_glibc_can():
    gc.disable()  # so that only return_freed_memory can collect the cycle
    try:
        held = Cycle()
        gone = weakref.ref(held)
        del held
        assert gone() is not None
        trimmed = memory.return_freed_memory()
        assert gone() is None
    finally:
        gc.enable()
    assert trimmed is (memory.malloc_trim() is not None)
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert trimmed  # the machines this lab measures on


def test_without_malloc_trim_nothing_is_trimmed_and_cycles_are_still_collected(monkeypatch):
    monkeypatch.setattr(memory, "malloc_trim", lambda: None)
    assert memory.hand_back_free_pages() is False
    gc.disable()
    try:
        held = Cycle()
        gone = weakref.ref(held)
        del held
        assert memory.return_freed_memory() is False and gone() is None
    finally:
        gc.enable()


def test_trimming_changes_no_tensor_and_no_random_stream():
    """What a run computes after the trim is what it would have computed without it: live tensors keep
    their values, and torch's random numbers go on as they would have."""
    torch.manual_seed(0)
    live = torch.randn(512, 512)
    kept = live.clone()
    freed = [torch.randn(256, 1024) for _ in range(64)]  # blocks freed into malloc's heap, then trimmed
    del freed
    memory.return_freed_memory()
    after_trim = torch.randn(8)
    torch.manual_seed(0)
    torch.randn(512, 512), [torch.randn(256, 1024) for _ in range(64)]
    assert torch.equal(live, kept) and torch.equal(after_trim, torch.randn(8))


def test_the_callback_returns_freed_memory_as_training_begins_and_trims_around_each_backward(monkeypatch):
    calls = []
    monkeypatch.setattr(memory, "return_freed_memory", lambda: calls.append("collect and trim") or True)
    monkeypatch.setattr(memory, "hand_back_free_pages", lambda: calls.append("trim") or True)
    callback = memory.returning_freed_memory_callback()
    callback.on_train_begin(None, None, None)
    callback.on_step_begin(None, None, None)
    callback.on_substep_end(None, None, None)
    assert calls == ["collect and trim", "trim", "trim"]


def test_the_cpu_scales_trainers_carry_the_callback_and_trim_after_each_generation(monkeypatch):
    pytest.importorskip("trl")
    import trl_on_cpu

    class Trainer:  # stands in for GRPOTrainer: add_callback recorded, the rollouts a batch
        def __init__(self, *args, **kwargs):
            self.callbacks = []

        def add_callback(self, callback):
            self.callbacks.append(callback)

        def _generate_and_score_completions(self, inputs):
            return {"rolled out": inputs}

    trims = []
    monkeypatch.setattr(memory, "hand_back_free_pages", lambda: trims.append(1) or True)
    trainer = trl_on_cpu.returning_freed_memory(Trainer)()
    assert [type(callback).__name__ for callback in trainer.callbacks] == ["ReturnFreedMemory"]
    assert trainer._generate_and_score_completions("prompts") == {"rolled out": "prompts"} and trims == [1]
    stopped = trl_on_cpu.ctrl_c_after_checkpoint(trl_on_cpu.returning_freed_memory(Trainer), 2)()
    assert [type(callback).__name__ for callback in stopped.callbacks] == ["ReturnFreedMemory", "CtrlC"]
