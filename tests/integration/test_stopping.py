"""Under the CLI, SIGTERM keeps the CLI's handler while a Prefect flow runs (not Prefect's)."""

from __future__ import annotations

import asyncio
import signal

from prefect import flow

from ragaudit import stopping


@flow(name="ragaudit-test-sigterm-probe", persist_result=False)
async def _probe() -> tuple[object, object]:
    installed = signal.getsignal(signal.SIGTERM)
    stopping.reclaim_sigterm()
    return installed, signal.getsignal(signal.SIGTERM)


def test_the_flow_body_reclaims_sigterm_from_prefect() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with stopping.sigterm_as_sigint():
        ours = signal.getsignal(signal.SIGTERM)
        prefects, inside = asyncio.run(_probe())
        # Prefect's engine swapped in its handler for the flow run; the body put ours back,
        # and Prefect restores ours (its "original") when the flow run ends.
        assert prefects is not ours
        assert inside is ours
        assert signal.getsignal(signal.SIGTERM) is ours
    assert signal.getsignal(signal.SIGTERM) is before


def test_without_the_cli_prefects_handler_stays() -> None:
    prefects, inside = asyncio.run(_probe())
    assert inside is prefects


def test_exit_status_is_128_plus_the_signal() -> None:
    assert stopping.exit_status(signal.SIGINT) == 130
    assert stopping.exit_status(signal.SIGTERM) == 143
