#!/usr/bin/env bash
# mypy over the package under its real module names: cache/, flows/ and tasks/ are reached
# through the symlinks ragaudit/cache, ragaudit/flows and ragaudit/tasks, so checking from the
# repository root sees ragaudit.cache, ragaudit.flows and ragaudit.tasks as subpackages.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" -m mypy --config-file pyproject.toml -p ragaudit
