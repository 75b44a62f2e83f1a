"""Z3 proofs of the model's rules; ``run(names=None)`` runs them (see ``proofs.registry``)."""

from cutcheck.proofs.registry import REGISTRY, ProofResult, names, run

__all__ = ["REGISTRY", "ProofResult", "names", "run"]
