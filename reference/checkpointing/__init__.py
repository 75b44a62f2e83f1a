"""Checkpointing: the barrier handler states, what happens when a buffer or barrier crosses a channel, the
snapshot step of a task with its channel state, the checkpoint coordinator and its failure manager."""
