"""Where the tests find the repository and the shared data sets beside it."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: tests/support/paths.py is two folders below it."""
