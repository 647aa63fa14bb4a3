# Two commands set everything up: `make demo` runs the main job, `make test` runs the tests.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
# The CPU wheel of torch 2.13.0 lies on these machines; an unpinned torch pulls GBs of CUDA.
INSTALL_FLAGS ?=

.PHONY: install system-deps demo test test-fast check lint typecheck format bench clean

install: .install.stamp

.install.stamp: pyproject.toml
	$(PIP) install $(INSTALL_FLAGS) "torch==2.13.0"
	$(PIP) install $(INSTALL_FLAGS) -e ".[offline,search,dev]"
	touch .install.stamp

demo: install
	$(PYTHON) -m ragaudit demo

test: install system-deps
	$(PYTHON) -m pytest -q

test-fast: install system-deps
	$(PYTHON) -m pytest -q -m "not slow"

# Debian packages the integration tests drive: headless Chromium (report pages) and Redis
# (the shared memo). Installed only where missing; needs root, as on these machines and CI.
# Without root the tests that need them skip, saying why.
system-deps:
	@if command -v chromium >/dev/null && command -v redis-server >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium redis-server >/dev/null; \
	else echo "system-deps: chromium/redis-server missing and not root: their tests will skip"; fi

lint: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

format: install
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .

typecheck: install
	PYTHON=$(PYTHON) bash scripts/typecheck.sh

check: lint typecheck test

bench: install
	for f in bench/bench_*.py; do $(PYTHON) $$f || exit 1; done

clean:
	rm -rf data/runs data/cache data/index data/prefect data/test-home .install.stamp
