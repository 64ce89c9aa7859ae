"""Regenerate docs/nodes.md from the node contracts in code: python scripts/gen_node_catalogue.py"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from contactflow.contracts.catalogue import render_catalogue  # noqa: E402

if __name__ == "__main__":
    out = ROOT / "docs" / "nodes.md"
    out.write_text(render_catalogue())
    print(f"wrote {out}")
