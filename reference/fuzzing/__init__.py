"""Fuzzing: the one scenario generator (Hypothesis and seed driven) and the campaigns that hunt violations
with it, shrink what they find and write counterexamples that replay."""
