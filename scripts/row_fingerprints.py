"""Every experiment row's fingerprint, one JSON line each: run it before and after a change
to a scheme's config or parameters and compare (a row's fingerprint keys its records, so
it must not change unless what the row writes or scores does).

    PYTHONPATH=src python scripts/row_fingerprints.py experiments > after.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from samark.evaluation.experiment import Experiment


def main(folder: str) -> None:
    for path in sorted(Path(folder).glob("*.toml")):
        for row in Experiment.load(path).schemes:
            print(json.dumps({"file": path.name, "row": row.label, "fingerprint": row.fingerprint}))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "experiments")
