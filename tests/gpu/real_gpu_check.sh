#!/usr/bin/env bash
# The NVML path on a real NVIDIA GPU (not part of the test suite: it needs the driver and,
# to lock clocks, root). Usage, from the repository root:
#
#   bash tests/gpu/real_gpu_check.sh [BUILD_DIR]      # default BUILD_DIR: build
#
# 1. perseus_gpu_probe: lists every device (name, clocks, power, energy counter), locks
#    device 0 at its middle clock for 500 ms, reads power and energy, resets. Exit status 0
#    when every step worked; the JSON says which step failed otherwise.
# 2. perseus_gpu_client_check: the C++ client on NVML against an in-process server (a
#    two-instruction plan: the highest and the middle clock), three steps, each instruction
#    held 200 ms; checks that the controller locked each planned clock and that the energy
#    counter advanced, and prints the power it measured per instruction. Needs nothing but
#    the binary and the driver (a bare GPU host: copy build/tests/gpu/perseus_gpu_client_check).
# 3. The same through the Python module (perseus.Client), where it was built.
# Closing a client resets the clocks. An HBM GPU (A100, H100) cannot lock its memory clock:
# the controller goes on without (memory_clock_locked: false in the check's JSON).
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
if [ ! -x "$build/src/perseus/gpu/perseus_gpu_probe" ] || [ ! -x "$build/tests/gpu/perseus_gpu_client_check" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build" --target perseus_gpu_probe perseus_gpu_client_check perseus_python -j "$(nproc)"
fi

echo "== perseus_gpu_probe"
status=0
"$build/src/perseus/gpu/perseus_gpu_probe" --hold-ms 500 || status=$?
echo "probe exit status: $status"

echo "== the client on NVML (C++)"
"$build/tests/gpu/perseus_gpu_client_check" --steps 3 --hold-ms 200 || status=$?

if [ ! -d "$build/python/perseus" ]; then
  echo "no Python module in $build/python: skipping the Python client"
  exit "$status"
fi
echo "== the client on NVML (Python)"
PYTHONPATH="$PWD/$build/python" /usr/bin/python3 - <<'EOF'
import json, os, tempfile, time
import perseus

gpu = perseus.NvmlGpu()
clocks = gpu.supported_graphics_clocks(0)
high, middle = clocks[0], clocks[len(clocks) // 2]
plan = os.path.join(tempfile.mkdtemp(), "freqs_pipeline_00000.py")
with open(plan, "w") as f:
    f.write(f"[\n[('forward', {high}), ('backward', {middle})],\n]\n")
report = {"device": gpu.name(0), "memory_clock_max_mhz": gpu.max_memory_clock(0), "plan_mhz": [high, middle]}
with perseus.Server("PointSolution", {"solution_path": plan}) as server:
    client = perseus.Client(gpu, server.url, 0, 0, 0, 0, 1, 1, 1, 1, steps_per_round=3)
    locked = []
    for step in range(3):
        client.on_step_begin()
        for name, mhz in client.schedule:
            client.on_instruction_begin(name)
            client.wait_for_clock()
            locked.append(client.current_frequency)
            time.sleep(0.2)  # the "instruction": the GPU idles at the locked clock
            client.on_instruction_end(name)
        if step < 2:
            client.on_step_end()
    measured = client.pending_result()
    client.on_step_end()
    client.close()  # resets the graphics and memory clocks
report["locked_mhz"] = locked
report["locks_as_planned"] = locked == [high, middle] * 3
report["time_breakdown_s"] = measured["time_breakdown"]
report["energy_breakdown_j"] = measured["energy_breakdown"]
report["stats"] = client.stats()
print(json.dumps(report, indent=2))
assert report["locks_as_planned"], "the controller did not lock the planned clocks"
assert all(e > 0 for it in measured["energy_breakdown"]["forward"] for e in it), "the energy counter did not advance"
print("client check: OK")
EOF
exit "$status"
