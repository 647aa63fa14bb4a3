#!/usr/bin/env bash
# mypy over the installed package layout. cache/, flows/ and tasks/ install as ragaudit.cache,
# ragaudit.flows and ragaudit.tasks through setuptools' package-dir mapping, which mypy cannot
# follow through the editable-install import hook: a link tree of that layout lets it check
# the package under its real module names.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
tree=build/typecheck
rm -rf "$tree"
mkdir -p "$tree/ragaudit"
for entry in ragaudit/*; do ln -s "$repo/$entry" "$tree/ragaudit/"; done
for sub in cache flows tasks; do ln -s "$repo/$sub" "$tree/ragaudit/$sub"; done
cd "$tree"
exec "${PYTHON:-python3}" -m mypy --config-file "$repo/pyproject.toml" -p ragaudit
