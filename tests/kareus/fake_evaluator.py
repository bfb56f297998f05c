#!/usr/bin/env python3
"""A stand-in for real GPU profiling, speaking the external evaluator's JSON lines.

Answers each configuration with a made-up but deterministic time and energy, and misbehaves on
request after N answers: --crash-after N (exits 3), --hang-after N (sleeps), --garbage-after N
(prints a line that is not JSON), --error-after N (answers {"error": ...}), --bad-after N
(answers without numbers). Used by tests/kareus/external_evaluator_test.cpp and cli_test.cpp.
"""
import json
import sys
import time

mode, after = None, None
if len(sys.argv) == 3:
    mode, after = sys.argv[1], int(sys.argv[2])

answered = 0
for line in sys.stdin:
    request = json.loads(line)
    if mode is not None and answered >= after:
        if mode == "--crash-after":
            sys.exit(3)
        if mode == "--hang-after":
            time.sleep(60)
        if mode == "--garbage-after":
            print("Traceback (most recent call last): oops", flush=True)
            continue
        if mode == "--error-after":
            print(json.dumps({"error": "GPU 3 fell off the bus"}), flush=True)
            continue
        if mode == "--bad-after":
            print(json.dumps({"time_s": "soon"}), flush=True)
            continue
    clock = request["clock_mhz"]
    sms = request["comm_sms"]
    overlap = 0 if request["first"] < 0 else request["last"] - request["first"] + 1
    time_s = 1e-3 * (1410.0 / clock) * (1.0 + 0.5 / sms) / (1.0 + 0.1 * overlap)
    print(json.dumps({"time_s": time_s, "dynamic_j": 300.0 * (clock / 1410.0) ** 2 * time_s,
                      "static_j": 70.0 * time_s}), flush=True)
    answered += 1
