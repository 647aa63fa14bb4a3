"""``python -m ragaudit`` runs the CLI."""

from ragaudit.cli import main

main()
