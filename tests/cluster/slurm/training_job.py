#!/usr/bin/env python3
"""A stand-in for a training job under the Slurm backend's end-to-end test.

It keeps the contract of docs/cluster.md ("Running on Slurm"): resumes from the checkpoint in
$PERSEUS_JOB_DIR, trains at the speed its node gives it (SPEEDS: lines "<node> <kind> <steps/s>
[<W>]") times the pace in $PERSEUS_JOB_DIR/pace (read again every step), writes its steps done to
$PERSEUS_JOB_DIR/progress, checkpoints every CHECKPOINT_S seconds and on SIGTERM (then exits 0),
and exits 0 once $PERSEUS_STEPS are done. Given a power W (at its fastest; W x pace at a pace), it
counts its energy in $PERSEUS_JOB_DIR/energy across restarts. Every start and stop is logged to
$PERSEUS_JOB_DIR/log for the test to read.

usage: training_job.py SPEEDS KIND [CHECKPOINT_S]
"""
import os
import signal
import sys
import time


def write_atomically(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    speeds_path, kind = sys.argv[1], sys.argv[2]
    checkpoint_every = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    job_dir, total = os.environ["PERSEUS_JOB_DIR"], float(os.environ["PERSEUS_STEPS"])
    node = os.environ["SLURMD_NODENAME"]
    rate, watts = None, None
    with open(speeds_path) as f:
        for line in f:
            fields = line.split()
            if len(fields) in (3, 4) and fields[0] == node and fields[1] == kind:
                rate = float(fields[2])
                watts = float(fields[3]) if len(fields) == 4 else None
    if rate is None:
        sys.exit(f"no speed for {kind} on {node} in {speeds_path}")

    def read_number(name, otherwise):
        try:
            with open(os.path.join(job_dir, name)) as f:
                return float(f.read())
        except (OSError, ValueError):
            return otherwise

    energy = read_number("energy", 0.0)
    checkpoint = os.path.join(job_dir, "checkpoint")
    steps = float(open(checkpoint).read()) if os.path.exists(checkpoint) else 0.0
    log = open(os.path.join(job_dir, "log"), "a", buffering=1)
    log.write(f"start {node} {steps:.6f}\n")
    write_atomically(os.path.join(job_dir, "progress"), f"{steps:.6f}\n")

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    last, last_checkpoint = time.monotonic(), time.monotonic()
    while steps < total and not stopping:
        time.sleep(0.05)
        now = time.monotonic()
        pace = read_number("pace", 1.0)
        steps = min(total, steps + rate * pace * (now - last))
        if watts is not None:
            energy += watts * pace * (now - last)
            write_atomically(os.path.join(job_dir, "energy"), f"{energy:.6f}\n")
        last = now
        write_atomically(os.path.join(job_dir, "progress"), f"{steps:.6f}\n")
        if now - last_checkpoint >= checkpoint_every:
            write_atomically(checkpoint, f"{steps:.6f}\n")
            last_checkpoint = now
    write_atomically(checkpoint, f"{steps:.6f}\n")
    log.write(f"{'done' if steps >= total else 'stop'} {node} {steps:.6f}\n")


if __name__ == "__main__":
    main()
