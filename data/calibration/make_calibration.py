"""Build the bundled calibration subsets from ../shared/data (WikiEval, HaluEval; see NOTICE.md).

Run from the repository root: ``python data/calibration/make_calibration.py [SHARED_DATA_DIR]``.
The first PAIRS questions of each WikiEval file that carry both a good and a bad variant, and the
first PAIRS HaluEval QA items, unchanged. Small on purpose: the offline judge must calibrate on
them within minutes.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent
PAIRS = 10


def main(src: Path) -> None:
    """Copy the subsets."""
    for name in ("ff.csv", "ar.csv", "cr.csv"):
        with (src / "wikieval" / name).open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            fields = reader.fieldnames or []
        labels: dict[str, set[str]] = {}
        for row in rows:
            labels.setdefault(row["question"], set()).add(row["label"])
        keep = [q for q, ls in labels.items() if ls == {"0", "1"}][:PAIRS]
        with (OUT / "wikieval" / name).open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows(r for r in rows if r["question"] in keep)
    lines = (src / "halueval" / "qa_samples.json").read_text(encoding="utf-8").splitlines()
    (OUT / "halueval" / "qa_samples.jsonl").write_text(
        "\n".join(lines[:PAIRS]) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT.parents[2] / "shared" / "data")
