"""``ragaudit view``: a local web app over a runs root (runs, reports, compare, trends, labels).

It reads run folders as they are, through the library (``runfolder``, ``reporting``); it never
imports a stage. Every text it shows came from a run folder and is escaped.
"""

from ragaudit.viewer._paths import run_url

__all__ = ["run_url"]
