"""Faults: the named mutants, each a re-creation of a real class of checkpointing bug, that the checks must
catch (verify's mutation score)."""
