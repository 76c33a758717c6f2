# One command each; every target installs what it needs into ./.venv on first use.
#   make smoke   run the tabular lab (--smoke)
#   make test    run the test suite
#   make rehearse  run the --full code path offline on a CPU (tiny model, GuessEnv)
#   make rehearse-full  --full itself on a CPU against the real Wordle, with a tiny model (--full --tiny)
#   make learn   a tiny transformer learns GuessEnv through TRL on a CPU (--learn, minutes)
#   make bench   print the learning and speed figures
#   make bench-learn  --learn on seeds 0, 1 and 2, with the bars (about a quarter of an hour)
#   make bench-gpu  peak GPU memory of tier t1 (on a CUDA machine)
#   make lint    ruff
#   make clean   remove the virtual environment and generated files
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: smoke test rehearse rehearse-full learn bench bench-learn bench-gpu lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.smoke: requirements-smoke.txt | $(PY)
	$(PIP) -r requirements-smoke.txt
	touch $@

# The real Wordle for the tests, where the course's kit lies beside the checkout (its README): the
# OpenEnv TextArena wheel and its dependencies. Without the kit, the real-game tests skip.
WORDLE_KIT ?= ../shared/wordle-kit
ifneq ($(wildcard $(WORDLE_KIT)/nltk_data),)
export NLTK_DATA ?= $(abspath $(WORDLE_KIT)/nltk_data)
export TEXTARENA_DOWNLOAD_NLTK ?= 0
endif

$(VENV)/.test: requirements-smoke.txt tests/requirements.txt | $(PY)
	$(PIP) -r tests/requirements.txt
	if [ -d "$(WORDLE_KIT)" ]; then $(PIP) "openenv-core>=0.3,<0.4" "textarena>=0.7.4,<0.8" $(WORDLE_KIT)/openenv_textarena-*.whl; fi
	touch $@

$(VENV)/.lint: | $(PY)
	$(PIP) "ruff>=0.6"
	touch $@

smoke: $(VENV)/.smoke
	$(PY) env_rollout.py --smoke

test: $(VENV)/.test
	$(PY) -m pytest -q tests

rehearse: $(VENV)/.test
	$(PY) env_rollout.py --rehearse

rehearse-full: $(VENV)/.test
	$(PY) env_rollout.py --full --tiny

learn: $(VENV)/.test
	$(PY) env_rollout.py --learn

bench: $(VENV)/.smoke
	$(PY) bench/smoke_bench.py

bench-learn: $(VENV)/.test
	$(PY) bench/learn_bench.py

bench-gpu: $(VENV)/.test
	$(PY) bench/gpu_memory.py

lint: $(VENV)/.lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache __pycache__ */__pycache__ *.png rehearsal-*/ wordle-grpo-tiny/
