"""labkit: the plumbing beneath env_rollout.py's lesson.

Each module holds one kind of plumbing and imports nothing from env_rollout.py, modes.py, trl_on_cpu.py or
env_check.py (the lesson and the modes import these, never the reverse):

- `wordle_sessions`: the Wordle game's sessions: the in-process game and its seeding, OpenEnv server
  clients, retries, the preflight, sessions parked for training, and the remedies a refusal names.
- `trl_glue`: what ties the lab to TRL: the trainer builder, the chat template TRL renders with, the
  tool-call read-back and the version guards.
- `recipes`: `--full`'s settings, read by TRL's own parser from the recipe files in recipes/, and
  `--dry-run`'s printout of them.
- `command_line`: the mode flag, and the flags of the modes argparse reads (--smoke, --show-mask,
  --check), one per field of their config dataclass.
- `ranges`: which values every setting takes, checked in one place, for argparse's modes and TRL's.
- `runs`: a run's folder as --resume reads it (its newest complete checkpoint), and Ctrl-C's stop of a run.
- `offline_tokenizers`: Qwen3's own tokenizer built offline, and the small tokenizers of the CPU modes.
- `wordle_solver`, `warm_start`: --full's stage 1, a fair solver's games learnt through TRL's SFTTrainer.
- `plots`: the learning curves --plot draws.
- `memory`: free memory handed back to the operating system between a CPU run's stages and steps.
"""
