"""Synthetic-data generators behind one interface (`Generator`) and a registry by name."""

from __future__ import annotations

from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.generators.base import Discriminator, Generator
from dprelease.generators.gan.cgan import DPCGAN
from dprelease.generators.gan.dpgan import DPGAN
from dprelease.generators.marginals import IndependentMarginals
from dprelease.generators.mbi import AIM, MST
from dprelease.generators.pgm.generator import PrivateGraphicalModel
from dprelease.generators.privbayes import PrivBayes

# gan/ imports torch and mbi.py mbi/polars only inside methods: importing this package needs
# no optional dependency (a generator that needs one checks it, `Generator.require_extra`).
GENERATORS: dict[str, type[Generator]] = {
    cls.name: cls
    for cls in (PrivateGraphicalModel, IndependentMarginals, DPGAN, DPCGAN, PrivBayes, MST, AIM)
}


def make_generator(
    name: str, encoder: Encoder, epsilon: float, delta: float, **options: object
) -> Generator:
    """Build a generator by name with its share of the budget and public options."""
    try:
        cls = GENERATORS[name]
    except KeyError:
        known = ", ".join(sorted(GENERATORS))
        raise InputError(f"unknown generator {name!r}; choose one of: {known}") from None
    try:
        return cls(encoder, epsilon, delta, **options)
    except (TypeError, ValueError) as error:
        raise InputError(f"generator {name!r}: {error}") from None


__all__ = ["GENERATORS", "Discriminator", "Generator", "make_generator"]
