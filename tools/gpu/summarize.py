#!/usr/bin/env python3
"""Writes OUT/summary.json from check.sh's results.txt and each scenario's compare.py output, and
prints it as text (the figures docs/GPU.md wants: largest relative error of per-step bytes, leak
rank/tag found, overhead %, the agent's own summary counters)."""

import glob
import json
import os
import sys


def main(out):
    results = []
    try:
        with open(os.path.join(out, "results.txt")) as f:
            for line in f:
                name, status, detail = (line.rstrip("\n").split("|", 2) + ["", ""])[:3]
                if name:
                    results.append({"name": name, "status": status, "detail": detail})
    except OSError:
        pass
    scenarios = {}
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        base = os.path.basename(path)
        if base in ("summary.json",) or ".timeline." in base or base.startswith(("probe", "rehearse")):
            continue
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "per_rank" in data:
            scenarios[data.get("name", base[:-5])] = data
    probes = {}
    for path in sorted(glob.glob(os.path.join(out, "probe_*.json"))):
        try:
            with open(path) as f:
                probes[os.path.basename(path)[:-5]] = json.loads(f.read().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            probes[os.path.basename(path)[:-5]] = "unreadable"
    summary = {"results": results, "scenarios": scenarios, "probes": probes}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
    print("== results")
    for r in results:
        print("%-22s %-5s %s" % (r["name"], r["status"], r["detail"]))
    for name, s in scenarios.items():
        print("== %s: follows %s, max rel err %s, leak %s, overhead %s%%" % (
            name, s.get("best_measure"), s.get("max_rel_err"), s.get("leak"), s.get("overhead_pct")))
        if s.get("agent_summary"):
            print("   agent: %s" % s["agent_summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
