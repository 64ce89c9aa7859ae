"""SEIKO Fig. 7 robustness grid (RA-L 2024 §V-F): ``contactflow bench seiko-grid`` runs this.

    contactflow bench seiko-grid --help
    contactflow bench seiko-grid --targets 1 --out docs/seiko_grid.json --plot docs/seiko_grid.png   # the reduced grid
    contactflow bench seiko-grid --jobs 2 --load-at wrist --operator as_allowed --config robots/talos/seiko_fig7.yaml \
        --out docs/seiko_grid_fig7_wrist_kp05.json --plot docs/seiko_grid_fig7_wrist_kp05.png         # the full grid, K_p 0.5

Every run and its reading: docs/seiko_multicontact.md, "Fig. 7 robustness grid".

The trial, the targets, the conditions and the aggregation: :mod:`contactflow.seiko.grid`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contactflow.seiko.grid import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
