"""recall@1 of the 200,000-sentence record's index file against the exact answer, by
nprobe and re-rank depth (the store's re-rank, done here on the study's rows file).

    OMP_NUM_THREADS=1 python nprobe_sweep.py record-at-scale
"""

import json
import sys

import faiss
import numpy as np

out = sys.argv[1]
faiss.omp_set_num_threads(1)
with open(f"{out}/record-index-200000.db.index", "rb") as f:
    f.readline()
    header = json.loads(f.readline())
    ix = faiss.read_index(faiss.PyCallbackIOReader(f.read))
rows = np.memmap(f"{out}/rows-56.f16", dtype=np.float16, mode="r").reshape(-1, 768)[:200000]
q = np.load(f"{out}/real.npz")["queries"].astype(np.float32)
cos = q @ np.asarray(rows, dtype=np.float32).T
truth = cos.max(1)
for npb in (64, 128, 256):
    for rr in (10, 50):
        ix.nprobe = npb
        _, cand = ix.search(q, rr)
        best = np.array(
            [
                (np.asarray(rows[np.sort(c[c >= 0]) - 1], dtype=np.float32) @ qq).max()
                for c, qq in zip(cand, q, strict=False)
            ]
        )
        print(npb, rr, (best >= truth - 1e-4).mean())
