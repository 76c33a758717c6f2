"""modes.py: the command line of env_rollout.py: a mode flag, then that mode's own flags.

`python env_rollout.py --learn ...` hands over to this file, which imports the lesson (env_rollout.py)
and the modes built on it beside it (trl_on_cpu.py, env_check.py), each only when its mode runs; none of
them imports this file, and the lesson imports none of them: the imports go one way.

--full, --learn, --rehearse: TRL's parser over their recipes (labkit/recipes.py); the other modes: one
flag per field of their config dataclass (env_rollout.SmokeConfig, the others beside), labkit/command_line.py.
"""

import os
import signal
import sys

import env_rollout

MODE_CONFIG_AND_RUN = {  # each mode's config class and runner, in the lesson or in a module beside it
    "smoke": ("SmokeConfig", "run_smoke"),
    "full": ("WordleSettings", "run_full"),
    "rehearse": ("RehearseConfig", "run_rehearse"),
    "learn": ("LearnConfig", "run_learn"),
    "show-mask": ("ShowMaskConfig", "run_show_mask"),
    "check": ("CheckConfig", "run_mode"),
}


def mode_module(mode: str, cpu_scale: bool = False):
    """Where a mode lives: the lesson, or trl_on_cpu.py / env_check.py, imported only for their modes
    (--smoke needs torch alone)."""
    if mode in ("rehearse", "learn", "show-mask") or cpu_scale:
        import trl_on_cpu

        return trl_on_cpu
    if mode == "check":
        import env_check

        return env_check
    return env_rollout


def config_class_of(mode: str):
    return getattr(mode_module(mode), MODE_CONFIG_AND_RUN[mode][0])


def main(argv: list[str] | None = None) -> int:
    """Run the mode the flags name; return its exit status. Ctrl-C stops any mode with one line (what it
    stopped, what is kept, how to go on) and status 130; a reader that leaves (`| head`) ends it quietly; a
    full disk, in one line that says so and what is kept, with status 1."""
    from labkit import command_line, runs

    mode = config = None
    try:
        mode, config = command_line.parse(sys.argv[1:] if argv is None else list(argv), config_class_of)
        status = run_mode(mode, config)
        sys.stdout.flush()  # here, where a reader that left is caught, not at exit
        return status
    except runs.Interrupted as stop:  # a run that says itself what it kept (run_full: its last checkpoint)
        print(stop, file=sys.stderr)
        return runs.INTERRUPTED_STATUS
    except KeyboardInterrupt:
        print(interrupted_line(mode, config), file=sys.stderr)
        return runs.INTERRUPTED_STATUS
    except BrokenPipeError:
        # stdout's reader left: stop quietly. stdout goes to /dev/null from here, or Python's own flush at
        # exit would fail on the closed pipe again, and say so.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE  # what a shell reports for a writer whose reader left
    except Exception as error:
        # A full disk, wherever the write was (a checkpoint, a plot, a cache): one line saying so and what is kept.
        if mode is None or (full := runs.disk_full(error, folders_written(mode, config))) is None:
            raise
        print(
            interrupted_line(mode, config, f"stopped by a full disk ({full})", "free space on it, then "),
            file=sys.stderr,
        )
        return 1


def interrupted_line(mode: str | None, config, stopped: str = "interrupted (Ctrl-C)", first: str = "") -> str:
    """What stopped a mode (Ctrl-C, or `stopped`), what is kept, and how to go on (after `first`, what to
    do before it), in one line."""
    from labkit import runs

    if mode is None:
        return f"{stopped} while reading the flags: nothing was run"
    # The other modes write only when they end (--learn, --rehearse and --show-mask train in a temporary folder).
    if mode != "full":
        return f"--{mode} {stopped}: nothing was kept; {first}run it again"
    settings, args = config[0], config[1]
    folder = os.path.join(args.output_dir, "run") if settings.tiny or settings.smollm2 else args.output_dir
    if runs.holds_run(folder):
        kept = runs.last_complete_checkpoint(folder) or "its warm start"
        go_on = f"{first}continue with --resume"
        return f"--full {stopped}: the run in {folder} is kept, up to {kept}. {go_on[0].upper()}{go_on[1:]}."
    again = "without --resume" if settings.resume else "the same command"
    return f"--full {stopped} before its first checkpoint: nothing to resume; {first}run {again} to start again"


def folders_written(mode: str, config) -> list[str]:
    """Where a mode writes: its run's folder (--full), and the temporary folder the CPU modes train in."""
    import tempfile

    folders = [config[1].output_dir] if mode == "full" else []
    return folders + [tempfile.gettempdir()]


def run_mode(mode: str, config) -> int:
    from labkit import recipes, trl_glue
    from labkit import wordle_sessions as sessions

    if mode == "full":  # what no machine could run: refused alike by the dry run and the run
        recipes.refuse_what_no_run_takes(*config)
        recipes.refuse_a_model_at_a_cpu_scale(config[0], config[2])
    if mode == "full" and config[0].dry_run:  # what a run would use, before booking GPU time
        return recipes.print_dry_run(*config, env_rollout.training_reward(config[0], config[1]))
    if mode == "full" and (config[0].tiny or config[0].smollm2):  # the CPU scales
        cpu_scales = mode_module(mode, cpu_scale=True)
        run = cpu_scales.run_full_smollm2 if config[0].smollm2 else cpu_scales.run_full_tiny
    else:
        run = getattr(mode_module(mode), MODE_CONFIG_AND_RUN[mode][1])
    failures = (env_rollout.SmokeFailure, sessions.WordleServerError, sessions.MissingClientError, *trl_glue.FAILURES)
    try:
        status = run(*config) if isinstance(config, tuple) else run(config)  # TRL-parsed: (settings, GRPOConfig...)
    except failures as failure:
        print(f"{mode} FAILED: {failure}", file=sys.stderr)
        return 1
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    sys.exit(main())
