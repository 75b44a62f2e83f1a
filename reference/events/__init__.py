"""The run's event stream (``stream``): what the engine and its rooms did, for everything that watches a run."""
