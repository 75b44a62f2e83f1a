"""The pluggable shuffle service (FLIP-31): pipelined and blocking result partitions, the masters per
exchange kind, and each worker's shuffle environments."""
