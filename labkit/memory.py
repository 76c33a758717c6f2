"""Freed memory handed back to the operating system between the stages and steps of a CPU run.

Why: PyTorch frees a step's activations and its generation's caches, but glibc's malloc (Linux) keeps
freed blocks in its heaps for reuse rather than returning them (blocks up to 32 MiB, once it has raised
its mmap threshold), and heaps fragmented by blocks of many sizes reuse them only in part: a KV cache
that grows by one token a step leaves a trail of blocks each a little too small for the next. On `--full
--smollm2` the process's resident memory so grew within each stage and each step (from 2.2 to about 3.5 GiB
over a GRPO step's generation), and the step's backward landed on top of it (docs/full.md, "Where a GRPO
step's time goes", has the figures). malloc_trim(0) returns every heap's free pages; nothing computed
moves or changes, only pages nobody holds are given back. Where the C library has no malloc_trim
(macOS, musl), nothing is trimmed."""

import ctypes
import ctypes.util
import functools
import gc


@functools.cache
def malloc_trim():
    """glibc's malloc_trim, or None where the C library has none."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def hand_back_free_pages() -> bool:
    """The C library's free pages handed back to the operating system; whether it could."""
    trim = malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def return_freed_memory() -> bool:
    """Between stages: free what only reference cycles hold (an interrupted run's trainer), which
    Python's cycle collector would reach only later, then hand the free pages back."""
    gc.collect()
    return hand_back_free_pages()


def returning_freed_memory_callback():
    """A transformers TrainerCallback that returns freed memory as training begins (after the warm
    start, the held-out games and the model load) and hands free pages back before each step and after
    each micro-batch's backward. Milliseconds each, against steps of minutes at the CPU scales."""
    from transformers import TrainerCallback

    class ReturnFreedMemory(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            return_freed_memory()

        def on_step_begin(self, args, state, control, **kwargs):
            hand_back_free_pages()

        def on_substep_end(self, args, state, control, **kwargs):
            hand_back_free_pages()

    return ReturnFreedMemory()
