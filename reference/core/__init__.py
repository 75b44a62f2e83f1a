"""The leaf room: what every other room may import and which imports nothing of the engine: the
seams where a fault may replace a rule, the doors (small Protocols) through which the rooms see a
run instead of the Engine, and the coverage collector."""
