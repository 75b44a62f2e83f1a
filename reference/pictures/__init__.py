"""Pictures: space-time diagrams of a traced run, and drawing them with matplotlib."""
