"""SEIKO Fig. 7 robustness grid (RA-L 2024 §V-F): ``contactflow bench seiko-grid`` runs this.

    contactflow bench seiko-grid --help
    contactflow bench seiko-grid --speeds 10,20,30,40 --targets 1 --out docs/seiko_grid.json --plot docs/seiko_grid.png

The trial, the targets, the conditions and the aggregation: :mod:`contactflow.seiko.grid`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contactflow.seiko.grid import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
