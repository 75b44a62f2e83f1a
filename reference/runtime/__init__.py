"""The runtime: network buffers and channels, subtasks, operators, sources, sinks (writer and committer),
the records and their expectations, the wiring of tasks from the execution graph, the scheduler's
chooser, and buffer debloating."""
