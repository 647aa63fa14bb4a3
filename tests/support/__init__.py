"""What the tests share: servers on loopback, synthetic runs, paths."""
