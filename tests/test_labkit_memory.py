"""labkit/memory.py: free memory handed back between a CPU run's stages and steps (what it changes in a run:
nothing printed, measured in docs/full.md); and the CPU scales' trainers carry it."""

import gc
import platform
import weakref

import pytest

from labkit import memory


class Cycle:
    def __init__(self):
        self.me = self


def collected_by(collect) -> tuple[bool, object]:
    """(whether `collect` alone freed an object that only a reference cycle held, what it returned)."""
    gc.disable()  # so that only `collect` can free the cycle
    try:
        held = Cycle()
        gone = weakref.ref(held)
        del held
        assert gone() is not None
        returned = collect()
        return gone() is None, returned
    finally:
        gc.enable()


def test_it_frees_what_only_cycles_hold_and_trims_where_glibc_can():
    freed, trimmed = collected_by(memory.collect_and_trim)
    assert freed and trimmed is (memory.malloc_trim() is not None)
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert trimmed  # the machines this lab measures on


def test_without_malloc_trim_nothing_is_trimmed_and_cycles_are_still_collected(monkeypatch):
    monkeypatch.setattr(memory, "malloc_trim", lambda: None)
    assert memory.trim_free_pages() is False
    assert collected_by(memory.collect_and_trim) == (True, False)


def test_the_callback_collects_as_training_begins_and_ends_and_trims_before_each_step_and_after_a_backward(
    monkeypatch,
):
    calls = []
    monkeypatch.setattr(memory, "collect_and_trim", lambda: calls.append("collect and trim") or True)
    monkeypatch.setattr(memory, "trim_free_pages", lambda: calls.append("trim") or True)
    callback = memory.trimming_callback()
    callback.on_train_begin(None, None, None)
    callback.on_step_begin(None, None, None)
    callback.on_substep_end(None, None, None)
    callback.on_train_end(None, None, None)
    assert calls == ["collect and trim", "trim", "trim", "collect and trim"]


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
    monkeypatch.setattr(memory, "trim_free_pages", lambda: trims.append(1) or True)
    trainer = trl_on_cpu.trimming_trainer_class(Trainer)()
    assert [type(callback).__name__ for callback in trainer.callbacks] == ["TrimFreePages"]
    assert trainer._generate_and_score_completions("prompts") == {"rolled out": "prompts"} and trims == [1]
    stopped = trl_on_cpu.ctrl_c_after_checkpoint(trl_on_cpu.trimming_trainer_class(Trainer), 2)()
    assert [type(callback).__name__ for callback in stopped.callbacks] == ["TrimFreePages", "CtrlC"]
