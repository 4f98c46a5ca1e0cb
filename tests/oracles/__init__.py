"""Step-by-step Python replays of GE procedures, used only as test oracles for the rules."""
