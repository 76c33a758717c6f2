"""Section 6: WordleEnv against a double of the OpenEnv TextArena client: the faults the real game
cannot be made to show on demand (dropped connections, async-only and legacy clients, a server that
rewrites its history), the preflight's bookkeeping, and the command line. What the real game does
(rewards, invalid moves, seeds, a real server's capacity) is tested against the real game, in
test_6_wordle_real_game.py."""

import importlib.util
import inspect
import socket
import subprocess
import sys
import threading

import pytest
import textarena_double
from conftest import ROOT, run_cli, run_main_traced, tool_names

import env_rollout
import modes
from env_rollout import WordleEnv, invalid_move_rate, solve_rate
from labkit import command_line, recipes
from labkit import wordle_sessions as sessions
from labkit.wordle_sessions import WordleServerError, preflight

URL = "http://wordle.test:8000"


@pytest.fixture(autouse=True)
def empty_parking(monkeypatch):
    """Each test starts with no session parked by an earlier preflight."""
    monkeypatch.setattr(sessions, "PARKED_CLIENTS", {})


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(sessions, "SERVER_BACKOFF_S", 0.01)
    return textarena_double.install(monkeypatch)


def test_module_import_does_not_import_the_client():
    code = "import sys, env_rollout; print('textarena_env' in sys.modules, 'trl' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["False", "False"], result.stderr


def test_only_guess_is_a_tool():
    assert tool_names(WordleEnv) == ["guess"]
    assert "Args:" in inspect.getdoc(WordleEnv.guess) and "square brackets" in inspect.getdoc(WordleEnv.guess)


def test_async_first_client_opening_text_from_prompt_and_new_feedback_only(server):
    env = WordleEnv(URL)
    opening = env.reset(prompt=[{"role": "user", "content": "hi"}])  # dataset columns are ignored
    assert "You are playing Wordle" in opening  # messages were empty: the text came from observation.prompt
    first = env.guess("[crane]")
    assert first.startswith("You submitted [crane].") and "5 guesses left" in first
    second = env.guess("[slate]")
    assert second.startswith("You submitted [slate].") and "crane" not in second  # only the new part
    assert env.get_reward() == 0.0


def test_opening_text_in_messages_and_cumulative_feedback(monkeypatch):
    textarena_double.install(monkeypatch, textarena_double.Server(empty_messages_at_reset=False))
    env = WordleEnv(URL)
    assert "You are playing Wordle" in env.reset()
    feedback = env.guess("[crane]")
    assert feedback.startswith("You submitted [crane]") and "playing Wordle" not in feedback


def test_text_that_does_not_extend_the_old_is_returned_whole(monkeypatch):
    textarena_double.install(monkeypatch, textarena_double.Server(rewrite_history=True))
    env = WordleEnv(URL)
    env.reset()
    env.guess("[crane]")
    assert env.guess("[slate]").startswith("You submitted [slate].")


def test_solve_pays_one_and_ends_the_game(server):
    env = WordleEnv(URL)
    env.reset()
    assert "You won" in env.guess("plant")  # brackets are added when the model leaves them out
    assert env.get_reward() == 1.0
    assert solve_rate([env]) == [1.0]
    with pytest.raises(ValueError, match="game is over"):
        env.guess("[crane]")


def test_invalid_move_earns_nothing_and_is_counted(server):
    env = WordleEnv(URL)
    env.reset()
    assert "invalid move" in env.guess("[zzzzz]")
    assert env.get_reward() == 0.0  # the server paid 0.2 partial credit: not passed on
    env.guess("[crane]")
    assert (env.moves, env.invalid_moves) == (2, 1)
    assert invalid_move_rate([env]) == [0.5]


def test_partial_credit_at_the_turn_limit_is_not_a_solve(server):
    env = WordleEnv(URL)
    env.reset()
    for _ in range(6):
        env.guess("[pious]")
    assert 0.0 < env.get_reward() < 1.0
    assert solve_rate([env]) == [0.0]
    with pytest.raises(ValueError, match="game is over"):
        env.guess("[crane]")


def test_guess_before_reset_and_bad_arguments(server):
    env = WordleEnv(URL)
    with pytest.raises(RuntimeError, match="reset"):
        env.guess("[crane]")
    env.reset()
    for bad in ("", "[]", None, 5):
        with pytest.raises(ValueError, match="square brackets"):
            env.guess(bad)
    assert env.moves == 0


def test_reused_instance_starts_clean_on_one_session(server):
    env = WordleEnv(URL)
    env.reset()
    env.guess("plant")
    env.reset()
    assert env.get_reward() == 0.0 and env.moves == 0
    assert env.guess("[crane]").startswith("You submitted [crane]")
    assert (server.sessions_opened, server.open_sessions, server.resets) == (1, 1, 2)
    env._session.close()
    assert server.open_sessions == 0


def test_transient_error_is_retried(monkeypatch):
    monkeypatch.setattr(sessions, "SERVER_BACKOFF_S", 0.01)
    server = textarena_double.install(monkeypatch, textarena_double.Server(fail_next=2))
    env = WordleEnv(URL)
    assert "Wordle" in env.reset()
    assert server.sessions_opened == 3  # two failed tries, each on a session of its own
    assert server.open_sessions == 1  # the clients of the failed tries were closed, not leaked


def test_failed_step_ends_the_game_without_a_retry(server, capsys):
    env = WordleEnv(URL)
    env.reset()
    server.fail_next = 1
    with pytest.raises(ValueError, match="stopped answering: this game is over") as error:
        env.guess("[plant]")
    assert "Remedies" not in str(error.value)  # the model reads this message: short, no advice for humans
    assert env.get_reward() == 0.0 and server.fail_next == 0  # tried once, not again
    assert URL in capsys.readouterr().err  # the human is told, on stderr
    with pytest.raises(ValueError, match="game is over"):
        env.guess("[plant]")
    assert "Wordle" in env.reset()  # a fresh session for the next episode
    assert server.open_sessions == 1


def test_async_only_client_is_a_clear_error(monkeypatch):
    textarena_double.install(monkeypatch, async_only=True)
    with pytest.raises(TypeError, match="no .sync"):
        WordleEnv(URL).reset()


def test_local_mode_failure_names_the_game_not_a_server(monkeypatch):
    monkeypatch.setattr(sessions, "SERVER_BACKOFF_S", 0.01)
    textarena_double.install(monkeypatch)

    def broken(self, env_id="Wordle-v0", **kwargs):
        raise LookupError("Resource words not found")  # what a missing NLTK list looks like

    monkeypatch.setattr(sys.modules["textarena_env.server.environment"].TextArenaEnvironment, "__init__", broken)
    with pytest.raises(WordleServerError, match="in-process Wordle game failed") as error:
        WordleEnv("local").reset()
    message = str(error.value)
    assert "duplicate the Space" not in message and "MAX_CONCURRENT_ENVS" not in message
    assert "NLTK_DATA" in message and "nltk.downloader words averaged_perceptron_tagger_eng" in message
    assert "downloaded on first use" not in message


def test_capacity_refusal_names_the_url_and_the_remedies(monkeypatch):
    monkeypatch.setattr(sessions, "SERVER_BACKOFF_S", 0.01)
    server = textarena_double.install(monkeypatch, textarena_double.Server(capacity=1))
    first = WordleEnv(URL)
    first.reset()
    with pytest.raises(WordleServerError) as error:
        WordleEnv(URL).reset()
    message = str(error.value)
    assert URL in message and "capacity" in message
    assert "MAX_CONCURRENT_ENVS" in message and "Docker" in message and "--env-url local" in message
    assert server.open_sessions == 1


def test_legacy_synchronous_client(monkeypatch):
    textarena_double.install(monkeypatch, legacy=True)
    env = WordleEnv(URL)
    assert "Wordle" in env.reset()
    assert env.guess("[plant]").endswith("The game is over.")
    assert env.get_reward() == 1.0


def test_local_mode_plays_in_process(monkeypatch):
    server = textarena_double.install(monkeypatch)
    env = WordleEnv("local")
    env.reset()
    env.guess("[plant]")
    assert env.get_reward() == 1.0
    assert server.sessions_opened == 0  # no client session: the game ran in this process


def test_missing_client_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "textarena_env", None)
    says = r"textarena_env.*docs/full\.md, 'Installing the Wordle game'"
    with pytest.raises(sessions.MissingClientError, match=says):
        WordleEnv(URL).reset()


@pytest.fixture
def listening_url():
    """A loopback port that accepts TCP connections, so the reachability probe passes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_preflight_opens_a_whole_batch_and_training_takes_the_sessions_over(monkeypatch, listening_url):
    server = textarena_double.install(monkeypatch, textarena_double.Server(capacity=32))
    opened, seconds = preflight(listening_url, sessions=32)
    assert opened == 32 and seconds >= 0
    assert server.sessions_opened == 32 and server.open_sessions == 32  # kept open for training
    env = WordleEnv(listening_url)
    env.reset(seed=5)
    assert server.sessions_opened == 32  # a parked session, not a new one
    assert server.reset_kwargs[-1] == {"seed": 5}  # the seed is sent; a server may honour it
    env._session.close()
    sessions.close_parked_clients()  # what the process does at exit for sessions nobody took
    assert server.open_sessions == 0


def test_preflight_fails_when_the_server_cannot_hold_the_batch(monkeypatch, listening_url):
    monkeypatch.setattr(sessions, "SERVER_BACKOFF_S", 0.01)
    server = textarena_double.install(monkeypatch, textarena_double.Server(capacity=4))
    with pytest.raises(WordleServerError, match=r"held 4 of the 32 sessions") as error:
        preflight(listening_url, sessions=32)
    message = str(error.value)
    assert listening_url in message and "MAX_CONCURRENT_ENVS" in message and "capacity" in message
    assert message.count("Remedies") == 1
    assert server.open_sessions == 0 and sessions.PARKED_CLIENTS == {}


def test_preflight_waits_on_progress_and_never_closes_a_pending_client(monkeypatch, listening_url):
    """A server that stops answering: the preflight gives up after the stall allowance, closes only
    the clients that answered, and leaves the pending one to a daemon thread (the process can exit)."""
    server = textarena_double.install(monkeypatch, textarena_double.Server(capacity=32))
    release, lock, calls = threading.Event(), threading.Lock(), []
    real_reset = textarena_double.Session._reset

    def slow_reset(self, **kwargs):
        with lock:
            calls.append(self)
            hang = len(calls) == 4
        if hang:
            release.wait(10)  # the fourth session hangs until the test lets it go
        return real_reset(self, **kwargs)

    monkeypatch.setattr(textarena_double.Session, "_reset", slow_reset)
    with pytest.raises(WordleServerError, match=r"held 3 of the 4 sessions .*1 unanswered"):
        preflight(listening_url, sessions=4, stall_s=0.5)
    assert not release.is_set() and len(calls) == 4  # it gave up while the fourth was still waiting
    assert server.open_sessions == 0  # the three that answered were closed
    hanging = [t for t in threading.enumerate() if "open_session" in t.name and t.is_alive()]  # its own threads
    assert hanging and all(t.daemon for t in hanging)
    release.set()


def test_preflight_against_a_closed_port_fails_fast(monkeypatch):
    """Fast, as in: one bare connection refused, before any session or thread is started."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    started_threads = []
    monkeypatch.setattr(threading.Thread, "start", lambda thread: started_threads.append(thread))
    with pytest.raises(WordleServerError, match="Remedies") as error:
        preflight(f"http://127.0.0.1:{port}", sessions=32)
    assert f"127.0.0.1:{port}" in str(error.value)
    assert started_threads == [] and sessions.PARKED_CLIENTS == {}


def test_full_cli_fails_fast_on_a_dead_server_without_loading_a_model():
    result, report = run_main_traced("--full", "--vllm-mode", "none", "--env-url", "http://127.0.0.1:9", timeout=120)
    assert result.returncode == 1
    assert "http://127.0.0.1:9" in result.stderr and "Remedies" in result.stderr and "--env-url local" in result.stderr
    # TRL is imported (its parser reads --full's flags); the run stops before any game session or model.
    assert "preflight:" not in result.stdout and "vllm" not in report["imported"]
    assert not [name for name in report["imported"] if "qwen3" in name]  # no module of the model to load
    assert report["threads"] == []  # and nothing left running


@pytest.mark.parametrize(
    "flags, complaint",
    [
        (["--tier", "t3"], "--tier must be one of t1, t2, got 't3'"),
        (["--num-generations", "1"], "--num_generations must be a whole number >= 2"),  # before GRPOConfig divides
        (["--num_generations", "3"], "generation_batch_size (32) must be divisible by num_generations (3)"),
        (["--tiny", "--num_generations", "3"], "generation_batch_size (4) must be divisible by num_generations (3)"),
        (["--beta", "abc"], "argument --beta: invalid float value: 'abc'"),
        (["--max-steps", "1.5"], "argument --max_steps/--max-steps: invalid int value: '1.5'"),
        (["--episodes", "0"], "--episodes must be a whole number >= 1, got 0"),
        (["--config", "no/such/recipe.yaml"], "cannot read the recipe no/such/recipe.yaml"),
        (["--iterations", "5"], "--iterations"),  # a flag of --smoke: TRL's parser names it, unused
    ],
)
def test_full_flags_are_checked_by_trls_parser_in_one_line(flags, complaint):
    """--full's flags are read by TRL's parser: a bad one is one line on stderr, exit status 2. (With
    --vllm-mode none: on a machine without CUDA, vLLM colocated is refused first, before TRL's parser.)"""
    result = run_cli("--full", "--vllm-mode", "none", *flags)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("env_rollout.py --full: error: "), result.stderr
    assert complaint in lines[0], lines[0]


@pytest.mark.parametrize(
    "flags, complaint",
    [
        (["--full", "--smoke"], "not allowed with argument"),
        (["--smoke", "--env-url", "http://127.0.0.1:8000"], "--env-url belongs to --full, not --smoke"),
        (["--learn", "--tier", "t2"], "--tier belongs to --full, not --learn"),
        (["--rehearse", "--group", "4"], "--group belongs to --smoke, not --rehearse"),
    ],
)
def test_a_flag_of_another_mode_is_refused_naming_its_mode(flags, complaint):
    result = run_cli(*flags)
    assert result.returncode == 2 and complaint in result.stderr


def test_resume_without_a_checkpoint_is_refused(tmp_path):
    result = run_cli(
        "--full", "--vllm-mode", "none", "--resume", "--output-dir", str(tmp_path), "--env-url", "http://127.0.0.1:9"
    )
    assert result.returncode != 0 and f"--resume: no checkpoint (nor warm start) in {tmp_path}" in result.stderr


def test_existing_checkpoint_needs_resume(tmp_path):
    for step in (20, 100):  # complete checkpoints (a half-written one is no run: tests/test_nothing_lost.py)
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "adapter_model.safetensors").write_bytes(b"weights")
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    result = run_cli("--full", "--vllm-mode", "none", "--output-dir", str(tmp_path), "--env-url", "http://127.0.0.1:9")
    assert result.returncode != 0 and "--resume" in result.stderr


@pytest.mark.skipif(env_rollout.torch.cuda.is_available(), reason="this machine has a GPU: vLLM can colocate")
def test_full_with_colocated_vllm_on_a_machine_without_cuda_is_refused_at_once():
    result, report = run_main_traced("--full", timeout=120)
    assert result.returncode == 1 and "--vllm-mode none" in result.stderr and "preflight" not in result.stdout
    assert len(result.stderr.strip().splitlines()) == 2  # the refusal, then the trace's own report line
    # Refused from the recipe files and the flags alone: before TRL, a game, a dataset, vLLM or a model.
    assert report["imported"] == [] and "textarena_env" not in result.stderr and report["threads"] == []


@pytest.mark.skipif(env_rollout.torch.cuda.is_available(), reason="this machine has a GPU: vLLM can colocate")
@pytest.mark.parametrize(
    "flags, refused",
    [
        ([], True),
        (["--tier", "t2"], True),
        (["--vllm-mode", "colocate"], True),
        (["--use-vllm"], True),
        (["--vllm-mode", "none"], False),
        (["--use_vllm", "false"], False),
        (["--vllm_mode=server"], False),
        (["--tiny"], False),
        (["--smollm2"], False),
        (["--tiny", "--vllm-mode", "colocate"], False),  # vLLM's CPU build: make rehearse-vllm
        (["--smollm2", "--vllm-mode", "colocate"], False),
        (["--dry-run"], False),
        (["--tier", "t3"], False),  # TRL's parser and the lab's checks answer these in their own words
    ],
)
def test_the_early_cuda_refusal_reads_the_recipes_and_flags_as_trl_will(flags, refused):
    assert recipes.colocated_without_cuda(flags) is refused


@pytest.mark.skipif(env_rollout.torch.cuda.is_available(), reason="this machine has a GPU: vLLM can colocate")
def test_the_early_cuda_refusal_reads_a_config_file(tmp_path):
    (tmp_path / "off.yaml").write_text("use_vllm: false\n")
    (tmp_path / "on.yaml").write_text("vllm_mode: colocate\n")
    assert recipes.colocated_without_cuda(["--config", str(tmp_path / "off.yaml")]) is False
    assert recipes.colocated_without_cuda(["--tiny", "--config", str(tmp_path / "on.yaml")]) is False  # tiny: no vLLM
    assert recipes.colocated_without_cuda(["--config", str(tmp_path / "on.yaml")]) is True


def test_full_without_peft_is_one_line(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a))
    with pytest.raises(SystemExit) as stop:
        command_line.parse(["--full", "--dry-run"], modes.config_class_of)
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 1 and len(lines) == 1 and "--full needs peft" in lines[0]


@pytest.mark.parametrize("no_lora", [["--use_peft", "false"], ["--lora-rank", "0"]])  # TRL's spelling, the old one
def test_full_fine_tuning_on_t1_is_refused_with_the_reason(no_lora):
    result = run_cli("--full", "--vllm-mode", "none", *no_lora, "--env-url", "http://127.0.0.1:9")
    assert result.returncode != 0 and "27.5 GB" in result.stderr and "--use_peft false" in result.stderr
    assert "preflight:" not in result.stdout  # refused before the game is tried


def test_seed_reaches_trl_and_the_dataset(monkeypatch):
    mode, (settings, args, model_args) = command_line.parse(
        ["--full", "--vllm-mode", "none", "--seed", "7"], modes.config_class_of
    )
    assert mode == "full" and args.seed == 7 and args.use_vllm is False
    assert isinstance(settings, env_rollout.WordleSettings) and model_args.model_name_or_path == "Qwen/Qwen3-1.7B"
    rows = env_rollout.wordle_dataset(16, seed=7)
    assert (
        rows["seed"] == env_rollout.wordle_dataset(16, seed=7)["seed"] != env_rollout.wordle_dataset(16, seed=8)["seed"]
    )
    assert len(set(rows["seed"])) == 16 and max(rows["seed"]) < env_rollout.EVAL_FIRST_SEED


def test_only_the_scripts_own_import_error_becomes_one_line(monkeypatch):
    """A broken install elsewhere (vLLM, flash-attn) keeps its traceback; the missing Wordle package
    is the one ImportError the script explains in one line."""
    monkeypatch.setattr(env_rollout, "run_smoke", lambda args: (_ for _ in ()).throw(ImportError("libcudart.so")))
    with pytest.raises(ImportError, match="libcudart"):
        modes.main(["--smoke"])

    def missing(args):
        raise sessions.MissingClientError("the Wordle environment needs ...")

    monkeypatch.setattr(env_rollout, "run_smoke", missing)
    assert modes.main(["--smoke"]) == 1


def test_a_resumed_run_reads_the_held_out_stages_it_played_instead_of_playing_them_again(tmp_path, capsys):
    """--resume at the CPU scales replays no held-out game the first run already played (16 games cost
    minutes there): a stage saved on the same number of games is read back; another count, a stage not
    saved yet, or a run that is not resumed, plays them."""
    import types

    from labkit import runs

    class Trainer:
        accelerator = types.SimpleNamespace(is_main_process=True)
        eval_dataset = [{}] * 16

        def __init__(self):
            self.state, self.played = types.SimpleNamespace(log_history=[]), 0

        def evaluate(self):
            self.played += 1
            names = ("solve_rate", "invalid_move_rate", "valid_guesses", "valid_guess_made")
            self.state.log_history.append({f"eval_rewards/{name}/mean": self.played / 10 for name in names})

    args = types.SimpleNamespace(output_dir=str(tmp_path))
    first, fresh = Trainer(), env_rollout.WordleSettings(eval_games=16)
    before = env_rollout.held_out_stage(first, "before", fresh, args)
    assert first.played == 1 and before["solve_rate"] == 0.1
    assert capsys.readouterr().out.splitlines() == [
        "held-out games (before): playing 16...",
        "held-out games (before): 16 played in 0 s",
    ]  # a line before and after: the games take minutes at the CPU scales
    assert runs.saved_held_out(str(tmp_path), 16) == {"before": before}
    resumed, again = Trainer(), env_rollout.WordleSettings(eval_games=16, resume=True)
    assert env_rollout.held_out_stage(resumed, "before", again, args) == before and resumed.played == 0
    warm = env_rollout.held_out_stage(resumed, "after warm start", again, args)  # not saved yet: played
    assert resumed.played == 1 and runs.saved_held_out(str(tmp_path), 16) == {
        "before": before,
        "after warm start": warm,
    }
    other = Trainer()  # another number of games: played again
    env_rollout.held_out_stage(other, "before", env_rollout.WordleSettings(eval_games=8, resume=True), args)
    assert other.played == 1
    replayed = Trainer()  # not resumed: always played
    env_rollout.held_out_stage(replayed, "before", fresh, args)
    assert replayed.played == 1
    (tmp_path / runs.HELD_OUT_FILE).write_text('{"games": 16, "stag', encoding="utf-8")  # cut off mid-write
    assert runs.saved_held_out(str(tmp_path), 16) == {}
