"""DP-SGD generators: DP-GAN (`DPGAN`) and its conditional variant (`DPCGAN`).

- `dpgan`: the GAN, its calibration and its discriminator weights;
- `cgan`: the conditional variant and its DP label distribution;
- `nets`: the torch networks and the DP-SGD training loop (torch imported when used);
- `steps`: the default number of training steps.
"""

from dprelease.generators.gan.cgan import DPCGAN
from dprelease.generators.gan.dpgan import DPGAN

__all__ = ["DPCGAN", "DPGAN"]
