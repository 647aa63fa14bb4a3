# Two commands set everything up: `make demo` runs the main job, `make test` runs the tests.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# The CPU wheel of torch 2.13.0 lies on these machines; an unpinned torch pulls GBs of CUDA.
INSTALL_FLAGS ?=

.PHONY: install demo test test-fast check lint format bench clean

install: .install.stamp

.install.stamp: pyproject.toml
	$(PIP) install $(INSTALL_FLAGS) "torch==2.13.0"
	$(PIP) install $(INSTALL_FLAGS) -e ".[offline,search,dev]"
	touch .install.stamp

demo: install
	$(PYTHON) -m ragaudit demo

test: install
	$(PYTHON) -m pytest -q

test-fast: install
	$(PYTHON) -m pytest -q -m "not slow"

lint: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

format: install
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .

check: lint test

bench: install
	for f in bench/bench_*.py; do $(PYTHON) $$f || exit 1; done

clean:
	rm -rf data/runs data/cache data/index data/prefect data/test-home .install.stamp
