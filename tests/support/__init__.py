"""Test-only instruments the fake provider is driven with (imported as ``support``)."""
