#!/usr/bin/env python3
"""Tests of compare.py on scenarios whose answer is known (run: python3 tools/gpu/compare_test.py)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

MIB = 1 << 20


def program(rank, steps, base, leak_per_step, step_s=0.01):
    rows = []
    for s in range(steps):
        reserved = base + leak_per_step * (s + 1)
        rows.append({"rank": rank, "step": s, "reserved": reserved,
                     "allocated": reserved - 10 * MIB, "step_s": step_s})
    return rows


def timeline(rows, scale=1.0, offset=0):
    return [{"rank": r["rank"], "step": r["step"], "floor": 0, "peak": 0,
             "end": int(r["reserved"] * scale) + offset} for r in rows]


class CompareTest(unittest.TestCase):
    def test_exact_match_has_zero_error_and_follows_reserved(self):
        rows = program(0, 20, 100 * MIB, 8 * MIB)
        r = compare.compare(rows, rows, timeline(rows), leak_mb=8)
        self.assertEqual(r["best_measure"], "reserved")
        self.assertAlmostEqual(r["max_rel_err"], 0.0)
        self.assertTrue(r["leak"]["found"])
        self.assertAlmostEqual(r["overhead_pct"], 0.0)

    def test_leak_on_one_rank_of_four_is_found_and_only_that_rank(self):
        rows = []
        for rank in range(4):
            rows += program(rank, 30, 200 * MIB, 8 * MIB if rank == 2 else 0)
        r = compare.compare(rows, [], timeline(rows), leak_rank=2, leak_mb=8)
        self.assertEqual(r["leak"]["growing_ranks"], [2])
        self.assertEqual(r["leak"]["steepest_rank"], 2)
        self.assertTrue(r["leak"]["found"])
        self.assertNotIn("overhead_pct", r)  # no baseline given

    def test_no_leak_planted_finds_no_growing_rank(self):
        rows = []
        for rank in range(4):
            rows += program(rank, 30, 200 * MIB, 0)
        r = compare.compare(rows, [], timeline(rows), leak_rank=2, leak_mb=8)
        self.assertEqual(r["leak"]["growing_ranks"], [])
        self.assertFalse(r["leak"]["found"])

    def test_relative_error_and_overhead_are_measured(self):
        rows = program(0, 10, 100 * MIB, 0, step_s=0.011)
        base = program(0, 10, 100 * MIB, 0, step_s=0.010)
        r = compare.compare(rows, base, timeline(rows, scale=1.05), warmup=0)
        self.assertAlmostEqual(r["max_rel_err_by_measure"]["reserved"], 0.05, places=3)
        self.assertAlmostEqual(r["overhead_pct"], 10.0, places=3)

    def test_missing_rank_in_timeline_is_reported_not_crashed(self):
        rows = program(0, 5, MIB, 0) + program(1, 5, MIB, 0)
        r = compare.compare(rows, [], timeline(program(0, 5, MIB, 0)), warmup=0)
        self.assertEqual(r["ranks_recorded"], [0])
        self.assertEqual(r["per_rank"]["1"]["steps_compared"], 0)

    def test_agent_summary_numbers_are_parsed(self):
        log = ("memtrace-agent: summary: records 120 (memory 100, pool 0, marker 20); "
               "callbacks: alloc_calls 50 (runtime 50, nested 50), ooms 1\n"
               "memtrace-agent: transport: recorded 300, lost 0\n")
        s = compare.parse_agent_summary(log)
        self.assertEqual(s["records"], 120)
        self.assertEqual(s["nested"], 50)
        self.assertEqual(s["ooms"], 1)
        self.assertEqual(s["lost"], 0)


if __name__ == "__main__":
    unittest.main()
