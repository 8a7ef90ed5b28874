"""dpmm's AIM or MST on public cell indices; run by benchmarks/fidelity.py in dpmm's own venv.

`<dpmm-venv>/bin/python benchmarks/fidelity_dpmm.py IN.npz OUT.npz`

IN holds `cells` (rows x columns of public cell indices, built by the fidelity study from the
schema, never from the data), `sizes` (cells per column), `method` ("aim" or "mst"),
`epsilon`, `delta`, `n` (synthetic rows), `seed`, `iters`, `rounds`. dpmm's own binning is
switched off (`disable_processing=True`, domain = the cell counts), so dpmm models the same
public cells as every other method; `n_jobs=1` (a shared two-core machine). OUT holds the
synthetic cell indices, the CPU seconds of fit + generate (`time.process_time`) and the
process's peak resident memory in MB. This file imports nothing from dprelease: dpmm pins
numpy, pandas and OpenDP versions that differ from the project's.
"""

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd


def main(source: str, target: str) -> None:
    from dpmm.pipelines import AIMPipeline, MSTPipeline

    given = np.load(source)
    method = str(given["method"])
    names = [f"c{i}" for i in range(given["cells"].shape[1])]
    frame = pd.DataFrame(given["cells"].astype(np.int64), columns=names)
    domain = {name: int(size) for name, size in zip(names, given["sizes"], strict=True)}
    options = {"n_iters": int(given["iters"])}
    if method == "aim":
        options["rounds"] = int(given["rounds"])
    pipeline_class = AIMPipeline if method == "aim" else MSTPipeline
    started = time.process_time()
    pipeline = pipeline_class(
        epsilon=float(given["epsilon"]),
        delta=float(given["delta"]),
        n_jobs=1,
        gen_kwargs=options,
        disable_processing=True,
    )
    pipeline.fit(frame, domain=domain, random_state=int(given["seed"]))
    synthetic = pipeline.generate(n_records=int(given["n"]), random_state=int(given["seed"]))
    cpu = time.process_time() - started
    status = Path("/proc/self/status").read_text().splitlines()  # VmHWM: not kept over exec
    peak_mb = float(next(x for x in status if x.startswith("VmHWM:")).split()[1]) / 1024
    np.savez(target, cells=synthetic[names].to_numpy(np.int64), cpu=cpu, peak_mb=peak_mb)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
