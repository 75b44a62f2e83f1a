"""Checkpoint storage: the in-memory storage, the on-disk layout (Flink's chk-N/shared/taskowned), the
codec and _metadata format, the shared-state registry, retention and restore modes, inspection of real
checkpoint directories, the reversible quarantine of orphans, and object stores."""
