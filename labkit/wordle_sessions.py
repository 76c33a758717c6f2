"""The Wordle game's sessions, beneath WordleEnv: the in-process game and its seeding, OpenEnv server
clients and their retries, the preflight that opens training's sessions before any model is loaded,
the sessions it parks for training to take over, and the remedies a refusal names.

WordleEnv (env_rollout.py, section 6) keeps the environment's contract and its reward rules; a
`GameSession` here is the connection it plays through. Nothing here imports the lesson."""

import atexit
import contextlib
import copy
import inspect
import json
import os
import queue
import random
import socket
import sys
import threading
import time
import unittest.mock
import urllib.parse

LOCAL = "local"  # the env URL that plays TextArena's Wordle in this process: no server, no session limit
SERVER_ATTEMPTS = 3  # tries to open a session; a refused or dropped connection is retried with backoff
SERVER_BACKOFF_S = 0.5  # first wait between tries, doubled each time
PREFLIGHT_STALL_S = 30.0  # the preflight gives up when no session has answered for this long
# Sessions the preflight opens at a time. Training resets its environments one rollout after another;
# a server spends about a second of CPU on each new session, and 32 asked for at once starve its event
# loop (reported: 31 of 32 clients dropped on keepalive ping timeouts; reproduced: none answered in
# 30 s). Two at a time hide a network's latency and cost a loopback server little. Measured, real server on loopback, 2-core machine: 32
# sessions in 41 s one at a time, 45 s two at a time, 48 s four at a time; with other jobs loading the
# machine (load average 7), 69 s one at a time, 52 and 58 s two at a time.
PREFLIGHT_OPENERS = 2
# Errors that mean "this code and this client do not fit", not "the network or server is busy":
# they are raised at once, never retried, and never blamed on the server.
NOT_TRANSIENT = (TypeError, AttributeError, NameError, ImportError, NotImplementedError)
SERVER_REMEDIES = (
    "Remedies: training holds one session per rollout in flight (32 per training process).\n"
    "  - play the game in this process, with no server at all: --env-url local (the default);\n"
    "  - a server you run (the Space's Docker image, or uvicorn textarena_env.server.app:app) holds\n"
    "    MAX_CONCURRENT_ENVS sessions, 8 unless set: start it with MAX_CONCURRENT_ENVS=32 (or more);\n"
    "  - the hosted Space holds one session: duplicate it (openenv/wordle) and raise MAX_CONCURRENT_ENVS\n"
    "    in its settings;\n"
    "  - sessions of a run that crashed are held until its process is gone: stop it (or restart the server)."
)
# The word lists TextArena's Wordle reads, as NLTK finds them: the secret and dictionary words, and the
# tagger it filters them with.
NLTK_RESOURCES = {"words": "corpora/words", "averaged_perceptron_tagger_eng": "taggers/averaged_perceptron_tagger_eng"}
# The course kit (its README says what it holds), where the Makefile looks for it: beside the checkout.
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_WORDLE_KIT = os.path.join(os.path.dirname(REPOSITORY), "shared", "wordle-kit")
NLTK_REMEDY = (
    "Fix: put the course kit beside the checkout (../shared/wordle-kit), or set WORDLE_KIT=<the kit's folder> "
    "or NLTK_DATA=<a folder holding NLTK's words and averaged_perceptron_tagger_eng>; with internet: "
    "python -m nltk.downloader words averaged_perceptron_tagger_eng (then, offline, copy that nltk_data folder "
    "over and set NLTK_DATA to it)"
)


class WordleServerError(RuntimeError):
    """The Wordle game could not be started: a server unreachable or full, or the local game broken."""


class MissingClientError(ImportError):
    """The OpenEnv TextArena package (module textarena_env) is not installed."""


class SessionLost(RuntimeError):
    """A step did not come back from the server: the game it was playing is gone."""


def import_textarena_env():
    try:
        import textarena_env
    except ImportError as error:
        raise MissingClientError(
            "the Wordle environment needs the OpenEnv TextArena package (module textarena_env); "
            "docs/full.md, 'Installing the Wordle game', says how to install it"
        ) from error
    return textarena_env


def observation_text(observation) -> str:
    """All text the game has shown so far. Some servers leave `messages` empty at reset and put the
    opening text in `prompt`; otherwise the messages hold it, cumulatively."""
    messages = getattr(observation, "messages", None) or []
    if messages:
        return "\n".join(message.content for message in messages)
    return getattr(observation, "prompt", "") or ""


class GameSession:
    """One Wordle game to play through: in this process (`env_url` "local") or a session of an
    OpenEnv server. Opened on the first reset(), re-used by the next ones (TRL re-uses its
    environments), closed and opened anew after a reset that failed."""

    def __init__(self, env_url: str):
        self.env_url = env_url
        self.client = None

    def reset(self, seed: int | None = None) -> str:
        """Start a game (the seed picks the word in-process; a server is sent it); its text so far."""
        result = self._reset_with_retries(seed)
        return observation_text(getattr(result, "observation", result))

    def step(self, word: str) -> tuple[str, float, bool]:
        """Play `word`: (all text so far, the game's reward, whether the game is over). Not retried:
        a step that reached the server before the connection dropped would be played twice, and a
        new session would lose the game. SessionLost says the game is gone."""
        action = import_textarena_env().TextArenaAction(message=word)
        try:
            result = self.client.step(action)
        except NOT_TRANSIENT:
            raise
        except Exception as error:
            self.close()  # the next reset() opens a fresh session
            print(f"WordleEnv: a guess failed at {self.env_url} ({type(error).__name__}: {error})", file=sys.stderr)
            raise SessionLost(str(error)) from None
        observation = getattr(result, "observation", result)
        reward = float(getattr(result, "reward", None) or 0.0)
        return observation_text(observation), reward, bool(getattr(result, "done", False))

    def close(self) -> None:
        client, self.client = self.client, None
        close = getattr(client, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass  # the session is gone either way

    def _open_client(self):
        parked = PARKED_CLIENTS.get(self.env_url)
        if parked:
            return parked.pop()  # opened (and reset) by the preflight
        textarena_env = import_textarena_env()
        if self.env_url == LOCAL:
            return new_local_game()  # returns observations, not step results
        client = textarena_env.TextArenaEnv(base_url=self.env_url)
        # Current OpenEnv clients are async-first; .sync() gives the blocking client TRL's loop needs.
        return client.sync() if hasattr(client, "sync") else client

    def _reset_with_retries(self, seed: int | None):
        error = None
        for attempt in range(SERVER_ATTEMPTS):
            if attempt:
                time.sleep(SERVER_BACKOFF_S * 2 ** (attempt - 1))
            try:
                if self.client is None:
                    self.client = self._open_client()
                if self.env_url == LOCAL:
                    result = seeded_local_reset(self.client, seed)
                else:
                    result = self.client.reset(**({} if seed is None else {"seed": seed}))
            except NOT_TRANSIENT:
                raise
            except Exception as exc:  # a dropped connection and a server at capacity look alike here
                error = exc
                self.close()  # one client per session: the failed one is closed, not leaked
                if self.env_url == LOCAL:
                    break  # a broken install does not mend itself
                continue
            if inspect.isawaitable(result):
                result.close()
                raise TypeError("this textarena_env client is async-only and has no .sync(): upgrade openenv-core")
            return result
        if self.env_url == LOCAL:
            if isinstance(error, WordleServerError):
                raise error  # first_local_game said why, in one line
            raise WordleServerError(local_game_failure(error)) from error
        raise WordleServerError(
            f"Wordle server {self.env_url}: reset failed {SERVER_ATTEMPTS} times ({type(error).__name__}: {error})\n"
            + SERVER_REMEDIES
        ) from error


# The in-process game: seeds, copies.

SEEDING_LOCK = threading.Lock()


def seeded_local_reset(game, seed: int | None):
    """Reset an in-process TextArena game so that `seed` picks the secret word.

    TextArena draws the secret from Python's global `random`, and OpenEnv's reset() accepts a seed
    and drops it. So the draw is seeded here, and the process's own random state is put back after:
    same seed, same word, whatever else the process does with `random`."""
    if seed is None:
        return game.reset()
    with SEEDING_LOCK:
        saved = random.getstate()
        random.seed(seed)
        try:
            return game.reset()
        finally:
            random.setstate(saved)


FIRST_LOCAL_GAME = {}  # the first in-process game built, by game class: the one the others copy
LOCAL_GAME_LOCK = threading.Lock()


def first_local_game():
    """The in-process Wordle game built once per process (TextArena's class, or a test's double).
    Every mode that plays in-process comes through here: its word lists are found here, and a game
    that cannot be built is one line (WordleServerError), never NLTK's page-long traceback."""
    from textarena_env.server.environment import TextArenaEnvironment

    with LOCAL_GAME_LOCK:
        if TextArenaEnvironment not in FIRST_LOCAL_GAME:
            FIRST_LOCAL_GAME[TextArenaEnvironment] = build_local_game(TextArenaEnvironment)
        return FIRST_LOCAL_GAME[TextArenaEnvironment]


def build_local_game(game_class):
    """The game, its word lists found first: in NLTK_DATA where the user set it, else in the course
    kit (WORDLE_KIT, or beside the checkout), else in NLTK's own folders; downloaded only where none
    holds them and TEXTARENA_DOWNLOAD_NLTK allows it (quietly: offline, NLTK's errors are kept for
    the one line that says what failed)."""
    look_in_the_kit()
    download_error = None
    if word_lists_missing() and downloads_allowed():
        download_error = download_word_lists()
    try:
        # TextArena's EnglishDictionary calls nltk.download("words") whatever download_nltk says
        # (textarena/envs/utils/word_lists.py); the lists are here or will not come, so no call is made.
        with no_nltk_downloads():
            return game_class("Wordle-v0", download_nltk=False)
    except NOT_TRANSIENT:
        raise
    except Exception as error:
        raise WordleServerError(local_game_failure(error, download_error)) from error


def wordle_kit() -> str:
    """The course kit's folder: WORDLE_KIT where set (as the Makefile reads it), else beside the checkout."""
    return os.path.abspath(os.environ.get("WORDLE_KIT") or DEFAULT_WORDLE_KIT)


def look_in_the_kit() -> str | None:
    """Let NLTK find the kit's word lists, unless the user chose a folder (NLTK_DATA wins). Returns
    the folder added to NLTK's search, or None. The Makefile exports the same; a direct run needs none."""
    folder = os.path.join(wordle_kit(), "nltk_data")
    if os.environ.get("NLTK_DATA") or not os.path.isdir(folder):
        return None
    try:
        import nltk
    except ImportError:
        return None  # TextArena's own import says so
    if folder not in nltk.data.path:
        nltk.data.path.append(folder)  # after NLTK's own folders: a user's ~/nltk_data comes first
    return folder


def word_lists_missing() -> list[str]:
    """The NLTK resources TextArena's Wordle reads that NLTK cannot find here."""
    try:
        import nltk
    except ImportError:
        return []  # no NLTK at all: TextArena's own import says so
    missing = []
    for name, path in NLTK_RESOURCES.items():
        try:
            nltk.data.find(path)
        except LookupError:
            missing.append(name)
    return missing


def downloads_allowed() -> bool:
    """TEXTARENA_DOWNLOAD_NLTK=0 (the Makefile's, the tests') forbids fetching the word lists."""
    return os.environ.get("TEXTARENA_DOWNLOAD_NLTK", "1").lower() in ("1", "true")


def download_word_lists() -> str | None:
    """Fetch the missing word lists into NLTK's default folder; None where that worked, else NLTK's
    first error, on one line."""
    import io

    import nltk

    errors = io.StringIO()
    for name in word_lists_missing():
        nltk.download(name, quiet=True, print_error_to=errors)
    if not word_lists_missing():
        return None
    first = errors.getvalue().split("[nltk_data] Error", 2)[1:2] or ["the download failed"]
    return " ".join(("Error" + first[0]).replace("[nltk_data]", " ").split())[:300]


def no_nltk_downloads():
    try:
        import nltk  # noqa: F401
    except ImportError:
        return contextlib.nullcontext()  # a test's double needs no NLTK
    return unittest.mock.patch("nltk.download", return_value=True)


def local_game_failure(error: BaseException, download_error: str | None = None) -> str:
    """Why the in-process game could not be built, on one line, with the fix."""
    missing = word_lists_missing()
    if not missing:  # NLTK's own errors open with a row of asterisks: the first line that says something
        said = next((line.strip() for line in str(error).splitlines() if any(c.isalpha() for c in line)), "")
        return f"the in-process Wordle game failed ({type(error).__name__}: {said}). {NLTK_REMEDY}"
    kit = os.path.join(wordle_kit(), "nltk_data")
    if os.environ.get("NLTK_DATA"):
        looked = f"NLTK_DATA={os.environ['NLTK_DATA']}"
    else:
        looked = f"the course kit's {kit}" + ("" if os.path.isdir(kit) else " (no such folder)")
    if download_error:
        fetched = f"a download failed ({download_error})"
    else:
        fetched = "TEXTARENA_DOWNLOAD_NLTK=0 (no download)" if not downloads_allowed() else "no download was tried"
    return (
        f"the in-process Wordle game failed: NLTK's {' and '.join(missing)} not found in {looked} "
        f"nor in NLTK's own folders, and {fetched}. {NLTK_REMEDY}"
    )


def new_local_game():
    """A new in-process Wordle game. Building one costs TextArena about 1.5 s (it tags every word of
    its word list); a copy of one already built takes about 0.13 s and plays exactly the same, so
    every game is a copy of the first: 32 games in about 6 s instead of 48."""
    return copy.deepcopy(first_local_game())


def textarena_wordle():
    """TextArena's own Wordle game inside the local one, to read (no copy needed)."""
    game = first_local_game()._ta_env
    while hasattr(game, "env"):  # TextArena wraps its game in observation wrappers
        game = game.env
    return game


def wordle_words() -> list[str]:
    """The secret words TextArena's Wordle draws from (156 with NLTK's lists), from the local game."""
    return list(textarena_wordle().word_list)


def wordle_guess_words() -> list[str]:
    """Every word the game accepts as a guess: the 5-letter lowercase words of its dictionary."""
    words = textarena_wordle().dictionary.get_all_words()
    return sorted(word for word in words if len(word) == 5 and word.isascii() and word.isalpha() and word.islower())


def secret_word(seed: int, words: list[str]) -> str:
    """The word an in-process game plays after reset(seed=seed): the draw seeded_local_reset makes."""
    return random.Random(seed).choice(words)


# Sessions the preflight opened, kept for training to take over, so that no session is paid for twice
# (each new one costs a server about 1.1 s of CPU). Keyed by env URL.
PARKED_CLIENTS: dict[str, list] = {}


@atexit.register
def close_parked_clients() -> None:
    """Sessions the preflight opened that training never took over (a failed model load, say)."""
    for clients in PARKED_CLIENTS.values():
        while clients:
            close = getattr(clients.pop(), "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass


def check_server_reachable(env_url: str, timeout_s: float = 5.0) -> None:
    """A plain TCP connection to the server's port: fails in seconds, before anything is installed
    or loaded, with the URL and the remedies in the message."""
    if env_url == LOCAL:
        return
    if refusal := env_url_refusal(env_url):
        raise WordleServerError(refusal)
    parsed = urllib.parse.urlparse(env_url)
    port = parsed.port or (443 if parsed.scheme in ("https", "wss") else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=timeout_s).close()
    except OSError as error:
        raise WordleServerError(f"cannot reach the Wordle server at {env_url}: {error}\n{SERVER_REMEDIES}") from None


def env_url_refusal(env_url: str) -> str | None:
    """Why `env_url` names no server (not 'local', an http(s) URL with a port from 1 to 65535), in one
    line; None where it may name one. Read from the text alone: the dry run refuses what the run would."""
    if env_url == LOCAL:
        return None
    parsed = urllib.parse.urlparse(env_url)
    if parsed.scheme not in ("http", "https", "ws", "wss") or not parsed.hostname:
        return f"--env-url must be an http(s) URL or 'local', got {env_url!r}"
    try:
        port = parsed.port  # urllib reads the port only when asked, and raises for one it cannot take
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        given = parsed.netloc.rpartition(":")[2]
        placeholder = " (docs/full.md's PORT stands for the server's port)" if given == "PORT" else ""
        return f"--env-url {env_url}: the port must be a whole number from 1 to 65535, got {given!r}{placeholder}"
    return None


def openenv_refusal(env_url: str, timeout_s: float = 3.0) -> str | None:
    """Why the server at `env_url` is no OpenEnv server, where it says so itself: it answers OpenEnv's
    GET /health with anything but OpenEnv's {"status": "healthy"} (a web page, a 404, not HTTP at all).
    None where it is one, or cannot tell (no answer in time)."""
    import http.client
    import urllib.error
    import urllib.request

    parsed = urllib.parse.urlparse(env_url)
    scheme = {"ws": "http", "wss": "https"}.get(parsed.scheme, parsed.scheme)
    url = parsed._replace(scheme=scheme).geturl().rstrip("/") + "/health"
    # Through the environment's proxy, as OpenEnv's client connects, except to this machine (it bypasses it).
    local = parsed.hostname in ("localhost", "127.0.0.1", "::1")
    opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if local else []))
    try:
        with opener.open(url, timeout=timeout_s) as response:
            answer = json.loads(response.read(4096))
    except urllib.error.HTTPError as error:
        said = f"HTTP {error.code} {error.reason}"
    except http.client.RemoteDisconnected:  # closed without a word: a server in trouble, cannot tell
        return None
    except (ValueError, http.client.BadStatusLine) as error:  # not JSON, or not HTTP at all
        said = f"not OpenEnv's answer ({type(error).__name__})"
    except (OSError, http.client.HTTPException):  # no answer in time, or the connection refused: cannot tell
        return None
    else:
        if isinstance(answer, dict) and "status" in answer:
            return None
        said = "JSON, but not OpenEnv's health status"
    return (
        f"--env-url {env_url} answers, but is no OpenEnv server: GET {url} gave {said}. --env-url takes an "
        "OpenEnv Wordle server's URL (uvicorn textarena_env.server.app:app, or the Space's), or local (the default)"
    )


def check_openenv_server(env_url: str) -> None:
    """check_server_reachable, then that what answers is an OpenEnv server: what the CPU scales ask
    before minutes of pre-training, leaving the sessions to run_full's preflight."""
    check_server_reachable(env_url)
    if env_url != LOCAL and (refusal := openenv_refusal(env_url)):
        raise WordleServerError(refusal)


def preflight_failure_kind(error: BaseException) -> str:
    """Why a session did not open: "capacity" (the server refused it for lack of room: its error says
    so), "slow" (a timeout: the server did not answer in time, e.g. a keepalive ping timeout), or
    "other" (a dropped connection, say, whose reason is lost)."""
    cause = error.__cause__ or error  # GameSession's WordleServerError wraps the client's own error
    text = f"{type(cause).__name__}: {cause}".lower()
    if "capacity" in text:
        return "capacity"
    if isinstance(cause, TimeoutError) or "timeout" in text or "timed out" in text:
        return "slow"
    return "other"


def preflight(env_url: str, sessions: int, stall_s: float | None = None) -> tuple[int, float]:
    """Before any model is loaded, open and reset the sessions training will hold at once, opened as
    training opens them: a few at a time (PREFLIGHT_OPENERS), not all together; keep them for training.
    In-process, one game shows that TextArena and its word lists work (training copies it for the
    rest). Returns (sessions opened, seconds); raises WordleServerError, saying how many sessions the
    server held, if any session fails, and telling a full server (it refused a session for capacity:
    MAX_CONCURRENT_ENVS is too low) from a slow one (it stopped answering).

    It waits as long as sessions keep opening (a server spends about a second of CPU on each) and
    gives up after `stall_s` seconds without progress. After a failure it opens no more. It never
    closes a client whose reset is still pending (that would block its thread for good); those threads
    are daemons, so the process exits, and one whose reset comes back late closes its own session."""
    stall_s = PREFLIGHT_STALL_S if stall_s is None else stall_s
    check_server_reachable(env_url)
    import_textarena_env()  # a clear install message before any thread starts
    started = time.perf_counter()
    opened = [GameSession(env_url) for _ in range(1 if env_url == LOCAL else sessions)]
    answered = [False] * len(opened)
    answers = queue.Queue()  # one answer per session taken: None (opened) or its error
    lock = threading.Lock()
    state = {"taken": 0, "stop": False, "gave_up": False}  # under `lock`

    def open_sessions():
        """An opener: opens the next session not yet taken, until none is left or the preflight stops."""
        while True:
            with lock:
                if state["stop"] or state["taken"] == len(opened):
                    return
                index = state["taken"]
                state["taken"] += 1
            session = opened[index]
            try:
                session.reset()
            except BaseException as error:  # noqa: BLE001  (reported below, with the others)
                with lock:
                    state["stop"] = True  # the preflight has failed: do not ask the server for more
                answers.put(error)  # GameSession closed its failed client
                return
            with lock:
                late = state["gave_up"]
                answered[index] = not late
            if late:
                session.close()  # the preflight gave up on it and left it to this thread
                return
            answers.put(None)

    for _ in range(min(PREFLIGHT_OPENERS, len(opened))):
        threading.Thread(target=open_sessions, daemon=True).start()
    failures, done = [], 0
    while True:
        with lock:
            if done == state["taken"] and (state["stop"] or done == len(opened)):
                break  # every session taken has answered, and no more will be taken
        try:
            answer = answers.get(timeout=stall_s)
        except queue.Empty:
            break  # no session answered for stall_s: the ones in flight are counted as unanswered
        done += 1
        if answer is not None:
            failures.append(answer)
    with lock:
        state["stop"] = state["gave_up"] = True  # from here on, a late answer closes its own session
        taken = state["taken"]
        held = sum(answered)
    while True:  # failures that arrived after the wait gave up: their clients are closed already
        try:
            answer = answers.get_nowait()
        except queue.Empty:
            break
        if answer is not None:
            failures.append(answer)
    if held < len(opened):
        pending, untried = taken - held - len(failures), len(opened) - taken
        reason, not_openenv, kinds = None, None, {preflight_failure_kind(f) for f in failures}
        if env_url != LOCAL and "other" in kinds and "capacity" not in kinds:
            if not any(isinstance(f, NOT_TRANSIENT) for f in failures):
                reason = server_refusal(env_url)  # asked while the answered sessions are still held
                # A failure whose reason is lost, from a server that is no OpenEnv server: not a capacity matter.
                not_openenv = openenv_refusal(env_url) if reason is None else None
        for index, session in enumerate(opened):
            if answered[index]:  # answered: safe to close; a pending one is left to its daemon thread
                session.close()
        if not_openenv:
            raise WordleServerError(not_openenv)
        for failure in failures:
            if isinstance(failure, NOT_TRANSIENT) or env_url == LOCAL:
                raise failure  # the code or the install, not the server's capacity
        if env_url == LOCAL:
            raise WordleServerError(f"the in-process Wordle game did not start within {stall_s:.0f} s")
        raise WordleServerError(preflight_refusal(env_url, sessions, stall_s, held, failures, pending, untried, reason))
    PARKED_CLIENTS.setdefault(env_url, []).extend(session.client for session in opened)
    for session in opened:
        session.client = None  # the client now belongs to the parking lot, not to this session
    return len(opened), time.perf_counter() - started


def server_refusal(env_url: str, timeout_s: float = 3.0) -> str | None:
    """What the server says to a new connection before it is asked anything: its refusal ("Server at
    capacity: 8/8 sessions active ..."), or None where it says nothing (it has room) or cannot be asked.

    A server that refuses a session sends its reason, then closes the connection; a client that sends
    its reset after the close arrived gets a bare "ConnectionClosedOK" instead (measured on the real
    server: 12 refusals out of 20). This reads the reason without sending anything. Where the server
    has room, it opens a session for this connection, which is closed at once."""
    from websockets.sync.client import connect  # the transport of OpenEnv's client

    ws_url = "ws" + env_url.rstrip("/")[4:] if env_url.startswith("http") else env_url.rstrip("/")
    try:
        with connect(ws_url + "/ws", open_timeout=timeout_s, proxy=None) as connection:
            reply = json.loads(connection.recv(timeout=timeout_s))
    except Exception:  # no reason sent in time (room for a session), or none readable
        return None
    if isinstance(reply, dict) and reply.get("type") == "error":
        return str((reply.get("data") or {}).get("message") or "") or None
    return None


def preflight_refusal(env_url, sessions, stall_s, held, failures, pending, untried, reason=None) -> str:
    """The preflight's refusal: how many sessions the server held, then why: full, slow, or a failure
    whose reason is lost. Only a refusal for capacity (or one that may be it) names MAX_CONCURRENT_ENVS.
    `reason`: what the server said when asked again (server_refusal), where a failure lost its reason."""
    kinds = [preflight_failure_kind(f) for f in failures]
    # A refusal for capacity names itself; depending on timing it may also arrive as a bare
    # "ConnectionClosedOK" that has lost the reason. Quote the telling one, on one line.
    kind = next((k for k in ("capacity", "other", "slow") if k in kinds), "slow")
    telling = [f for f, k in zip(failures, kinds, strict=True) if k == kind]
    first = str(telling[0]).splitlines()[0] if telling else f"no answer for {stall_s:g} s"
    if kind == "other" and reason:
        first += f"; asked again, the server said: {reason.splitlines()[0]}"
        kind = "capacity" if "capacity" in reason.lower() else kind
    head = (
        f"preflight: the Wordle server at {env_url} held {held} of the {sessions} sessions training needs "
        f"at once ({len(failures)} failed, {pending} unanswered, {untried} not tried). First error: {first}\n"
    )
    if kind == "capacity":
        return head + (
            f"The server is full: it refused a session for capacity after holding {held}. A server you run "
            f"holds MAX_CONCURRENT_ENVS sessions (8 unless set): raise it to at least {sessions} per training "
            "process.\n" + SERVER_REMEDIES
        )
    if kind == "other":
        return head + (
            "If the server was full (a refusal may lose its reason on the way), raise MAX_CONCURRENT_ENVS "
            f"(8 unless set) to at least {sessions} per training process; if it crashed, restart it.\n"
            + SERVER_REMEDIES
        )
    return head + (
        f"The server is slow or overloaded, not full: it stopped answering (no session answered for "
        f"{stall_s:g} s, or one timed out) and refused none for lack of room. Each new session costs it "
        f"about a second of CPU; the preflight opened {PREFLIGHT_OPENERS} at a time (training opens them one "
        "rollout after another).\n"
        "Remedies: give the server more CPU, or fewer clients at once (another run's preflight or training "
        "on the same server), then try again; or play the game in this process, with no server at all: "
        "--env-url local (the default)."
    )
