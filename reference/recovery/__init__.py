"""Recovery: global failover from the latest completed checkpoint, region failover, restore at other
parallelisms (key groups, channel state, sink committables), Flink's refusals, and broadcast fan-out."""
