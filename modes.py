"""modes.py: the command line of env_rollout.py: a mode flag, then that mode's own flags.

`python env_rollout.py --learn ...` hands over to this file, which imports the lesson (env_rollout.py)
and the modes built on it beside it (trl_on_cpu.py, env_check.py), each only when its mode runs; none of
them imports this file, and the lesson imports none of them: the imports go one way.

--full, --learn, --rehearse: TRL's parser over their recipes (labkit/recipes.py); the other modes: one
flag per field of their config dataclass (env_rollout.SmokeConfig, the others beside), labkit/command_line.py.
"""

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
    from labkit import command_line, recipes, trl_glue
    from labkit import wordle_sessions as sessions

    mode, config = command_line.parse(sys.argv[1:] if argv is None else list(argv), config_class_of)
    if mode == "full" and config[0].dry_run:  # what a run would use, before booking GPU time
        return recipes.print_dry_run(*config)
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
