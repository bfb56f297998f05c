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
About a minute on a 2-core machine, most of it the large-scale table's 16 solves, the
planner's 8 and the 648 emulations of the switching counts.
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


# The bundled profiles and their settings: p_blocking (W), unit time (s), and the synthetic
# profile's stage boundaries (docs/planner.md: ceil(L/8) Transformer layers a stage, the rest
# on the last, the embedding first and the LM head last).
PROFILES = {
    "gpt3-175b+a100-sxm": ("83.64", "0.001", "13,25,37,49,61,73,85"),
    "bloom-176b+a100-sxm": ("83.64", "0.001", "10,19,28,37,46,55,64"),
    "gpt3-175b+a40": ("70.38", "0.0001", "13,25,37,49,61,73,85"),
    "bloom-176b+a40": ("70.38", "0.0001", "10,19,28,37,46,55,64"),
}
# Each GPU's energy model is fitted on both of its profiles; the A40's also fits the
# collectives' bandwidth (docs/planner.md says why).
CALIBRATIONS = {"a100-sxm": [], "a40": ["--fit-collective"]}
GPU_LABELS = {"a100-sxm": "A100-SXM", "a40": "A40"}
MODEL_LABELS = {"gpt3": "GPT-3", "bloom": "BLOOM"}


def calibrate(profiles, extra=(), held_out=()):
    args = [a for name in profiles for a in ("--profile", f"data/profiles/{name}.csv")]
    args += [a for name in held_out for a in ("--held-out", f"data/profiles/{name}.csv")]
    return json.loads(perseus("calibrate", *args, *extra, "--json"))


def calibration_tables():
    rows = ["| profile | time median | time p90 | time max | energy median | energy p90 | energy max |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    held = []
    for gpu, extra in CALIBRATIONS.items():
        names = [name for name in PROFILES if name.endswith("+" + gpu)]
        fitted = calibrate(names, extra)
        for name in names:
            e = fitted["profiles"][name]
            rows.append(f"| {name} ({e['time']['rows']} rows) | " + " | ".join(
                pct(e[kind][q], 1) for kind in ("time", "energy") for q in ("median", "p90", "max")) + " |")
        # Held out: fit on one model, predict the other.
        pairs = []
        for fit, other in ((names[0], names[1]), (names[1], names[0])):
            e = calibrate([fit], extra, [other])["held_out"][other]
            pairs.append(f"fit on {MODEL_LABELS[fit.split('-')[0]]} → {MODEL_LABELS[other.split('-')[0]]} time median {pct(e['time']['median'], 1)} "
                         f"(p90 {pct(e['time']['p90'], 1)}), energy median {pct(e['energy']['median'], 1)} "
                         f"(p90 {pct(e['energy']['p90'], 1)})")
        held.append(f"{GPU_LABELS[gpu]}: " + "; ".join(pairs))
    sentence = "Held out (fit on one model, predict the other, same GPU): " + ". ".join(held) + "."
    return "\n".join(rows), sentence


def frontier_check_table(tmp):
    rows = ["| profile | T_min (s) | T* (s) | energy at T* (J) | least energy per iteration (s / J) | savings at T_min |",
            "| --- | --- | --- | --- | --- | --- |"]
    for name, (p_blocking, unit_time, boundaries) in PROFILES.items():
        model, gpu = name.split("+")
        solve = ["--stages", "8", "--microbatches", "12", "--p-blocking", p_blocking, "--unit-time", unit_time, "-q"]
        synthetic = f"{tmp}/{name}-synthetic.csv"
        perseus("profile", "synth", "--model", model, "--gpu", gpu, "--stages", "8", "--tensor-parallel", "8",
                "--boundaries", boundaries, "--out", synthetic)
        summaries = []
        for label, profile in (("measured", f"data/profiles/{name}.csv"), ("synthetic", synthetic)):
            perseus("optimize", "--profile", profile, *solve, "--out", f"{tmp}/{name}-{label}")
            summaries.append(json.loads(Path(f"{tmp}/{name}-{label}/summary.json").read_text()))
        m, s = summaries
        unit = " (τ 0.1 ms)" if unit_time == "0.0001" else ""
        least = lambda x: f"{x['least_energy']['time_s']:.3f} / {x['least_energy']['energy_j']:.0f}"
        rows.append(f"| {name}{unit} | {m['t_min_s']:.3f} → {s['t_min_s']:.3f} | {m['t_star_s']:.3f} → "
                    f"{s['t_star_s']:.3f} | {m['energy_at_t_star_j']:.0f} → {s['energy_at_t_star_j']:.0f} | "
                    f"{least(m)} → {least(s)} | {pct(m['savings_at_t_min_fraction'], 1)} → "
                    f"{pct(s['savings_at_t_min_fraction'], 1)} |")
    return "\n".join(rows)


def switching_counts(frontier):
    """Every plan of the frontier emulated with 10 ms clock switches: how many switch late, how
    many the emulator warns about, and the largest delay (about 40 ms a plan)."""
    import csv
    with open(f"{frontier}/frontier.csv") as f:
        times = [row["time"] for row in csv.DictReader(f)]
    late = warned = 0
    worst = 0.0
    for t in times:
        run = json.loads(perseus("emulate", "--frontier", frontier, "--deadline", t, "--switch-latency", "0.01", "--json"))
        late += run["switching"]["late"] > 0
        warned += any("switches frequency more often" in w for w in run["warnings"])
        worst = max(worst, run["switching"]["delay_s"] / run["iteration_time_s"])
    return (f"bloom-176b+a100-sxm, 8 x 12: {late} of {len(times)} plans late, {warned} warned, the largest delay "
            f"{pct(worst)} of the iteration")


def perseus_error(*args):
    """What a command that must fail prints on stderr (it must fail with status 2)."""
    result = subprocess.run([PERSEUS, *args], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 2:
        sys.exit(f"regenerate_docs: perseus {' '.join(args)} was to fail with status 2, got {result.returncode}")
    return result.stderr.strip()


def plan_examples():
    """docs/planner.md's `perseus plan` examples: the output (abridged), the 2BW comparison and
    two refusals, as the commands print them."""
    import textwrap
    gpt13 = ["plan", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--gpus", "64", "--global-batch", "1024", "-q"]
    lines = perseus(*gpt13).splitlines()
    frontier = next(i for i, line in enumerate(lines) if line.startswith("Frontier:"))
    keep = lines[:3] + ["..."] + [lines[frontier]] + [line for line in lines if line.lstrip().startswith("at T_min:")] + \
        [line for line in lines if line.lstrip().startswith("slowdown 1.10:")]
    example = "```\n" + "\n".join(keep) + "\n```"

    def figures(output):
        config = re.search(r"Configuration: (\S+ \S+ \S+ \S+ \S+) \S+ +\(estimated [0-9.]+ s an iteration, ([0-9.]+) GiB",
                           output)
        t_min = re.search(r"T_min ([0-9.]+) s", output)
        at = re.search(r"at T_min: ([0-9.]+) J instead of ([0-9.]+) J all-max: saves [0-9.]+ J \(([0-9.]+%)\)", output)
        return config.group(1), config.group(2), t_min.group(1), at.group(1), at.group(2), at.group(3)

    flush = figures("\n".join(lines))
    bw = figures(perseus(*gpt13, "--schedule", "pipedream-2bw"))
    two_bw = (f"With `--schedule pipedream-2bw` the same configuration ({bw[0]}, {bw[1]} GiB per GPU with two "
              f"weight versions) has no flush: T_min {bw[2]} s instead of {flush[2]} s, {bw[3]} J instead of "
              f"{bw[4]} J all-max at T_min ({bw[5]}).")
    refusals = []
    for extra, gpus in ((["-p", "64"], "64"), ([], "63")):
        args = ["plan", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--gpus", gpus, "--global-batch", "1024", *extra]
        refusals.append("$ perseus " + " ".join(args))
        refusals += textwrap.wrap(perseus_error(*args, "-q"), 100, break_long_words=False, break_on_hyphens=False)
    return example, textwrap.fill(two_bw, 96), "```\n" + "\n".join(refusals) + "\n```"


def ptdp_flops(batch, layers, hidden, seq=2048, vocab=51200):
    """The dissertation's equation 4.2: an iteration's FLOPs with recomputation (its extra forward)."""
    return 96 * batch * seq * layers * hidden ** 2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


def ptdp_table():
    """docs/planner.md's published PTD-P runs (data/published/ptdp.csv) beside the planner's
    estimates, from `perseus calibrate --published --json`: at the published shape (t, p and,
    where published, b fixed; the rest the fastest, with recomputation and the interleaved
    schedule where it helps, as the runs ran), the same left out of the time model's fit, and
    the planner's own pick under the runs' schedules; and the pick of a plain `perseus plan`
    (1F1B, free to drop recomputation). All as TFLOP/s per GPU by equation 4.2 (the same work:
    a pick without recomputation is faster, not more work)."""
    import csv
    with open(ROOT / "data" / "published" / "ptdp.csv") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    fit = json.loads(perseus("calibrate", "--published", str(ROOT / "data" / "published" / "ptdp.csv"), "--json"))
    out = ["| source | model | GPUs | batch | published t, p, b | TFLOP/s published | planner at that shape | ratio | "
           "held out | planner's pick, as the runs ran | pick / shape | `perseus plan`'s pick | pick / shape |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ratios, held, picks, free_picks, far = [], [], [], [], []

    def short(configuration):  # "t=8 p=12 d=4 b=1 m=384 interleaved-1f1b-recompute v=4" -> "t=8 p=12 d=4 b=1 v=4"
        words = configuration.split()
        kept = [w for w in words if w[:2] in ("t=", "p=", "d=", "b=", "v=")]
        return " ".join(kept) + ("" if "recompute" in configuration else " no recompute")

    for r, fitted in zip(rows, fit["runs"]):
        shape = ["--layers", r["layers"], "--hidden", r["hidden"], "--heads", r["heads"]]
        base = ["plan", *shape, "--gpu", "a100-sxm", "--gpus", r["gpus"], "--global-batch", r["global_batch"], "--no-solve",
                "--json", "-q"]
        flops = ptdp_flops(int(r["global_batch"]), int(r["layers"]), int(r["hidden"]))
        gpus = int(r["gpus"])
        c = json.loads(perseus(*base))["configuration"]
        own = flops / (c["iteration_time_s"] * gpus) / 1e12
        free = (f"t={c['tensor']} p={c['pipeline']} d={c['data']} b={c['microbatch_size']}"
                f"{'' if c['recompute'] else ' no recompute'}")
        at_shape = fitted["estimated_tflops_per_gpu"]
        ratios.append(fitted["ratio"])
        held.append(fitted["held_out_ratio"])
        picks.append(fitted["pick_over_shape"])
        free_picks.append(own / at_shape)
        if picks[-1] > 1.05:
            far.append(f"{float(r['parameters_b']):g}B on {gpus:,} ({short(fitted['pick'])}, {100 * (picks[-1] - 1):.0f}%)")
        published = f"{r['tensor']}, {r['pipeline'] or '?'}, {r['microbatch'] or '?'}"
        out.append(f"| {r['source']} | {float(r['parameters_b']):g}B | {gpus:,} | {int(r['global_batch']):,} | {published} | "
                   f"{r['tflops_per_gpu']} | {at_shape:.0f} ({short(fitted['configuration'])}) | {ratios[-1]:.2f} | "
                   f"{held[-1]:.2f} | {short(fitted['pick'])} | {picks[-1]:.2f} | {free} | {free_picks[-1]:.2f} |")
    out.append("")
    f = fit["fit"]
    out.append(f"The A100's time model fitted to these runs: matrix multiplies at {f['gemm_efficiency']:.3f} of the peak "
               f"(half width {f['gemm_half_width']:.1f}), bandwidth-bound traffic {f['memory_factor']:.2f} passes, "
               f"collectives at {f['collective_scale']:.3f} of the link's bus bandwidth (rms log error "
               f"{100 * fit['rms_log_error']:.1f}%; these are a refit from the shipped values, which it reproduces "
               f"within its convergence).")
    out.append("")
    out.append(f"Planner over published at the published shapes: median {sorted(ratios)[len(ratios) // 2]:.2f}, from "
               f"{min(ratios):.2f} to {max(ratios):.2f} ({len(ratios)} runs); each left out of the fit: from "
               f"{min(held):.2f} to {max(held):.2f}. As the runs ran (recomputation, interleaving where it helps), the "
               f"planner's pick is within 5% of the published shape for {sum(p <= 1.05 for p in picks)} of {len(picks)} "
               f"runs" + (f"; not for {', '.join(far)}" if far else "") +
               f". `perseus plan` (1F1B, free to drop recomputation) picks configurations it estimates "
               f"{min(free_picks):.2f} to {max(free_picks):.2f} times the published shape.")
    return "\n".join(out)


def ptdp_guidance():
    """docs/planner.md: the planner on the dissertation's Section 4.5.4 comparisons (Figures
    4.13-4.15: 64 A100s, microbatch 1), as samples per second at fixed t and p, 1F1B with
    recomputation. The figures are plots; what they state is which configuration is fastest."""
    def rate(layers, hidden, heads, batch, t, p):
        c = json.loads(perseus("plan", "--layers", str(layers), "--hidden", str(hidden), "--heads", str(heads),
                               "--gpu", "a100-sxm", "--gpus", "64", "--global-batch", str(batch), "-t", str(t),
                               "-p", str(p), "-b", "1", "--schedule", "1f1b-recompute", "--no-solve", "--json",
                               "-q"))["configuration"]
        return batch / c["iteration_time_s"]
    cases = [("Figure 4.13: 161B (32 layers, hidden 20480), t x p = 64; published: fastest at t = 8",
              lambda b, k: rate(32, 20480, 128, b, k, 64 // k), "(t, p)", lambda k: f"({k}, {64 // k})"),
             ("Figure 4.14: 5.9B (32 layers, hidden 3840), t = 1; published: slower as p grows",
              lambda b, k: rate(32, 3840, 32, b, 1, k), "(p, d)", lambda k: f"({k}, {64 // k})"),
             ("Figure 4.15: 5.9B, p = 1; published: slower as t grows",
              lambda b, k: rate(32, 3840, 32, b, k, 1), "(t, d)", lambda k: f"({k}, {64 // k})")]
    out = []
    for title, f, label, name in cases:
        out.append(f"{title}. Samples per second, the planner:")
        out.append("")
        out.append(f"| batch | " + " | ".join(f"{label} = {name(k)}" for k in (2, 4, 8, 16, 32)) + " |")
        out.append("| --- " * 6 + "|")
        for batch in (32, 128, 512):
            rates = [f(batch, k) for k in (2, 4, 8, 16, 32)]
            best = max(rates)
            out.append(f"| {batch} | " + " | ".join(f"**{r:.1f}**" if r == best else f"{r:.1f}" for r in rates) + " |")
        out.append("")
    return "\n".join(out).rstrip()


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
        print("regenerate_docs: the planner's calibration and frontier checks (8 solves), switching counts...",
              file=sys.stderr)
        calibration_table, held_out = calibration_tables()
        example, two_bw, refusals = plan_examples()
        blocks = {
            "docs/planner.md": {
                "calibration-errors": calibration_table,
                "calibration-held-out": held_out,
                "frontier-check": frontier_check_table(tmp),
                "plan-example": example,
                "plan-2bw": two_bw,
                "plan-refusals": refusals,
                "ptdp-published": ptdp_table(),
                "ptdp-guidance": ptdp_guidance(),
            },
            "docs/emulator.md": {
                "compare-summary": compare_summary(comparison),
                "straggler-table": straggler_table(comparison),
                "large-scale-table": large_scale_table(comparison["large_scale"]),
                "measured-errors": errors,
                "measured-terms": steps,
                "training-run": training_run_table(f"{tmp}/frontier"),
                "switching-counts": switching_counts(f"{tmp}/frontier"),
            }
        }
        figures = {name: Path(f"{tmp}/assets/{name}.svg").read_text()
                   for name in ("frontier", "savings_breakdown", "straggler_savings", "large_scale",
                                "large_scale_energy")}
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
