"""The flows, over one table of the run's stages (each stage's task, CLI command and estimate).

Importing the package imports no stage's code: the CLI lists its stage commands from the table.
"""

from ragaudit.flows._stages import BY_NAME, COMMANDS, STAGES, Stage, estimate_run

__all__ = ["BY_NAME", "COMMANDS", "STAGES", "Stage", "estimate_run"]
