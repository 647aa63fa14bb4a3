# Two commands set everything up: `make demo` runs the main job, `make test` runs the tests.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
INSTALL_FLAGS ?=

.PHONY: install system-deps demo test test-fast soak check lint typecheck format bench clean

install: .install.stamp

.install.stamp: pyproject.toml
	$(PIP) install $(INSTALL_FLAGS) -e ".[offline,search,scale,dev]"
	touch .install.stamp

demo: install
	$(PYTHON) -m ragaudit demo

test: install system-deps
	$(PYTHON) -m pytest -q

test-fast: install system-deps
	$(PYTHON) -m pytest -q -m "not slow"

# Determinism check: every fast test that runs judge calls concurrently (gateway, limits, metrics,
# sort, ground truth), SOAK times over in one process; one failure stops it. The three
# data-set-sized tests (each 10-40 s, sequential in what they check) are left out.
SOAK ?= 50
SOAK_TESTS := tests/test_gateway.py tests/test_gateway_limits.py tests/test_metrics.py \
	tests/test_metrics_chinese.py tests/test_sort.py tests/test_ground_truth.py
soak: install
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
