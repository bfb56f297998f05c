#!/usr/bin/env python3
"""What `perseus select --exact SECONDS` buys on the published cases (docs/solver.md, "The exact
MILP at a chosen deadline"): for each case, `perseus optimize` at the README's settings, then
the exact MILP at three deadlines of its frontier: T_min, iso-time (the all-max plan's time) and
the point furthest above its bound. Prints a markdown table (or CSV) of the gaps to the bound
before and after and of the energy CBC saved. Timed (CBC stops at its limit), so the figures
depend on the machine and on what else runs on it.

    python3 bench/exact_milp_bench.py [--seconds 10] [--cases bloom-176b+a100-sxm:12,...] [--csv]
                                      [--build DIR]
"""
import argparse
import csv
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_CASES = ("bloom-176b+a100-sxm:12,bloom-176b+a100-sxm:24,bloom-176b+a100-sxm:48,gpt3-175b+a100-sxm:24,"
                 "bloom-176b+a40:12,bloom-176b+a40:24,gpt3-175b+a40:12,gpt3-175b+a40:24,gpt3-175b+a40:48,"
                 "gpt3-175b+a40:96")


def run(args):
    return subprocess.run(args, capture_output=True, text=True, check=True, cwd=ROOT).stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="CBC's limit per deadline")
    parser.add_argument("--cases", default=DEFAULT_CASES, help="profile:microbatches, comma separated")
    parser.add_argument("--csv", action="store_true", help="CSV instead of a markdown table")
    parser.add_argument("--build", default="build", help="the CMake build directory")
    opts = parser.parse_args()
    perseus = str(ROOT / opts.build / "perseus")
    out = csv.writer(sys.stdout) if opts.csv else None
    if out:
        out.writerow(["case", "deadline", "time_s", "energy_before_j", "energy_after_j", "gap_before", "gap_after",
                      "proven_optimal", "seconds"])
    else:
        print("| case | `T_min`: gap to its bound | iso-time | widest gap |")
        print("| --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as work:
        for case in opts.cases.split(","):
            profile, microbatches = case.split(":")
            a40 = "a40" in profile
            directory = f"{work}/{profile}-{microbatches}"
            run([perseus, "optimize", "--profile", f"data/profiles/{profile}.csv", "--stages", "8", "--microbatches",
                 microbatches, "--p-blocking", "70.38" if a40 else "83.64", "--unit-time", "0.0001" if a40 else "0.001",
                 "--out", directory, "-q"])
            summary = json.load(open(f"{directory}/summary.json"))
            rows = list(csv.DictReader(open(f"{directory}/frontier.csv")))
            worst = max(range(len(rows)), key=lambda i: float(rows[i]["gap"]))
            name = f"{profile.split('-')[0]} {'A40' if a40 else 'A100'} 8 × {microbatches}"
            t_min = float(rows[0]["time"])
            cells = []
            for deadline_name, deadline in (("T_min", t_min), ("iso-time", summary["all_max"]["time_s"]),
                                            ("widest gap", float(rows[worst]["time"]))):
                if deadline_name == "iso-time" and abs(deadline - t_min) < 1e-6:
                    cells.append("as T_min")
                    continue
                chosen = json.loads(run([perseus, "select", "--frontier", directory, "--deadline", repr(deadline),
                                         "--exact", str(opts.seconds), "--json"]))
                exact = chosen["exact"]
                row = rows[chosen["point"]]
                before, after = chosen["energy_at_requested_j"], exact["energy_at_requested_j"]
                # The frontier's bound holds at its point's own time: compared only there.
                at_point = abs(float(row["time"]) - deadline) < 1e-12
                gap_before = float(row["energy"]) / float(row["lower_bound"]) - 1 if at_point else None
                gap_after = exact["gap_fraction"]
                if out:
                    out.writerow([name, deadline_name, deadline, before, after, gap_before, gap_after,
                                  exact["proven_optimal"], exact["seconds"]])
                    continue
                change = 100 * (after / before - 1)
                if gap_before is None:
                    cells.append(f"{change:+.2f}% energy, gap {100 * gap_after:.3f}%".replace("-", "−"))
                else:
                    cells.append(f"{100 * gap_before:.3f}% → {100 * gap_after:.3f}%" +
                                 (f" ({change:+.2f}% energy)".replace("-", "−") if change < -0.0005 else ""))
            if not out:
                print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
