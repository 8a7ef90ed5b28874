"""The default generator, a private graphical model (`PrivateGraphicalModel`).

- `generator`: the measurement rounds and the plan of their noise;
- `cells`: the one-way and coarse cells chosen from DP outputs;
- `one_way`: denoising the one-way histograms (smoothing, empty tails, stray runs);
- `tree`: the tree of pairs measured with the target, selected from DP outputs;
- `model`: the tree-structured model fitted to the noisy tables, and sampling from it;
- `latent`: the within-cell coupling of ordered features to a numeric target.
"""

from dprelease.generators.pgm.generator import PrivateGraphicalModel

__all__ = ["PrivateGraphicalModel"]
