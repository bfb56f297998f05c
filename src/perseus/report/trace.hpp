// The emulated timeline as a Chrome trace (the JSON Trace Event Format), which
// ui.perfetto.dev and chrome://tracing open: one process per pipeline, one thread per stage.
#pragma once

#include <ostream>

#include "perseus/emulator/emulator.hpp"

namespace perseus::report {

struct TraceOptions {
  bool power_counters = true;  // a counter track of each stage's power per GPU (W)
  bool transfers = true;       // transfers on links, one thread per link
};

// {"displayTimeUnit": "ms", "otherData": {...}, "traceEvents": [...]}, of the pipelines that
// kept their timeline (EmulationResult::detailed_pipelines): "X" events for instructions (args: microbatch, chunk, frequency, clock at start, power, energy per GPU,
// switch outcome, whether it is on the critical path), transfers and gradient all-reduces
// (a process of their own), "C" events for power, "M" events naming processes and threads.
// Times in microseconds.
void write_chrome_trace(std::ostream& out, const EmulationResult& result, const TraceOptions& options = {});

}  // namespace perseus::report
