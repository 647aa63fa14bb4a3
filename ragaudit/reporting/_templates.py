"""The one way HTML is made: Jinja templates in a package's ``templates/``, autoescaped.

Every page (the report, ``compare``, the calibration, the tune, the ablation, the viewer's
pages) renders through an environment made here, so escaping and strictness are never a
per-page choice: any text from a run (questions, answers, documents, names) is escaped, and a
name missing from a template's context is an error rather than an empty string.
"""

from __future__ import annotations

import jinja2


def template_env(package: str, *, trim: bool = True) -> jinja2.Environment:
    """The Jinja environment over ``package``'s ``templates/`` folder.

    Args:
        package: The package holding the templates (``ragaudit.ablation``).
        trim: Drop the line a block tag stands on and the indentation before it (a template
            written before this factory without it keeps its output as it was).
    """
    return jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=trim,
        lstrip_blocks=trim,
    )


__all__ = ["template_env"]
