#!/usr/bin/env python3
"""Compares what the collector recorded for one GPU-check scenario with what the program saw.

Inputs: the program's per-step JSON lines (leak_train.py, run under the agent), the same program's
lines from a run without the agent (for the overhead), the collector's per-step timeline
(`memtrace timeline --job J --format json`: rows with rank, step, floor, peak, end) and the
agent's stderr (its "memtrace-agent: summary:" line). Prints one JSON object:

  per_rank[r]: steps compared, largest/median relative error of the collector's end-of-step bytes
               against torch.cuda.memory_reserved() and memory_allocated(), growth slopes
  best_measure: which torch figure the agent's bytes follow (smaller largest error)
  leak: the rank(s) whose recorded bytes grow by about --leak-mb per step
  overhead_pct: median step time with the agent vs without, in percent
  agent_summary: the numbers of the agent's summary line
"""

import argparse
import glob
import json
import re
import statistics
import sys


def read_jsonl(pattern):
    rows = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    rows.append(json.loads(line))
    return rows


def read_timeline(path):
    with open(path) as f:
        text = f.read().strip()
    if not text:
        return []
    data = json.loads(text)
    if isinstance(data, dict):  # tolerate {"rows": [...]} or {"points": [...]}
        data = data.get("rows") or data.get("points") or []
    return data


def slope(xs, ys):
    """Least-squares slope of ys over xs (0 for fewer than two points)."""
    n = len(xs)
    if n < 2:
        return 0.0
    mx = sum(xs) / n
    my = sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    if den == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den


def rel_errors(recorded, program, steps):
    errs = []
    for s in steps:
        want = program[s]
        if want > 0:
            errs.append(abs(recorded[s] - want) / want)
    return errs


def parse_agent_summary(text):
    """Numbers of every 'memtrace-agent: summary:' / 'transport:' line, by name."""
    out = {}
    for line in text.splitlines():
        if "memtrace-agent: summary:" in line or "memtrace-agent: transport:" in line:
            for name, value in re.findall(r"([a-z_]+) (\d+)", line):
                out[name] = out.get(name, 0) + int(value)
    return out


def compare(program_rows, baseline_rows, timeline_rows, leak_rank=None, leak_mb=0.0, warmup=2,
            agent_log=""):
    program = {}
    for r in program_rows:
        if "step" in r:
            program.setdefault(int(r["rank"]), {})[int(r["step"])] = r
    recorded = {}
    for r in timeline_rows:
        key = r.get("step", r.get("bucket"))
        if key is None or r.get("rank") is None or r.get("end") is None:
            continue
        recorded.setdefault(int(r["rank"]), {})[int(key)] = int(r["end"])
    result = {"per_rank": {}, "ranks_program": sorted(program), "ranks_recorded": sorted(recorded)}
    max_err = {"reserved": [], "allocated": []}
    slopes = {}
    for rank in sorted(program):
        prog = program[rank]
        rec = recorded.get(rank, {})
        steps = sorted(s for s in prog if s in rec and s >= warmup)
        entry = {"steps_program": len(prog), "steps_recorded": len(rec), "steps_compared": len(steps)}
        for measure in ("reserved", "allocated"):
            errs = rel_errors(rec, {s: prog[s][measure] for s in prog}, steps)
            if errs:
                entry["max_rel_err_" + measure] = max(errs)
                entry["median_rel_err_" + measure] = statistics.median(errs)
                max_err[measure].append(max(errs))
        if steps:
            entry["recorded_slope_bytes_per_step"] = slope(steps, [rec[s] for s in steps])
            entry["reserved_slope_bytes_per_step"] = slope(steps, [prog[s]["reserved"] for s in steps])
            slopes[rank] = entry["recorded_slope_bytes_per_step"]
            last = steps[-1]
            entry["last_step"] = last
            entry["last_recorded_bytes"] = rec[last]
            entry["last_reserved"] = prog[last]["reserved"]
            entry["last_allocated"] = prog[last]["allocated"]
        result["per_rank"][str(rank)] = entry
    worst = {m: max(v) for m, v in max_err.items() if v}
    if worst:
        best = min(worst, key=worst.get)
        result["best_measure"] = best
        result["max_rel_err"] = worst[best]
        result["max_rel_err_by_measure"] = worst
    if leak_mb > 0 and slopes:
        per_step = leak_mb * (1 << 20)
        growing = sorted(r for r, s in slopes.items() if s >= 0.5 * per_step)
        result["leak"] = {
            "expected_rank": leak_rank,
            "expected_bytes_per_step": per_step,
            "growing_ranks": growing,
            "steepest_rank": max(slopes, key=slopes.get),
        }
        if leak_rank is not None:
            result["leak"]["found"] = growing == [leak_rank]
        else:
            result["leak"]["found"] = growing == sorted(slopes)
    base = {}
    for r in baseline_rows:
        if "step_s" in r and int(r.get("step", 0)) >= warmup:
            base.setdefault(int(r["rank"]), []).append(float(r["step_s"]))
    with_agent = {}
    for rank, prog in program.items():
        with_agent[rank] = [float(v["step_s"]) for s, v in prog.items() if s >= warmup]
    ratios = []
    for rank in with_agent:
        if base.get(rank) and with_agent[rank]:
            ratios.append(statistics.median(with_agent[rank]) / statistics.median(base[rank]))
    if ratios:
        result["overhead_pct"] = (statistics.median(ratios) - 1.0) * 100.0
        result["median_step_s_agent"] = statistics.median(
            [statistics.median(v) for v in with_agent.values() if v])
        result["median_step_s_baseline"] = statistics.median(
            [statistics.median(v) for v in base.values() if v])
    result["agent_summary"] = parse_agent_summary(agent_log)
    return result


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", required=True)
    p.add_argument("--program", required=True, help="glob of the agent run's JSON lines")
    p.add_argument("--baseline", default="", help="glob of the run without the agent")
    p.add_argument("--timeline", required=True, help="memtrace timeline --format json output")
    p.add_argument("--agent-log", default="", help="stderr of the agent run")
    p.add_argument("--leak-rank", type=int, default=None)
    p.add_argument("--leak-mb", type=float, default=0.0)
    p.add_argument("--warmup", type=int, default=2)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    log = ""
    if args.agent_log:
        try:
            with open(args.agent_log, errors="replace") as f:
                log = f.read()
        except OSError:
            pass
    try:
        timeline = read_timeline(args.timeline)
    except (OSError, ValueError) as e:
        timeline = []
        print("compare: cannot read timeline %s: %s" % (args.timeline, e), file=sys.stderr)
    result = compare(read_jsonl(args.program),
                     read_jsonl(args.baseline) if args.baseline else [],
                     timeline, args.leak_rank, args.leak_mb, args.warmup, log)
    result["name"] = args.name
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
