"""``ragaudit plugins``: what is installed, what is allow-listed, and what each registered."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ragaudit.cli._app import ConfigOpt, app, console


@app.command()
def plugins(config: ConfigOpt = None) -> None:
    """List the installed plugin packages, the allow-list, and every registered unit by kind.

    The allow-list is the config's ``plugins`` (or ``RAGAUDIT_PLUGINS``): those plugins are
    loaded, as a run would load them; an installed package not on it is listed, not imported.
    """
    from ragaudit.config import load_config
    from ragaudit.registry import BUILTIN_PACKAGE, installed_plugins, package_key, registries

    allowed = load_config(config).plugins  # loading the config loads the allow-listed plugins
    keys = {package_key(name) for name in allowed}
    installed = installed_plugins()
    packages = Table(title="Installed plugin packages (ragaudit.* entry points)")
    for col in ("package", "allow-listed", "entry points (group: module)"):
        packages.add_column(col, no_wrap=col != "entry points (group: module)")
    for package, points in sorted(installed.items()):
        packages.add_row(
            escape(package),
            "yes" if package in keys else "no",
            escape(", ".join(f"{p.group}: {p.module}" for p in points)),
        )
    if installed:
        console.print(packages)
    else:
        console.print("No plugin package is installed (none names a ragaudit.* entry point).")
    named = ", ".join(allowed) if allowed else "none"
    console.print(f"Allow-listed (plugins: or RAGAUDIT_PLUGINS): {escape(named)}", soft_wrap=True)

    units = Table(title="Registered units")
    for col in ("kind", "name", "from", "module", "options"):
        # Names are what a config takes: never wrapped, whatever the width.
        units.add_column(col, no_wrap=col in ("kind", "name"))
    for registry in registries():
        registry.load()
        for name, module in registry.modules.items():
            builtin = module == BUILTIN_PACKAGE or module.startswith(f"{BUILTIN_PACKAGE}.")
            origin = "built-in" if builtin else name.split("/", 1)[0] if "/" in name else module
            units.add_row(
                registry.kind,
                escape(name),
                escape(origin),
                escape(module),
                escape(", ".join(registry.options[name].model_fields)),
            )
    console.print(units)
