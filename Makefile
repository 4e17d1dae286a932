# Everyday commands. PYTHON may point at another interpreter: make test PYTHON=python3.12
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: help deps install bench test test-gpu lint format sanitize doctor clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*##/\t/'

deps:  ## install what building, testing and benchmarking need (torch only if missing)
	$(PIP) install -r requirements.txt

install: deps  ## build the extension in place (CUDA when nvcc + CUDA torch are found, else CPU-only)
	$(PIP) install --no-build-isolation -e .
	@$(PYTHON) -c "import cuda_kernels as ck; i = ck.build_info(); print('cuda_kernels built:', 'CUDA archs ' + ','.join(i['archs']) if i['cuda'] else 'CPU-only', '(debug)' if i['debug'] else '')"

bench: install  ## build, then time every op against torch on the available device
	$(PYTHON) benchmark.py --quick

test:  ## run the test suite (CUDA cases skip without a GPU)
	$(PYTHON) -m pytest -v -s

lint:  ## ruff + clang-format through pre-commit
	$(PYTHON) -m pre_commit run --all-files

format: lint

clean:  ## remove build outputs
	rm -rf build *.egg-info cuda_kernels/*.so
