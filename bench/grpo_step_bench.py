"""Benchmark of one GRPO step of `--full --smollm2` against its floor: where each second goes, and what
plain PyTorch pays for the same work in the same process.

    python bench/grpo_step_bench.py [--warm-start RUN] [--steps 3] [--flags --bf16 true ...]

It runs the real path, `env_rollout.py --full --smollm2` with its recipe, and times each GRPO step's
parts as they happen, from TRL's own profiling blocks (trl.extras.profiling, which TRL times whether or not
a tracker is attached) and from the trainer's callbacks:
- generation: every `transformers.generate` call of the tool-call loop (one a turn);
- the game: WordleEnv.reset and each tool call, the environment's own time;
- the rewards: TRL's _calculate_rewards (every reward function);
- scoring: the forward passes without a gradient (old or reference log-probs, where the recipe needs them);
- the loss's forward (TRL's compute_loss), the backward (accelerator.backward), the optimizer step;
- the rest: the step's remainder (TRL's tool-call loop and tokenizing, clipping, logging, the checkpoint).
Peak resident memory per part beside each (VmHWM, reset as each part starts).

The floor, measured after the last step on that step's own batches, with the same model and adapter:
- generation: each recorded `generate` call again, plain, with the model's cache, forced to the same number
  of new tokens; and of it, the prefill (one forward over the call's input), which each turn pays again
  for the conversation so far;
- the loss: one forward and backward per micro-batch of the same padded tokens (log-probs of the
  completion, masked mean), no TRL;
- the optimizer: AdamW over copies of the adapter's weights with the same gradients;
- the game is its own floor.
It prints each part, the floor, and step / floor. Figures, not verdicts: it exits 0 whatever they are.

--warm-start RUN starts GRPO from the warm start a run left (RUN/run/warm-start, or RUN/warm-start: as
`make learn-wordle` and every --full --smollm2 run write it), by --resume on a copy in a scratch folder,
instead of training the warm start again (8 minutes). Without it, the bench runs the warm start first.
"""

import argparse
import collections
import contextlib
import copy
import functools
import json
import os
import re
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# The names of TRL's profiling blocks this bench reads (each is TRL's class name, a dot, then these).
GENERATE, LOGPS, REWARDS, LOSS = (
    "transformers.generate",
    "_get_per_token_logps_and_entropies",
    "_calculate_rewards",
    "compute_loss",
)
PARTS = ("generation", "game", "rewards", "scoring", "loss forward", "backward", "optimizer", "rest")


def peak_rss_kib() -> int:
    """This process's peak resident set since the last reset_peak_rss (Linux: VmHWM)."""
    with open("/proc/self/status") as status:
        return int(re.search(r"VmHWM:\s+(\d+)", status.read()).group(1))


def reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # the kernel's "reset the peak resident set" request (proc(5))


class StepParts:
    """Seconds and peak resident memory of each part of each step. Parts may nest (a tool call inside
    TRL's loop): a part's peak is read when it ends, and an inner part's reset first folds the peak so far
    into every part still open."""

    def __init__(self):
        self.steps: list[dict] = []
        self.open: list[str] = []
        self.peaks: dict = collections.defaultdict(int)
        self.seconds: dict = collections.defaultdict(float)
        self.started: float | None = None
        self.generate_calls: list[dict] = []
        self.loss_batches: list[dict] = []
        self.blocks_seen: set[str] = set()

    def begin_step(self) -> None:
        if self.started is not None:  # the last step never reached its checkpoint: stopped, not measured
            print("bench: a GRPO step was stopped before its checkpoint: left out", flush=True)
        self.seconds, self.peaks = collections.defaultdict(float), collections.defaultdict(int)
        self.generate_calls, self.loss_batches = [], []
        self.started = time.perf_counter()
        reset_peak_rss()

    def end_step(self) -> None:
        if self.started is None:
            return
        total = time.perf_counter() - self.started
        seconds = dict(self.seconds)
        seconds["rest"] = total - sum(seconds.values())
        self.peaks["rest"] = max(self.peaks["rest"], peak_rss_kib())
        self.steps.append({"seconds": seconds, "peaks": dict(self.peaks), "total": total})
        self.started = None

    def enter(self, part: str) -> float:
        if self.started is None:  # outside a GRPO step (the warm start, the held-out games): not counted
            return time.perf_counter()
        peak = peak_rss_kib()
        for name in [*self.open, "rest"]:
            self.peaks[name] = max(self.peaks[name], peak)
        reset_peak_rss()
        self.open.append(part)
        return time.perf_counter()

    def leave(self, part: str, entered: float) -> None:
        if self.started is None or part not in self.open:
            return
        self.open.remove(part)
        seconds = time.perf_counter() - entered
        self.seconds[part] += seconds
        if self.open:  # the outer part's own seconds exclude this one
            self.seconds[self.open[-1]] -= seconds
        peak = peak_rss_kib()
        for name in [part, *self.open]:
            self.peaks[name] = max(self.peaks[name], peak)

    @contextlib.contextmanager
    def part(self, name: str):
        entered = self.enter(name)
        try:
            yield
        finally:
            self.leave(name, entered)


def trl_part(name: str, grad_enabled: bool) -> str | None:
    """The bench's part for one of TRL's profiling blocks (`GRPOTrainer.compute_loss`), or None."""
    block = name.split(".", 1)[-1]
    if block == GENERATE:
        return "generation"
    if block == REWARDS:
        return "rewards"
    if block == LOSS:
        return "loss forward"
    if block == LOGPS and not grad_enabled:  # with a gradient, it is compute_loss's own forward
        return "scoring"
    return None


def instrument(parts: StepParts, floors: list) -> None:
    """Time the real run's parts, in this process: TRL's profiling blocks, the game's calls, the backward
    and the optimizer (callbacks), and record what the floor replays."""
    import torch
    import transformers
    from transformers import TrainerCallback
    from trl.extras import profiling

    import env_rollout
    from labkit import trl_glue

    def enter(self):
        parts.blocks_seen.add(self.name.split(".", 1)[-1])
        self._bench_part = trl_part(self.name, torch.is_grad_enabled())
        self._bench_entered = parts.enter(self._bench_part) if self._bench_part else None
        return self

    def leave(self, exc_type, exc_value, traceback):
        if self._bench_part:
            parts.leave(self._bench_part, self._bench_entered)
        return False

    profiling.ProfilingContext.__enter__, profiling.ProfilingContext.__exit__ = enter, leave

    for method in ("reset", "guess"):
        played = getattr(env_rollout.WordleEnv, method)

        @functools.wraps(played)  # TRL reads the tool's signature and docstring through the wrapper
        def played_as_a_part(*args, _played=played, **kwargs):
            with parts.part("game"):
                return _played(*args, **kwargs)

        setattr(env_rollout.WordleEnv, method, played_as_a_part)

    generate = transformers.GenerationMixin.generate

    def recorded_generate(self, *args, **kwargs):
        output = generate(self, *args, **kwargs)
        if parts.started is not None and "input_ids" in kwargs:
            parts.generate_calls.append(
                {
                    "input_ids": kwargs["input_ids"],
                    "attention_mask": kwargs.get("attention_mask"),
                    "generation_config": kwargs.get("generation_config"),
                    "new_tokens": output.shape[1] - kwargs["input_ids"].shape[1],
                }
            )
        return output

    transformers.GenerationMixin.generate = recorded_generate

    class StepClock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            parts.begin_step()
            print(f"bench: GRPO step {state.global_step + 1} begins", flush=True)

        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            self.optimizing = parts.enter("optimizer")

        def on_optimizer_step(self, args, state, control, **kwargs):
            parts.leave("optimizer", self.optimizing)

        def on_save(self, args, state, control, **kwargs):
            parts.end_step()  # the step's checkpoint is written: the step, logging and saving included, ends

        def on_train_end(self, args, state, control, **kwargs):
            parts.end_step()
            if state.global_step >= args.max_steps and parts.loss_batches:
                floor = measure_floor(self.trainer, parts, args)
                if args.bf16:
                    print("bench: bf16 against float32 on the last step's batches", flush=True)
                    floor["precision"] = precision_gap(self.trainer, parts)
                floors.append(floor)

    build = trl_glue.build_grpo_trainer

    def built_and_timed(*args, **kwargs):
        trainer = build(*args, **kwargs)
        clock = StepClock()
        clock.trainer = trainer
        trainer.add_callback(clock)
        backward = trainer.accelerator.backward

        def timed_backward(loss, **kwargs):
            with parts.part("backward"):
                return backward(loss, **kwargs)

        trainer.accelerator.backward = timed_backward
        compute_loss = trainer.compute_loss

        def recorded_compute_loss(model, inputs, *args, **kwargs):
            if parts.started is not None:
                parts.loss_batches.append(inputs)
            return compute_loss(model, inputs, *args, **kwargs)

        trainer.compute_loss = recorded_compute_loss
        return trainer

    trl_glue.build_grpo_trainer = built_and_timed


def timed(work) -> tuple[float, int]:
    """(seconds, peak resident KiB) of `work()`."""
    reset_peak_rss()
    started = time.perf_counter()
    work()
    return time.perf_counter() - started, peak_rss_kib()


def completion_log_probs(model, batch: dict):
    """Plain PyTorch's GRPO forward: log-probs of the completion's tokens, from one forward over
    prompt + completion (the same padded tensors TRL built)."""
    import torch

    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    keep = batch["completion_ids"].shape[1]
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep + 1).logits[:, :-1]
    return torch.gather(logits.float().log_softmax(-1), 2, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)


def completion_loss(model, batch: dict, bf16: bool):
    """The floor's loss: the completion's mean negative log-probability, the forward under bf16 autocast
    where `bf16`."""
    import torch

    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        log_probs = completion_log_probs(model, batch)
    mask = batch["completion_mask"]
    return -(log_probs * mask).sum() / mask.sum().clamp(min=1)


def measure_floor(trainer, parts: StepParts, args) -> dict:
    """The last step's work again, as plain PyTorch does it: seconds and peak resident memory."""
    import torch

    model = trainer.model
    autocast = functools.partial(torch.autocast, "cpu", dtype=torch.bfloat16, enabled=bool(args.bf16))
    print(
        f"bench: the floor: {len(parts.generate_calls)} generate calls, {len(parts.loss_batches)} micro-batches",
        flush=True,
    )
    was_training = model.training
    model.train(False)
    generation = prefill = 0.0
    generation_peak = 0
    for call in parts.generate_calls:
        config = copy.deepcopy(call["generation_config"])
        config.max_new_tokens = config.min_new_tokens = call["new_tokens"]
        config.use_cache = True
        inputs = {"input_ids": call["input_ids"], "attention_mask": call["attention_mask"]}
        with torch.no_grad(), autocast():
            seconds, peak = timed(functools.partial(model.generate, **inputs, generation_config=config))
            generation, generation_peak = generation + seconds, max(generation_peak, peak)
            prefill += timed(functools.partial(model, **inputs, logits_to_keep=1))[0]
    model.train(was_training)

    def loss_forward_backward():
        for batch in parts.loss_batches:
            completion_loss(model, batch, bool(args.bf16)).backward()

    loss, loss_peak = timed(loss_forward_backward)
    trained = [p for p in model.parameters() if p.requires_grad]
    copies = [p.detach().clone().requires_grad_() for p in trained]
    for original, duplicate in zip(trained, copies, strict=True):
        duplicate.grad = original.grad.clone() if original.grad is not None else torch.zeros_like(duplicate)
    optimizer = torch.optim.AdamW(copies, lr=args.learning_rate)
    optimizer_seconds, optimizer_peak = timed(optimizer.step)
    model.zero_grad(set_to_none=True)
    return {
        "generation": generation,
        "prefill": prefill,
        "loss forward + backward": loss,
        "optimizer": optimizer_seconds,
        "peaks": {"generation": generation_peak, "loss": loss_peak, "optimizer": optimizer_peak},
        "tokens": {
            "generate calls": len(parts.generate_calls),
            "prompt tokens read": sum(int(c["attention_mask"].sum()) for c in parts.generate_calls),
            "new tokens": sum(int(c["input_ids"].shape[0]) * c["new_tokens"] for c in parts.generate_calls),
        },
    }


def precision_gap(trainer, parts: StepParts) -> dict:
    """bf16 against float32 on the last step's own batches: the plain loss (the floor's) and its gradient
    over the adapter, from this run's model (bf16 base, autocast) and from the same adapter on the model
    loaded in float32 from the same folder. Both in eval mode (no dropout), so only the precision differs."""
    import torch
    from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
    from transformers import AutoModelForCausalLM

    model = trainer.model
    reference = AutoModelForCausalLM.from_pretrained(model.config._name_or_path, dtype=torch.float32)
    reference = get_peft_model(reference, copy.deepcopy(model.peft_config["default"]))
    set_peft_model_state_dict(reference, get_peft_model_state_dict(model))

    def loss_and_gradient(net, bf16: bool) -> tuple[float, torch.Tensor]:
        was_training = net.training
        net.train(False)
        total = 0.0
        for batch in parts.loss_batches:
            loss = completion_loss(net, batch, bf16)
            loss.backward()
            total += loss.item()
        named = {n: p for n, p in net.named_parameters() if p.requires_grad}
        # float64: summed in float32 over millions of terms, the cosine came out above 1 (1.0007, measured)
        gradient = torch.cat([named[n].grad.double().flatten() for n in sorted(named)])
        net.zero_grad(set_to_none=True)
        net.train(was_training)
        return total, gradient

    loss, gradient = loss_and_gradient(model, bf16=True)
    reference_loss, reference_gradient = loss_and_gradient(reference, bf16=False)
    return {
        "loss": loss,
        "float32 loss": reference_loss,
        "gradient cosine": float(torch.nn.functional.cosine_similarity(gradient, reference_gradient, dim=0)),
        "gradient norm ratio": float(gradient.norm() / reference_gradient.norm()),
    }


def report(steps: list[dict], floor: dict) -> list[str]:
    """The bench's lines: each part of every measured step, and the last step against its floor (the
    floor replays the last step's own batches: a step's cost grows with its rollouts' length)."""
    last = steps[-1]
    totals = ", ".join(f"{step['total']:.1f}" for step in steps)
    lines = [f"GRPO steps: {totals} s; the parts of each, and each part's peak:"]
    for part in PARTS:
        seconds = "  ".join(f"{step['seconds'].get(part, 0.0):7.1f}" for step in steps)
        peak = max(step["peaks"].get(part, 0) for step in steps) / 2**20
        lines.append(
            f"  {part:<13} {seconds} s   peak {peak:.2f} GiB" if peak else f"  {part:<13} {seconds} s   (not run)"
        )
    game = last["seconds"].get("game", 0.0)
    floor_total = floor["generation"] + game + floor["loss forward + backward"] + floor["optimizer"]
    trl_loss = last["seconds"].get("loss forward", 0.0) + last["seconds"].get("backward", 0.0)
    tokens = floor["tokens"]
    lines += [
        f"floor of the last step (plain PyTorch, its own batches, this process): {floor_total:.1f} s",
        f"  generation    {floor['generation']:7.1f} s   of it prefill {floor['prefill']:.1f} s ({tokens['generate calls']} "
        f"calls: {tokens['prompt tokens read']} prompt tokens read, {tokens['new tokens']} new)   "
        f"peak {floor['peaks']['generation'] / 2**20:.2f} GiB",
        f"  game          {game:7.1f} s   (its own floor)",
        f"  loss fwd+bwd  {floor['loss forward + backward']:7.1f} s   peak {floor['peaks']['loss'] / 2**20:.2f} GiB",
        f"  optimizer     {floor['optimizer']:7.1f} s",
        f"step / floor (the last step): {last['total'] / floor_total:.2f}   (generation "
        f"{last['seconds'].get('generation', 0.0) / floor['generation']:.2f}, loss forward + backward "
        f"{trl_loss / floor['loss forward + backward']:.2f})",
    ]
    if precision := floor.get("precision"):
        lines.append(
            f"bf16 against float32 (the last step's batches, the floor's loss, eval mode): loss {precision['loss']:.5f} "
            f"against {precision['float32 loss']:.5f}, gradient cosine {precision['gradient cosine']:.4f}, "
            f"norm ratio {precision['gradient norm ratio']:.4f}"
        )
    return lines


def warm_started_folder(source: str, folder: str) -> None:
    """A copy of `source`'s finished warm start in `folder`, which --resume then continues from GRPO's step 0."""
    import trl_on_cpu
    from labkit import warm_start

    found = [
        os.path.join(source, "run", warm_start.WARM_START_FOLDER),
        os.path.join(source, warm_start.WARM_START_FOLDER),
    ]
    found = [path for path in found if os.path.isfile(os.path.join(path, warm_start.FIGURES_FILE))]
    if not found:
        raise SystemExit(f"--warm-start {source}: no finished warm start in it (warm-start/{warm_start.FIGURES_FILE})")
    shutil.copytree(found[0], os.path.join(folder, "run", warm_start.WARM_START_FOLDER))
    open(os.path.join(folder, trl_on_cpu.TINY_RUN_MARK), "w").close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm-start", metavar="RUN", help="start GRPO from the warm start this run left")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps (--full --smollm2 takes 3 or more)")
    parser.add_argument("--output-dir", metavar="DIR", help="keep the run here (a new folder) instead of a scratch one")
    parser.add_argument("--flags", nargs=argparse.REMAINDER, default=[], help="more flags for the run")
    bench = parser.parse_args(argv)
    if bench.steps < 3:
        parser.error("--steps: --full --smollm2 stops its first run after checkpoint-2, so 3 or more")
    if not os.path.exists("/proc/self/clear_refs"):
        raise SystemExit("this bench reads peak memory per part from Linux's /proc/self (VmHWM)")
    import modes

    parts, floors = StepParts(), []
    if bench.output_dir and os.path.exists(bench.output_dir):
        raise SystemExit(f"--output-dir {bench.output_dir} exists: the bench keeps its run in a new folder")
    with tempfile.TemporaryDirectory(prefix="grpo-step-bench-") as scratch:
        folder = bench.output_dir or os.path.join(scratch, "run")
        flags = ["--full", "--smollm2", "--output-dir", folder, "--max_steps", str(bench.steps), "--eval-games", "0"]
        if bench.warm_start:
            warm_started_folder(bench.warm_start, folder)
            flags.append("--resume")
        instrument(parts, floors)
        print("bench: " + " ".join(["env_rollout.py", *flags, *bench.flags]), flush=True)
        status = modes.main([*flags, *bench.flags])
        if status:
            return status
    missing = {GENERATE, LOSS} - parts.blocks_seen
    if missing or not floors:
        import trl

        raise SystemExit(
            f"TRL {trl.__version__} no longer times {', '.join(sorted(missing)) or 'what it did'} in its profiling "
            "blocks (trl.extras.profiling), which this bench reads: it was written on TRL 1.16"
        )
    print("\n".join(report(parts.steps, floors[-1])))
    if bench.output_dir:  # the figures again, to read or compare later
        with open(os.path.join(bench.output_dir, "step_parts.json"), "w", encoding="utf-8") as file:
            json.dump({"steps": parts.steps, "floor": floors[-1], "flags": bench.flags}, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
