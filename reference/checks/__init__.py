"""The checks: the run-time invariants that are not local to an operator, the exactly-once oracle, and the
channel traces validated against the protocol table of cutcheck.model.protocol."""
