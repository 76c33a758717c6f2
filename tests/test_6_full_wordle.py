"""Section 6: WordleEnv against a double of the OpenEnv TextArena client, the metrics, the preflight."""

import inspect
import socket
import subprocess
import sys
import time

import pytest
import textarena_double
from conftest import ROOT, run_script, tool_names

import env_rollout
from env_rollout import WordleEnv, WordleServerError, invalid_move_rate, preflight, solve_rate

URL = "http://wordle.test:8000"


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(env_rollout, "SERVER_BACKOFF_S", 0.01)
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
    assert "G G G G G" in env.guess("plant")  # brackets are added when the model leaves them out
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
    env._close_client()
    assert server.open_sessions == 0


def test_transient_error_is_retried(monkeypatch):
    monkeypatch.setattr(env_rollout, "SERVER_BACKOFF_S", 0.01)
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
    monkeypatch.setattr(env_rollout, "SERVER_BACKOFF_S", 0.01)
    textarena_double.install(monkeypatch)

    def broken(self, env_id="Wordle-v0"):
        raise LookupError("Resource words not found")  # what a missing NLTK list looks like

    monkeypatch.setattr(sys.modules["textarena_env.server.environment"].TextArenaEnvironment, "__init__", broken)
    with pytest.raises(WordleServerError, match="in-process Wordle game failed") as error:
        WordleEnv("local").reset()
    assert "duplicate the Space" not in str(error.value) and "NLTK" in str(error.value)


def test_capacity_refusal_names_the_url_and_the_remedies(monkeypatch):
    monkeypatch.setattr(env_rollout, "SERVER_BACKOFF_S", 0.01)
    server = textarena_double.install(monkeypatch, textarena_double.Server(capacity=1))
    first = WordleEnv(URL)
    first.reset()
    with pytest.raises(WordleServerError) as error:
        WordleEnv(URL).reset()
    message = str(error.value)
    assert URL in message and "capacity" in message
    assert "duplicate the Space" in message and "Docker" in message and "--env-url local" in message
    assert server.open_sessions == 1


def test_legacy_synchronous_client(monkeypatch):
    textarena_double.install(monkeypatch, legacy=True)
    env = WordleEnv(URL)
    assert "Wordle" in env.reset()
    assert env.guess("[plant]").endswith("guesses left.")
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
    with pytest.raises(ImportError, match="requirements-full.txt"):
        WordleEnv(URL).reset()


@pytest.fixture
def listening_url():
    """A loopback port that accepts TCP connections, so the reachability probe passes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()


def test_preflight_opens_a_whole_batch_of_sessions_and_closes_them(monkeypatch, listening_url):
    server = textarena_double.install(monkeypatch, textarena_double.Server(capacity=32))
    assert preflight(listening_url, sessions=32) >= 0
    assert server.sessions_opened == 32 and server.open_sessions == 0


def test_preflight_fails_when_the_server_cannot_hold_the_batch(monkeypatch, listening_url):
    monkeypatch.setattr(env_rollout, "SERVER_BACKOFF_S", 0.01)
    server = textarena_double.install(monkeypatch, textarena_double.Server(capacity=4))
    with pytest.raises(WordleServerError, match=r"28 of 32 sessions") as error:
        preflight(listening_url, sessions=32)
    assert listening_url in str(error.value) and "Remedies" in str(error.value)
    assert server.open_sessions == 0


def test_preflight_against_a_closed_port_fails_fast():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    started = time.perf_counter()
    with pytest.raises(WordleServerError, match="Remedies") as error:
        preflight(f"http://127.0.0.1:{port}", sessions=32)
    assert time.perf_counter() - started < 15
    assert f"127.0.0.1:{port}" in str(error.value)


def test_full_cli_fails_fast_on_a_dead_server_without_loading_a_model():
    started = time.perf_counter()
    result = run_script("--full", "--env-url", "http://127.0.0.1:9", timeout=60)
    assert time.perf_counter() - started < 15
    assert result.returncode == 1
    assert "http://127.0.0.1:9" in result.stderr and "Remedies" in result.stderr and "--env-url local" in result.stderr


@pytest.mark.parametrize(
    "flags, complaint",
    [
        (["--full", "--vllm-mode", "server"], "--vllm-mode server needs --vllm-server-url"),
        (["--full", "--tier", "t3"], "invalid choice: 't3'"),
        (["--full", "--report-to", "mlflow"], "invalid choice: 'mlflow'"),
        (["--full", "--num-generations", "1"], "--num-generations: must be a whole number >= 2"),
        (["--full", "--vllm-gpu-memory-utilization", "1.5"], "must be a fraction below 1"),
        (["--full", "--smoke"], "not allowed with argument"),
        (["--full", "--num-generations", "3"], "--num-generations must divide the 32 rollouts"),
        (["--full", "--episodes", "7"], "--episodes must be at least 8"),
        (["--full", "--max-steps", "0"], "--max-steps: must be a whole number >= 1, or -1"),
        (["--full", "--iterations", "5"], "--iterations belongs to --smoke, not --full"),
        (["--smoke", "--env-url", "local"], "--env-url belongs to --full, not --smoke"),
        (["--rehearse", "--group", "4"], "--group belongs to --smoke, not --rehearse"),
    ],
)
def test_full_flags_are_checked(flags, complaint):
    result = run_script(*flags)
    assert result.returncode == 2 and complaint in result.stderr


def test_resume_without_a_checkpoint_is_refused(tmp_path):
    result = run_script("--full", "--resume", "--output-dir", str(tmp_path), "--env-url", "http://127.0.0.1:9")
    assert result.returncode != 0 and "no checkpoint" in result.stderr


def test_existing_checkpoint_needs_resume(tmp_path):
    (tmp_path / "checkpoint-20").mkdir()
    (tmp_path / "checkpoint-100").mkdir()
    assert env_rollout.last_checkpoint(str(tmp_path)).endswith("checkpoint-100")
    result = run_script("--full", "--output-dir", str(tmp_path), "--env-url", "http://127.0.0.1:9")
    assert result.returncode != 0 and "--resume" in result.stderr
