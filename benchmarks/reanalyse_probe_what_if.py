"""Re-run the slowdown analysis (profiler.analysis.probe_slowdown) over a finished `run --launch --probe --what-if`
run directory's probe files, in the run's own load window and process roles, and print its lines.

Usage: python benchmarks/reanalyse_probe_what_if.py RUN_DIR [OUT.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from infer_prof.profiler.analysis.probe_slowdown import analyse_slowdowns
from infer_prof.profiler.session.target.inject import ProbeSetup, read_probe


def main(run: Path, out: Path | None) -> None:
    doc = json.loads((run / "probe" / "probes.json").read_text())
    setup = ProbeSetup(folder=run / "probe", probes=doc["probes"])
    found = read_probe(setup)
    probe = json.loads((run / "result.json").read_text())["target"]["probe"]
    steps = [i for i, row in enumerate(doc["probes"]) if row["component"] == "step"]
    records = found[probe["steps"]["pid"]]["records"]
    # The load's window ends with its last step; result.json keeps its length.
    end = int(records[np.isin(records[:, 1], steps), 3].max()) + 1
    start = end - int(probe["window_s"] * 1e9) - 1
    roles = {int(entry["pid"]): str(entry.get("role")) for entry in probe["processes"]}
    section = analyse_slowdowns(setup.probes, found, (start, end), roles=roles)
    if section is None:
        sys.exit("no process of the run took the experiments' turns")
    print("\n".join(section.get("lines", [])))
    if out is not None:
        out.write_text(json.dumps(section, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
