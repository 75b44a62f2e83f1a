"""The rules, written once and without I/O: job graphs, execution graphs, key groups, partitioners,
pipelined regions, the in-flight bound, the protocol table, the log schema and the errors."""
