#!/usr/bin/env python3
"""Regenerates the figures in docs/ from perseus itself, so that none is typed by hand.

Each generated block in a Markdown file sits between
    <!-- begin generated: NAME -->  and  <!-- end generated: NAME -->
and is rewritten from what the commands below print; the report's figures go to docs/figures/.

    python3 scripts/regenerate_docs.py            # rewrite the blocks and figures
    python3 scripts/regenerate_docs.py --check    # exit 1 (naming the stale blocks) if any differs

Only deterministic figures are generated (savings, errors, energies); wall-clock timings stay
in the text with the command that measured them. Runs `build/perseus` unless $PERSEUS names
another binary; the measured runs are read from build/data/measured (CMake unpacks them).
About 40 s on a 2-core machine, most of it the large-scale table's 16 solves.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PERSEUS = os.environ.get("PERSEUS", str(ROOT / "build" / "perseus"))
MEASURED = ROOT / "build" / "data" / "measured"
BLOOM = ["--profile", "data/profiles/bloom-176b+a100-sxm.csv", "--microbatches", "12", "--p-blocking", "83.64",
         "--unit-time", "0.001"]


def perseus(*args):
    result = subprocess.run([PERSEUS, *args], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"regenerate_docs: perseus {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def pct(fraction, digits=2):
    return f"{100 * fraction:.{digits}f}%"


def straggler_table(comparison):
    methods = [m["method"] for m in comparison["stragglers"][0]["methods"] if m["method"] != "AllMax"]
    lines = ["| T'/T | " + " | ".join(methods) + " |", "| --- |" + " --- |" * len(methods)]
    for row in comparison["stragglers"]:
        cells = {m["method"]: (pct(m["savings_fraction"]) if m["available"] else "none") for m in row["methods"]}
        lines.append(f"| {row['ratio']:g} | " + " | ".join(cells[m] for m in methods) + " |")
    return "\n".join(lines)


def compare_summary(c):
    iso = {m["method"]: m for m in c["iso_time"]}
    perseus_points = next(len(m["points"]) for m in c["methods"] if m["method"] == "Perseus")
    saves = ", ".join(f"{name} {pct(iso[name]['savings_fraction'])}" for name in ("Perseus", "EnvPipe", "ZeusGlobal")
                      if iso[name]["available"])
    missing = [name for name in ("ZeusGlobal", "ZeusPerStage", "EnvPipe") if not iso[name]["available"] or
               iso[name]["savings_fraction"] <= 0.0]
    return (f"`perseus compare` on bloom-176b+a100-sxm, 8 x 12 (frontier of {perseus_points} plans): AllMax "
            f"{c['all_max']['time_s']:.4f} s, {c['all_max']['energy_j']:.1f} J per pipeline; at iso-time (within "
            f"AllMax's time) the savings are {saves}" +
            (f"; {', '.join(missing)} save nothing there" if missing else "") +
            f". T_min {c['t_min_s']:.4f} s, T* {c['t_star_s']:.4f} s.")


def large_scale_table(rows):
    by_workload, columns = {}, {}
    for r in rows:
        by_workload.setdefault(r["workload"], {})[r["microbatches"]] = r
        columns[r["microbatches"]] = r["gpus"]
    ms = sorted(columns)
    head = " | ".join(f"{m} mb, {columns[m]:,} GPUs" for m in ms)
    lines = [f"| profile | {head} |", "| --- |" + " --- |" * len(ms)]
    for workload, cells in by_workload.items():
        lines.append(f"| {workload} | " + " | ".join(pct(cells[m]["savings_fraction"]) for m in ms) + " |")
    return "\n".join(lines)


def measured_tables():
    errors = ["| workload | runs | time median | time worst | energy median | energy worst | energy fit residual (rms) |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    terms = {}
    for workload in ("a100-pp4-gpt3-xl", "a100-pp4-bloom-3b"):
        v = json.loads(perseus("runs", "validate", str(MEASURED / workload), "--json"))
        errors.append(f"| {workload} | {len(v['runs'])} | {pct(v['time_error']['median'])} | "
                      f"{pct(v['time_error']['worst'])} | {pct(v['energy_error']['median'])} | "
                      f"{pct(v['energy_error']['worst'])} | {pct(v['energy_fit_rms_residual'])} |")
        terms[workload] = v["term_steps"]
    steps = ["| terms | gpt3-xl (median signed / median / worst) | bloom-3b |", "| --- | --- | --- |"]
    for i, step in enumerate(terms["a100-pp4-gpt3-xl"]):
        cells = []
        for workload in ("a100-pp4-gpt3-xl", "a100-pp4-bloom-3b"):
            s = terms[workload][i]
            cells.append(f"{100 * s['median_time_error']:+.2f}% / {pct(s['median_abs_time_error'])} / "
                         f"{pct(s['worst_abs_time_error'])}")
        steps.append(f"| {step['terms']} | " + " | ".join(cells) + " |")
    return "\n".join(errors), "\n".join(steps)


def training_run_table(frontier):
    cases = [("30 % of iterations, random pipeline, ×1.05-1.5", "0",
              ["--straggler-slowdown", "1.05:1.5", "--straggler-probability", "0.3"]),
             ("same", "2 %", ["--straggler-slowdown", "1.05:1.5", "--straggler-probability", "0.3", "--noise", "0.02"]),
             ("every iteration ×1.2, moving every 10 iterations", "0",
              ["--straggler-slowdown", "1.2", "--straggler-placement", "moving", "--straggler-move-every", "10"])]
    lines = ["| stragglers | noise | Perseus vs AllMax | Perseus vs its fastest plan everywhere | "
             "Perseus's time vs fastest everywhere |", "| --- | --- | --- | --- | --- |"]
    for name, noise, flags in cases:
        r = json.loads(perseus("emulate", "--frontier", frontier, "--data-parallel", "16", "--tensor-parallel", "8",
                               "--iterations", "100", *flags, "--json", "-q"))
        t = r["totals"]
        slower = t["perseus"]["time_s"] / t["fastest_everywhere"]["time_s"] - 1
        lines.append(f"| {name} | {noise} | −{pct(r['savings_vs_baseline'])} energy | "
                     f"−{pct(r['savings_vs_fastest_everywhere'])} | "
                     f"{'equal' if abs(slower) < 5e-5 else f'{100 * slower:+.2f}%'} |")
    return "\n".join(lines)


def replace_block(text, name, body, path):
    pattern = re.compile(rf"(<!-- begin generated: {re.escape(name)} -->)\n(.*?)\n?(<!-- end generated: {re.escape(name)} -->)",
                         re.S)
    if not pattern.search(text):
        sys.exit(f"regenerate_docs: {path} has no block '{name}'")
    return pattern.sub(lambda m: m.group(1) + "\n" + body + "\n" + m.group(3), text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale blocks and figures (exit 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("regenerate_docs: report with the large-scale table (16 solves)...", file=sys.stderr)
        perseus("report", *BLOOM, "--large-scale", "--out", f"{tmp}/report.html", "--assets", f"{tmp}/assets", "-q")
        comparison = json.loads(Path(f"{tmp}/assets/comparison.json").read_text())
        perseus("optimize", *BLOOM, "--out", f"{tmp}/frontier", "-q")
        print("regenerate_docs: measured runs, training runs...", file=sys.stderr)
        errors, steps = measured_tables()
        blocks = {
            "docs/emulator.md": {
                "compare-summary": compare_summary(comparison),
                "straggler-table": straggler_table(comparison),
                "large-scale-table": large_scale_table(comparison["large_scale"]),
                "measured-errors": errors,
                "measured-terms": steps,
                "training-run": training_run_table(f"{tmp}/frontier"),
            }
        }
        figures = {name: Path(f"{tmp}/assets/{name}.svg").read_text()
                   for name in ("frontier", "savings_breakdown", "straggler_savings", "large_scale")}
    stale = []
    for rel, named in blocks.items():
        path = ROOT / rel
        text = path.read_text()
        new = text
        for name, body in named.items():
            updated = replace_block(new, name, body, rel)
            if updated != new:
                stale.append(f"{rel}: {name}")
            new = updated
        if new != text and not args.check:
            path.write_text(new)
    for name, svg in figures.items():
        path = ROOT / "docs" / "figures" / f"{name}.svg"
        if not path.exists() or path.read_text() != svg:
            stale.append(f"docs/figures/{name}.svg")
            if not args.check:
                path.write_text(svg)
    if args.check:
        if stale:
            print("regenerate_docs: stale (run python3 scripts/regenerate_docs.py):\n  " + "\n  ".join(stale),
                  file=sys.stderr)
            return 1
        print("regenerate_docs: every generated block and figure is current", file=sys.stderr)
        return 0
    print("regenerate_docs: " + (("rewrote " + ", ".join(stale)) if stale else "nothing changed"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
