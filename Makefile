# Everyday commands. PYTHON may point at another interpreter: make test PYTHON=python3.12
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: help deps install bench test dev test-fast lint format sanitize doctor jit-test clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

# Bytecode: where the environment says not to write it (PYTHONDONTWRITEBYTECODE=1, as in many container images)
# and torch has none, every Python process compiles torch from source (import torch 5-6 s instead of 2 s on the H100
# machine). The targets below cache it outside the source tree instead: cuda_kernels/tools/pycache.py decides and prints
# the folder. CUDA_KERNELS_PYCACHE=0 leaves the environment as it is.
PYCACHE := $(if $(PYTHONDONTWRITEBYTECODE),$(shell $(PYTHON) cuda_kernels/tools/pycache.py))
ifneq ($(PYCACHE),)
export PYTHONPYCACHEPREFIX := $(PYCACHE)
unexport PYTHONDONTWRITEBYTECODE
endif

# bash for pipefail: a failing pip install fails the target even though its output goes through a filter.
SHELL := /bin/bash

deps:  ## install what building, testing and benchmarking need (torch only if missing); prints what it installed
	@set -o pipefail; $(PIP) install -r requirements.txt | awk '/^Successfully installed /{for (i = 3; i <= NF; i++) print "installed " $$i; n++} END {if (!n) print "deps: nothing new installed"}'

install: deps  ## build the extension in place (CUDA when nvcc, a CUDA torch and a GPU are found, else CPU-only)
	$(PIP) install --no-build-isolation -e .
	@$(PYTHON) -c "import cuda_kernels as ck; from cuda_kernels.tools.build_config import build_plan; i = ck.build_info(); print('cuda_kernels built:', 'CUDA archs ' + ','.join(i['archs']) if i['cuda'] else f'CPU-only ({build_plan().why})', '(debug)' if i['debug'] else '')"

bench: install  ## build, then time every op against torch on the available device
	$(PYTHON) benchmark.py --quick

test:  ## run the test suite (CUDA cases skip without a GPU)
	$(PYTHON) -m pytest -v -s

dev:  ## the edit loop: rebuild what changed in csrc/ (JIT) and rerun one op's fast tests, e.g. make dev OP=square
	$(PYTHON) -m cuda_kernels.dev $(OP)

test-fast:  ## the fast tier: every test but the slow ones (torch.compile, large tensors, subprocess builds)
	$(PYTHON) -m pytest -q -m "not slow"

sanitize:  ## the CUDA tests under compute-sanitizer memcheck, racecheck, initcheck, synccheck (skips without a GPU)
	PYTHON=$(PYTHON) bash scripts/sanitize.sh

doctor:  ## what a bug report needs: versions, GPUs, archs built vs the GPU's, a tiny call of each op
	$(PYTHON) -m cuda_kernels.doctor

jit-test:  ## the test suite against a JIT build of csrc/ (CUDA_KERNELS_JIT=1: recompiles only what changed)
	CUDA_KERNELS_JIT=1 $(PYTHON) -m pytest -q tests/

lint:  ## ruff + clang-format through pre-commit
	$(PYTHON) -m pre_commit run --all-files

format: lint

clean:  ## remove build outputs
	rm -rf build *.egg-info cuda_kernels/*.so
