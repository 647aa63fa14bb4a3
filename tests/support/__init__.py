"""What the tests share: servers on loopback, synthetic runs, paths, and the test-only
instruments the fake provider is driven with (oracles, a shared call count)."""
