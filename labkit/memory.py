"""Freed memory handed back to the operating system between the stages and steps of a CPU run.

Why: glibc's malloc (Linux) keeps blocks that PyTorch frees in its heaps for reuse rather than returning
them (blocks up to 32 MiB, once it has raised its mmap threshold), and reuses them only in part. On
`--full --smollm2` the process's resident memory so grew within each stage and each GRPO step (over a
step's generation from 2.2 to about 3.5 GiB), and the step's backward landed on top of it; handed back,
each backward lands on about 2 GiB and the run's peak fell from 5.93 to 4.95 GiB, every printed figure
the same (docs/full.md, "A real model on a CPU", has the runs side by side). malloc_trim(0) returns
every heap's free pages: only pages nobody holds. Where the C library has no malloc_trim (macOS, musl),
nothing is trimmed."""

import ctypes
import ctypes.util
import functools
import gc


@functools.cache
def malloc_trim():
    """glibc's `int malloc_trim(size_t pad)`, or None where the C library has none."""
    try:
        trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def trim_free_pages() -> bool:
    """The C library's free pages handed back to the operating system; whether it could."""
    trim = malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def collect_and_trim() -> bool:
    """Between stages: free what only reference cycles hold (an interrupted run's trainer may be among
    it), which Python's cycle collector would reach only later, then trim_free_pages()."""
    gc.collect()
    return trim_free_pages()


def trimming_callback():
    """A transformers TrainerCallback: collect_and_trim as training begins (after the warm start, the
    held-out games and the model load) and as it ends (the last step's backward has no next step to trim
    after it, and the held-out games after GRPO come next); trim_free_pages before each step and after each
    micro-batch's backward but a step's last (transformers calls on_substep_end for those; the next step's
    start trims after the last). Not timed apart: the runs' totals in docs/full.md include them."""
    from transformers import TrainerCallback

    class TrimFreePages(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            collect_and_trim()

        def on_step_begin(self, args, state, control, **kwargs):
            trim_free_pages()

        def on_substep_end(self, args, state, control, **kwargs):
            trim_free_pages()

        def on_train_end(self, args, state, control, **kwargs):
            collect_and_trim()

    return TrimFreePages()
