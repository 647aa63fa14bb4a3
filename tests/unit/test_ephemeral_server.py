"""The command that starts Prefect's ephemeral server is Prefect's own.

``ragaudit._server`` spawns the server itself, before this process imports Prefect's server
module, so it writes the command out; this checks it against what Prefect's
``SubprocessASGIServer`` would run (nothing is started).
"""

from __future__ import annotations

from typing import Any

from ragaudit import _server


def test_the_server_command_and_environment_are_prefects(monkeypatch) -> None:
    import prefect.server.api.server as prefect_server

    seen: dict[str, Any] = {}

    class Recorder:
        @staticmethod
        def Popen(*args: Any, **kwargs: Any) -> None:  # noqa: N802 - subprocess's name
            seen.update(kwargs, args=kwargs.get("args", args[0] if args else None))

    monkeypatch.setattr(prefect_server, "subprocess", Recorder)
    port = 8765
    try:
        prefect_server.SubprocessASGIServer(port=port)._run_uvicorn_command()
    finally:
        prefect_server.SubprocessASGIServer._instances.pop(port, None)
    assert seen["args"] == _server.server_command(port)
    env = _server._server_env()
    assert {k: seen["env"].get(k) for k in _server._SERVER_ENV} == _server._SERVER_ENV
    assert {k: env[k] for k in _server._SERVER_ENV} == _server._SERVER_ENV
