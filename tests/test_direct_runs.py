"""The modes that play Wordle, run straight from the checkout as a student runs them: no NLTK_DATA
exported, offline. The course kit's word lists are found beside the checkout (or where WORDLE_KIT
points); where none are found, one line says so and names the fix, with no traceback.

Offline throughout: each run forbids downloads (TEXTARENA_DOWNLOAD_NLTK=0) or replaces nltk.download."""

import importlib.util
import os
import subprocess
import sys

import pytest
from conftest import ROOT, WORDLE_KIT, run_script

from labkit import wordle_sessions as sessions

KIT_WORD_LISTS = os.path.join(WORDLE_KIT, "nltk_data")
needs_the_kit = pytest.mark.skipif(
    importlib.util.find_spec("textarena_env") is None or not os.path.isdir(KIT_WORD_LISTS),
    reason="needs the Wordle package and the course kit beside the checkout (`make test` installs both)",
)

# Builds the in-process game as every mode does (wordle_sessions.first_local_game), with downloads
# made impossible: a run that finds no word lists here fails rather than fetching them.
BUILD_THE_GAME = """
import nltk, sys
def no_network(name, *args, **kwargs):
    print(f"tried to download {name}", file=sys.stderr)
    return False
nltk.download = no_network
from labkit import wordle_sessions
print(len(wordle_sessions.wordle_words()), "secret words")
"""


def direct_run_environment(home, **settings: str) -> dict:
    """This process's environment as a shell that exported nothing for the lab would have it: no
    NLTK_DATA, no TEXTARENA_DOWNLOAD_NLTK, no WORDLE_KIT, and a HOME of its own (no ~/nltk_data)."""
    unset = ("NLTK_DATA", "TEXTARENA_DOWNLOAD_NLTK", "WORDLE_KIT")
    environment = {key: value for key, value in os.environ.items() if key not in unset}
    return {**environment, "HOME": str(home), **settings}


def build_the_game(environment: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BUILD_THE_GAME],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


@needs_the_kit
def test_the_kit_beside_the_checkout_is_found_with_nothing_exported(tmp_path):
    result = build_the_game(direct_run_environment(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "156 secret words"
    assert "tried to download" not in result.stderr and "[nltk_data]" not in result.stderr


@needs_the_kit
def test_wordle_kit_points_at_a_kit_elsewhere(tmp_path):
    elsewhere = tmp_path / "kit"
    elsewhere.mkdir()
    (elsewhere / "nltk_data").symlink_to(KIT_WORD_LISTS)
    found = build_the_game(direct_run_environment(tmp_path, WORDLE_KIT=str(elsewhere)))
    assert found.returncode == 0 and found.stdout.strip() == "156 secret words", found.stderr[-2000:]
    # And it is the one looked in: pointed at a folder with no word lists, the kit beside the checkout is not used.
    missing = build_the_game(direct_run_environment(tmp_path, WORDLE_KIT=str(tmp_path / "no-kit")))
    assert missing.returncode != 0 and "tried to download words" in missing.stderr
    assert f"{tmp_path / 'no-kit' / 'nltk_data'} (no such folder)" in missing.stderr


@needs_the_kit
@pytest.mark.parametrize(
    "mode, pointed",
    [
        (["--show-mask"], "WORDLE_KIT"),
        (["--show-mask"], "NLTK_DATA"),  # a folder the user chose wins over the kit beside the checkout
        (["--full", "--tiny"], "WORDLE_KIT"),
    ],
    ids=["show-mask, WORDLE_KIT", "show-mask, NLTK_DATA", "full-tiny, WORDLE_KIT"],
)
def test_a_mode_without_word_lists_says_so_in_one_line(tmp_path, mode, pointed):
    nowhere = tmp_path / "nowhere"
    environment = direct_run_environment(tmp_path, TEXTARENA_DOWNLOAD_NLTK="0", **{pointed: str(nowhere)})
    output_dir = ["--output-dir", str(tmp_path / "run")] if mode[0] == "--full" else []
    result = run_script(*mode, *output_dir, timeout=300, env=environment)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr[-3000:]
    line = lines[0]
    assert "Traceback" not in line and line.startswith(f"{mode[0].lstrip('-')} FAILED: the in-process Wordle game")
    assert "NLTK's words and averaged_perceptron_tagger_eng not found" in line and "TEXTARENA_DOWNLOAD_NLTK=0" in line
    looked_in = f"NLTK_DATA={nowhere}" if pointed == "NLTK_DATA" else f"{nowhere / 'nltk_data'} (no such folder)"
    assert looked_in in line
    assert "WORDLE_KIT=" in line and "python -m nltk.downloader words averaged_perceptron_tagger_eng" in line
    assert not (tmp_path / "run").exists()  # it stopped before making anything


def test_offline_the_download_is_tried_quietly_and_its_error_named_in_the_line(monkeypatch, tmp_path, capsys):
    nltk = pytest.importorskip("nltk")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])  # NLTK's own folders, empty here
    monkeypatch.delenv("NLTK_DATA", raising=False)
    monkeypatch.setenv("WORDLE_KIT", str(tmp_path / "no-kit"))
    monkeypatch.setenv("TEXTARENA_DOWNLOAD_NLTK", "1")
    tried = []

    def offline(name, quiet=False, print_error_to=sys.stderr, **kwargs):  # what NLTK prints with no network
        tried.append(name)
        print(f"[nltk_data] Error loading {name}: <urlopen error [Errno -3]", file=print_error_to)
        print("[nltk_data]     Temporary failure in name resolution>", file=print_error_to)
        return False

    monkeypatch.setattr(nltk, "download", offline)

    class GameReadingTheWordLists:
        def __init__(self, *args, **kwargs):
            nltk.data.find("corpora/words")  # raises NLTK's page-long LookupError

    with pytest.raises(sessions.WordleServerError) as refusal:
        sessions.build_local_game(GameReadingTheWordLists)
    message = str(refusal.value)
    assert tried == ["words", "averaged_perceptron_tagger_eng"]
    assert "\n" not in message and "*****" not in message
    assert (
        "a download failed (Error loading words: <urlopen error [Errno -3] Temporary failure in name resolution>)"
        in message
    )
    assert capsys.readouterr().err == ""  # NLTK's own error lines are kept for the message, not printed


def test_the_kit_is_looked_for_only_where_the_user_chose_no_folder(monkeypatch, tmp_path):
    nltk = pytest.importorskip("nltk")
    kit = tmp_path / "kit"
    (kit / "nltk_data").mkdir(parents=True)
    monkeypatch.setattr(nltk.data, "path", ["/usr/share/nltk_data"])
    monkeypatch.setenv("WORDLE_KIT", str(kit))
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "chosen"))
    assert sessions.look_in_the_kit() is None and nltk.data.path == ["/usr/share/nltk_data"]
    monkeypatch.delenv("NLTK_DATA")
    assert sessions.look_in_the_kit() == str(kit / "nltk_data")
    assert nltk.data.path == ["/usr/share/nltk_data", str(kit / "nltk_data")]  # after NLTK's own folders
    sessions.look_in_the_kit()
    assert nltk.data.path.count(str(kit / "nltk_data")) == 1


@needs_the_kit
def test_a_game_that_fails_for_another_reason_is_one_line_that_quotes_nltk(monkeypatch):
    monkeypatch.delenv("NLTK_DATA", raising=False)  # the word lists are found in the kit beside the checkout

    class GameMissingAnotherResource:
        def __init__(self, *args, **kwargs):
            import nltk

            nltk.data.find("tokenizers/no_such_resource")  # NLTK's page-long LookupError, of another resource

    with pytest.raises(sessions.WordleServerError) as refusal:
        sessions.build_local_game(GameMissingAnotherResource)
    message = str(refusal.value)
    assert "\n" not in message and "*****" not in message
    assert message.startswith("the in-process Wordle game failed (LookupError: Resource 'no_such_resource' not found.)")
