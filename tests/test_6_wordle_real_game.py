"""Section 6 against the real game: OpenEnv's TextArena Wordle, in-process and behind its own server.

Needs the package `textarena_env` and NLTK's word lists: `make test` installs the kit's wheel from
../shared/wordle-kit and conftest points NLTK_DATA at its data. Without them these tests skip; to run
them elsewhere: pip install openenv-core textarena <the wheel>, and set NLTK_DATA to a folder holding
`corpora/words` and `taggers/averaged_perceptron_tagger_eng`.
"""

import contextlib
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
import textarena_double
from conftest import real_game_missing, run_main_traced, run_script

import env_rollout
from env_rollout import WordleEnv, invalid_move_rate, solve_rate
from labkit import wordle_sessions
from labkit.wordle_sessions import WordleServerError, preflight

REAL_GAME = real_game_missing()
pytestmark = pytest.mark.skipif(REAL_GAME is not None, reason=REAL_GAME or "")

VALID_WORDS = ["crane", "slate", "audio", "pious", "brick", "stone", "light", "mound"]


@pytest.fixture(scope="module")
def games():
    """Eight in-process games (each costs TextArena about 1.8 s to build), re-used through reset()
    as TRL re-uses its pool."""
    return [WordleEnv("local") for _ in range(8)]


def secret_of(env: WordleEnv) -> str:
    """The secret word, read from the in-process game's state: tests may peek, the model cannot."""
    return env._session.client._ta_env.state.game_state["secret_word"]


def test_a_solve_pays_exactly_one_and_ends_the_game(games):
    env = games[0]
    env.reset(seed=11)
    feedback = env.guess(f"[{secret_of(env)}]")
    assert "You won" in feedback and env.solved
    assert env.get_reward() == 1.0 and solve_rate([env]) == [1.0] and invalid_move_rate([env]) == [0.0]
    with pytest.raises(ValueError, match="game is over"):
        env.guess("[crane]")


def test_a_valid_guess_reads_as_the_docstring_says(games):
    env = games[0]
    env.reset(seed=12)
    word = next(w for w in VALID_WORDS if w != secret_of(env))
    feedback = env.guess(f"[{word}]")
    assert f"You submitted [{word}]" in feedback and " ".join(word.upper()) in feedback
    assert "You have 5 guesses left." in feedback
    marks = feedback.split(" ".join(word.upper()))[1].split()[:5]
    assert set(marks) <= {"G", "Y", "X"}
    assert env.get_reward() == 0.0 and not env.solved  # nothing is paid before the game ends


def test_a_game_lost_on_two_invalid_moves_pays_nothing_and_counts_both(games):
    env = games[1]
    env.reset(seed=13)
    env.guess(f"[{next(w for w in VALID_WORDS if w != secret_of(env))}]")  # a valid guess: partial credit due
    assert "invalid move" in env.guess("[zzzzz]")
    feedback = env.guess("[qqqqq]")  # the second in a row ends the game; TextArena pays partial credit
    assert "second invalid guess" in feedback and "game is over" in feedback
    assert env.get_reward() == 0.0 and not env.solved
    assert (env.moves, env.invalid_moves) == (3, 2)
    assert solve_rate([env]) == [0.0] and invalid_move_rate([env]) == [pytest.approx(2 / 3)]
    with pytest.raises(ValueError, match="game is over"):
        env.guess("[crane]")


def test_an_invalid_move_then_a_valid_one_goes_on(games):
    env = games[1]
    env.reset(seed=14)
    assert "invalid move" in env.guess("[abc]")  # wrong length: no guess spent
    word = next(w for w in VALID_WORDS if w != secret_of(env))
    assert "You have 5 guesses left." in env.guess(f"[{word}]")
    assert (env.moves, env.invalid_moves) == (2, 1) and env.get_reward() == 0.0


def test_a_game_lost_at_the_guess_limit_is_not_a_solve(games):
    env = games[2]
    env.reset(seed=15)
    words = [w for w in VALID_WORDS if w != secret_of(env)][:6]
    for word in words[:-1]:
        env.guess(f"[{word}]")
    feedback = env.guess(f"[{words[-1]}]")
    assert "No guesses left" in feedback
    assert 0.0 <= env.get_reward() < 1.0 and not env.solved and solve_rate([env]) == [0.0]
    with pytest.raises(ValueError, match="game is over"):
        env.guess("[crane]")


def test_one_seed_one_secret_on_eight_instances_whatever_else_uses_random(games):
    secrets = []
    for env in games:
        random.random()  # the process's own use of Python's random in between
        env.reset(seed=2024)
        secrets.append(secret_of(env))
    assert len(set(secrets)) == 1
    state = random.getstate()
    games[0].reset(seed=2024)
    assert random.getstate() == state  # the seeded draw put the process's random state back
    different = set()
    for seed, env in enumerate(games):
        env.reset(seed=seed)
        different.add(secret_of(env))
    assert len(different) > 1


def test_reset_starts_clean_on_a_reused_instance(games):
    env = games[3]
    env.reset(seed=16)
    env.guess("[zzzzz]")
    env.reset(seed=16)
    assert (env.moves, env.invalid_moves, env.get_reward(), env.solved) == (0, 0, 0.0, False)
    assert "You have 5 guesses left." in env.guess(f"[{next(w for w in VALID_WORDS if w != secret_of(env))}]")


def test_local_preflight_builds_one_game_and_training_takes_it_over(monkeypatch):
    monkeypatch.setattr(wordle_sessions, "PARKED_CLIENTS", {})
    opened, _ = preflight("local", sessions=32)
    assert opened == 1  # in-process: one game proves the install, training copies it for the rest
    parked = wordle_sessions.PARKED_CLIENTS["local"][0]
    env = WordleEnv("local")
    env.reset(seed=3)
    assert env._session.client is parked and wordle_sessions.PARKED_CLIENTS["local"] == []


def test_local_game_without_word_lists_names_the_nltk_remedy(tmp_path):
    code = (
        "from labkit import wordle_sessions\n"
        "try:\n    wordle_sessions.preflight('local', sessions=32)\n"
        "except wordle_sessions.WordleServerError as error:\n    print('REFUSED', error)\n"
    )
    environment = {**os.environ, "NLTK_DATA": str(tmp_path), "TEXTARENA_DOWNLOAD_NLTK": "0"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=env_rollout_root(),
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "REFUSED" in result.stdout, result.stderr[-2000:]
    assert "NLTK_DATA" in result.stdout and "nltk.downloader words averaged_perceptron_tagger_eng" in result.stdout


def env_rollout_root() -> str:
    return os.path.dirname(os.path.abspath(env_rollout.__file__))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def small_server():
    """The real OpenEnv server on loopback, holding 2 sessions at once; stopped after the tests."""
    with real_server(max_concurrent_envs=2) as url:
        yield url


@contextlib.contextmanager
def real_server(max_concurrent_envs: int):
    """The real OpenEnv server on loopback, holding `max_concurrent_envs` sessions at once; stopped
    (terminated, killed if it lingers) when the block ends."""
    port = free_port()
    environment = {**os.environ, "MAX_CONCURRENT_ENVS": str(max_concurrent_envs), "ENABLE_WEB_INTERFACE": "false"}
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "textarena_env.server.app:app", "--host", "127.0.0.1", "--port", str(port)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the Wordle server did not start")
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_full_against_a_full_server_fails_fast_naming_max_concurrent_envs(small_server):
    result, report = run_main_traced("--full", "--vllm-mode", "none", "--env-url", small_server, timeout=240)
    assert result.returncode == 1
    assert "held 2 of the 32 sessions" in result.stderr and "MAX_CONCURRENT_ENVS" in result.stderr
    assert small_server in result.stderr and "Remedies" in result.stderr
    assert "cannot load the model" not in result.stderr
    assert not [name for name in report["imported"] if "qwen3" in name]  # no module of the model to load
    assert report["threads"] == []  # pending sessions are left to daemon threads: the process exits


def test_a_real_server_plays_through_parked_sessions(small_server, monkeypatch):
    """After the failed run above exited, its sessions are free again: the preflight opens both, and
    training's environments play on them over the network."""
    monkeypatch.setattr(wordle_sessions, "PARKED_CLIENTS", {})
    opened, _ = preflight(small_server, sessions=2)
    assert opened == 2
    envs = [WordleEnv(small_server), WordleEnv(small_server)]
    try:
        for env in envs:
            assert "Wordle" in env.reset(seed=1)
        assert wordle_sessions.PARKED_CLIENTS[small_server] == []  # both sessions taken over, none opened anew
        assert "invalid move" in envs[0].guess("[zzzzz]")
        assert "second invalid guess" in envs[0].guess("[qqqqq]") and envs[0].get_reward() == 0.0
        with pytest.raises(WordleServerError, match="MAX_CONCURRENT_ENVS"):
            preflight(small_server, sessions=1, stall_s=20)  # a third session does not fit
    finally:
        for env in envs:
            env._session.close()


# The preflight against real servers: it opens sessions as training does, a few at a time (each costs
# the server about a second of CPU; 32 asked for at once starve the server's event loop), holds all 32
# of a server that can, and tells a full server from a slow one.


@pytest.mark.slow
def test_preflight_holds_32_sessions_of_a_server_of_32_and_parks_them(monkeypatch):
    monkeypatch.setattr(wordle_sessions, "PARKED_CLIENTS", {})
    with real_server(max_concurrent_envs=32) as url:
        try:
            opened, seconds = preflight(url, 32)
            parked = wordle_sessions.PARKED_CLIENTS.get(url, [])
            assert (opened, len(parked), len({id(client) for client in parked})) == (32, 32, 32) and seconds > 0
            from textarena_env import TextArenaAction

            step = parked[-1].step(TextArenaAction(message="[zzzzz]"))  # a live, reset game of the server
            assert "invalid move" in wordle_sessions.observation_text(step.observation)
        finally:
            for client in wordle_sessions.PARKED_CLIENTS.pop(url, []):
                client.close()


@pytest.mark.slow
def test_preflight_refuses_a_server_of_8_naming_max_concurrent_envs(monkeypatch):
    monkeypatch.setattr(wordle_sessions, "PARKED_CLIENTS", {})
    with real_server(max_concurrent_envs=8) as url:
        with pytest.raises(WordleServerError) as error:
            preflight(url, 32)
    message = str(error.value)
    assert "held 8 of the 32 sessions" in message and url in message
    assert "capacity" in message and "MAX_CONCURRENT_ENVS" in message and "raise it to at least 32" in message
    assert "slow" not in message and message.count("Remedies") == 1
    untried = int(re.search(r"(\d+) not tried", message).group(1))
    assert untried >= 32 - 8 - wordle_sessions.PREFLIGHT_OPENERS  # refused: it stopped asking for more
    assert wordle_sessions.PARKED_CLIENTS == {}


@pytest.mark.parametrize("fault", ["never answers", "keepalive ping timeout"])
def test_preflight_calls_a_server_that_does_not_answer_slow_not_full(monkeypatch, fault):
    """The issue: a server that does not answer (no answer at all, or a client dropped on a keepalive
    ping timeout) is slow or overloaded; telling its user to raise MAX_CONCURRENT_ENVS would mislead."""
    monkeypatch.setattr(wordle_sessions, "PARKED_CLIENTS", {})
    monkeypatch.setattr(wordle_sessions, "SERVER_BACKOFF_S", 0.01)
    textarena_double.install(monkeypatch, textarena_double.Server(capacity=32))
    release = threading.Event()

    def unanswered_reset(self, **kwargs):
        if fault == "never answers":
            release.wait(30)
        raise ConnectionError("sent 1011 (internal error) keepalive ping timeout; no close frame received")

    monkeypatch.setattr(textarena_double.Session, "_reset", unanswered_reset)
    listener = socket.socket()  # the reachability probe's TCP connection succeeds: the server is up
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with pytest.raises(WordleServerError, match=r"held 0 of the 32 sessions") as error:
            preflight(url, 32, stall_s=0.5)
    finally:
        release.set()
        listener.close()
    message = str(error.value)
    assert "slow or overloaded, not full" in message and "--env-url local" in message
    assert "capacity" not in message and "MAX_CONCURRENT_ENVS" not in message
    expected = "no answer for 0.5 s" if fault == "never answers" else "keepalive ping timeout"
    assert expected in message.splitlines()[0]
    assert f"{32 - wordle_sessions.PREFLIGHT_OPENERS} not tried" in message  # a few asked for, not all 32
    assert wordle_sessions.PARKED_CLIENTS == {}


def test_a_full_server_tells_its_reason_when_asked_again(small_server):
    """A refusal for capacity may reach the client as a bare ConnectionClosedOK (the server sent its
    reason, then closed, before the client's reset went out); server_refusal reads the reason."""
    from textarena_env import TextArenaEnv

    clients = [TextArenaEnv(base_url=small_server).sync() for _ in range(2)]
    try:
        for client in clients:
            client.reset()
        assert "capacity: 2/2 sessions" in wordle_sessions.server_refusal(small_server)
    finally:
        for client in clients:
            client.close()


def test_preflight_asks_a_server_again_when_its_refusal_lost_its_reason(monkeypatch):
    monkeypatch.setattr(wordle_sessions, "PARKED_CLIENTS", {})
    monkeypatch.setattr(wordle_sessions, "SERVER_BACKOFF_S", 0.01)
    server = textarena_double.install(monkeypatch, textarena_double.Server(capacity=4))
    real_reset, asked = textarena_double.Session._reset, []

    def reset_losing_the_reason(self, **kwargs):
        try:
            return real_reset(self, **kwargs)
        except RuntimeError:
            raise ConnectionError("received 1000 (OK); then sent 1000 (OK)") from None

    def server_refusal(url):
        asked.append(server.open_sessions)
        return "Server at capacity: 4/4 sessions active. Cannot accept new connections."

    monkeypatch.setattr(textarena_double.Session, "_reset", reset_losing_the_reason)
    monkeypatch.setattr(wordle_sessions, "server_refusal", server_refusal)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with pytest.raises(WordleServerError, match=r"held 4 of the 32 sessions") as error:
            preflight(url, 32)
    finally:
        listener.close()
    message = str(error.value)
    assert "received 1000 (OK)" in message and "asked again, the server said: Server at capacity: 4/4" in message
    assert "The server is full" in message and "MAX_CONCURRENT_ENVS" in message and "slow" not in message
    assert asked == [4]  # asked once, while the four sessions it held were still open
    assert server.open_sessions == 0  # then they were closed


def test_full_offline_passes_the_local_preflight_then_stops_on_the_model_load():
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = run_script(
        "--full", "--vllm-mode", "none", "--output-dir", "unused-wordle-run", env=environment, timeout=300
    )
    assert result.returncode == 1
    assert "preflight: 1 Wordle sessions opened and reset at local in" in result.stdout
    assert "cannot load the model 'Qwen/Qwen3-1.7B'" in result.stderr and "--model" in result.stderr
    assert not os.path.exists(os.path.join(env_rollout_root(), "unused-wordle-run"))


def test_a_copied_local_game_plays_exactly_as_a_freshly_built_one():
    """new_local_game copies the first game instead of building each (1.5 s against 0.13 s): the
    copy must play the same secret words and give the same feedback and rewards as a built one."""
    from textarena_env import TextArenaAction
    from textarena_env.server.environment import TextArenaEnvironment

    built = TextArenaEnvironment("Wordle-v0", download_nltk=False)
    copied = wordle_sessions.new_local_game()
    assert copied is not wordle_sessions.new_local_game()  # each call, a game of its own
    for seed in (1, 2, 3):
        observations = [wordle_sessions.seeded_local_reset(game, seed) for game in (built, copied)]
        assert observations[0].messages[0].content == observations[1].messages[0].content
        for word in ("[crane]", "[zzzzz]", "[slate]", "[qqqqq]", "[zzzzz]"):
            steps = [game.step(TextArenaAction(message=word)) for game in (built, copied)]
            assert wordle_sessions.observation_text(steps[0]) == wordle_sessions.observation_text(steps[1])  # all text
            assert (steps[0].reward, steps[0].done) == (steps[1].reward, steps[1].done)
        assert built._ta_env.state.game_state["secret_word"] == copied._ta_env.state.game_state["secret_word"]


def test_evaluation_words_are_never_training_words(games):
    words = wordle_sessions.wordle_words()
    assert len(words) > 100
    for seed in (0, 5, 123_456, env_rollout.EVAL_FIRST_SEED + 7):  # the predicted word is the word played
        games[4].reset(seed=seed)
        assert secret_of(games[4]) == wordle_sessions.secret_word(seed, words)
    secret_word = wordle_sessions.secret_word
    training = {secret_word(s, words) for s in env_rollout.wordle_dataset(400, seed=0, words=words)["seed"]}
    evaluation = {secret_word(s, words) for s in env_rollout.wordle_eval_dataset(64, words=words)["seed"]}
    assert len(training) > 80 and len(evaluation) > 20
    assert not training & evaluation
    assert min(env_rollout.wordle_eval_dataset(64, words=words)["seed"]) >= env_rollout.EVAL_FIRST_SEED
