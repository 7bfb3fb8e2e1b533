# make demo: set up and run the embedded demo.  make test: set up, lint and run the tests.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: setup setup-runner demo test test-fast lint bench bench-webhook bench-gate bench-memory bench-slurm bench-tuner \
	bench-false-promotion bench-tuner-sim clean

# The training frameworks' own parsers, which the gate resolves recipes with (both setups)
define install_gate_frameworks
	# Megatron-LM's own argument validation for the gate: megatron-core 0.19 declares
	# Python >= 3.12, but its cp311 wheel runs on 3.11 (typing.override comes from
	# typing_extensions); it imports triton unconditionally
	$(BIN)/python -m pip install --quiet triton typing_extensions
	$(BIN)/python -m pip install --quiet --no-deps --ignore-requires-python megatron-core==0.19.2
	# torchtitan's own config parsing for the gate: torchtitan 0.3.0 without its declared
	# dependencies (wandb, torch_checkpointing, ... are for training runs), plus exactly what its
	# config modules import; tyro is pinned because the resolver reads torchtitan's command line
	# through tyro.extras.get_parser; torchao because its float8/MX configs import it to resolve
	$(BIN)/python -m pip install --quiet tyro==1.0.17 spmd_types==0.2.3 torchdata tokenizers tensorboard 'datasets>=3.6.0,<4.8.0' torchao==0.18.0
	$(BIN)/python -m pip install --quiet --no-deps torchtitan==0.3.0
endef

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch==2.13.0 exactly (pinned in pyproject.toml): any looser spec downloads a CUDA build
	$(BIN)/python -m pip install --quiet -e '.[workload,dev]'
	$(install_gate_frameworks)
	@touch $(STAMP)

setup: $(STAMP)

# A runner (the gate and bench actions) installs attune's own dependencies from a hash-pinned
# lock (requirements/runner.lock), attune itself without dev extras, then the frameworks'
# parsers at exact versions
RUNNER_STAMP := $(VENV)/.runner-stamp
$(RUNNER_STAMP): requirements/runner.lock pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements/runner.lock
	$(BIN)/python -m pip install --quiet --no-deps .
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(install_gate_frameworks)
	@touch $(RUNNER_STAMP)

setup-runner: $(RUNNER_STAMP)

demo: setup
	$(BIN)/attune demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	# this repository's workflows and the ones `attune init` writes into a training repository
	$(BIN)/actionlint -shellcheck=$(BIN)/shellcheck -config-file .github/actionlint.yaml \
		.github/workflows/*.yml bot/templates/workflows/*.yml

# pytest exits 5 when it collects no tests: that is not a failure of the suite. The suite runs on
# TEST_WORKERS pytest-xdist workers (one per core by default); a module stays on one worker and
# every tests/test_slurm*.py on the same one (tests/conftest.py's scheduler), so module fixtures
# and the loopback cluster are built once. TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= auto
test: lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --durations=25; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

# the edit loop: every test not marked slow, slurm or frameworks (tests/conftest.py fails an
# unmarked test that takes over 10 s here); no lint
test-fast: setup
	ATTUNE_TEST_TIER=fast $(BIN)/python -m pytest -q -m "not slow and not slurm and not frameworks" \
		--durations=10; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

bench: setup bench-memory bench-slurm
	$(BIN)/python benchmarks/levers.py
	$(BIN)/python benchmarks/webhook.py

# webhook ack latency at 200 concurrent signed deliveries (target p99 < 100 ms on 2 cores) and
# the server's peak memory under oversized unsigned bodies
bench-webhook: setup
	$(BIN)/python benchmarks/webhook.py

# cold `attune gate check` per framework (Megatron target: under 30 s on 2 cores)
bench-gate: setup
	$(BIN)/python benchmarks/gate_cold.py --cores 2

# attune's per-device memory prediction vs Megatron-LM's theoretical estimate, 3 example recipes
bench-memory: setup
	$(BIN)/python benchmarks/memory_model.py

# the step-time model (perfmodel/) vs 68 published runs (benchmarks/data/): error per source and
# GPU generation, single-lever pair directions, and docs/perf-model.png
.PHONY: bench-perf-model
bench-perf-model: setup
	$(BIN)/python benchmarks/perf_model.py --plot docs/perf-model.png

# the Slurm backend on a loopback Slurm (tests/slurm_cluster.py; installs Slurm as root when
# missing): submit-to-start and end-to-record latency per trial (target under 3 s overhead)
bench-slurm: setup
	$(BIN)/python benchmarks/slurm_latency.py

# rules vs random search vs Optuna TPE at equal budget, against the exhaustive optimum of the
# demo recipe's layout space at the demo's run length and A/B caps (the table is measured once per
# machine, two passes, about 75 min on 2 cores, then cached by the machine's fingerprint): a table
# of speedups and device-hours, and a plot
bench-tuner: setup
	$(BIN)/python -m benchmarks.tuner --recipe examples/ported-gpt.yaml --steps 12 --warmup 3 \
		--passes 2 --campaigns 3 --budget 0.25 --max-pairs 3 --confirm-pairs 1

# the tuner on realistic GPU layout spaces, on the SIMULATED cluster (--backend sim): three ported
# Megatron-LM recipes, rules / random / TPE over 10 seeds each, and the truth's spread at 5/15/30%
bench-tuner-sim: setup
	$(BIN)/python -m benchmarks.tuner_sim --seeds 10 --spreads 0.05,0.15,0.30

# how often the judgement promotes an identical recipe (A/A): 20,000 simulated comparisons, then
# 20 real ones launched like campaign trials (target under 1%)
bench-false-promotion: setup
	$(BIN)/python benchmarks/false_promotion.py simulate
	$(BIN)/python benchmarks/false_promotion.py real --tiny --comparisons 20 --steps 8 --warmup 2

# the first real GPU run (a machine with an NVIDIA GPU; downloads CUDA wheels): training
# environments, doctor, tiny Megatron-LM and torchtitan runs on 1 (and 2) GPUs, a 3-trial
# campaign each; summary on stdout and in gpu-smoke.json (docs/gpu-runner.md)
.PHONY: gpu-smoke
gpu-smoke: setup
	$(BIN)/python -m benchmarks.gpu_smoke --out gpu-smoke.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache runs
