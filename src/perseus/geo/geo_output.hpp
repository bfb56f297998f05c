// What `perseus geo` writes: the emulation as JSON, the timeline as CSV (computations,
// transfers and prefills, one row each) and as a Chrome trace that ui.perfetto.dev opens (one
// process per pipeline with a thread per stage, a process of WAN and DC links with a thread per
// channel, prefills on the GPUs they ran on).
#pragma once

#include <string>

#include "perseus/geo/bubbletea.hpp"
#include "perseus/geo/dc_selection.hpp"
#include "perseus/geo/fill_or_slow.hpp"
#include "perseus/geo/pipeline_emulator.hpp"
#include "perseus/geo/reproduce.hpp"

namespace perseus::geo {

// At thousands of GPUs the pipelines of a scheduler behave alike (Varuna's all, Atlas's cell by
// cell), and a trace of every one is hundreds of MB: the per-GPU detail of emulation.json and
// the trace keep the first `detail_pipelines` (timeline.csv keeps everything).
inline constexpr int kDetailPipelines = 8;

// Summary and per-stage figures; with `detail`, every computation of the first
// `detail_pipelines` pipelines too.
std::string emulation_json(const GeoEmulation& emulation, const Workload& workload, const NetworkSpec& network,
                           bool detail, int detail_pipelines = kDetailPipelines);
// `pipeline,stage,dc,what,microbatch,start_s,end_s,bytes`: computations (forward, backward,
// recompute), transfers (activation, gradient: start is when the sender finished, end the
// arrival), all-reduces, and prefills (`prefills` may be null; their microbatch is the request).
std::string timeline_csv(const GeoEmulation& emulation, const BubbleTeaResult* prefills);
// Times in microseconds; the first `detail_pipelines` pipelines, their links and prefills (those
// of the first `trace_iterations` iterations), and every stage's all-reduce.
std::string chrome_trace(const GeoEmulation& emulation, const BubbleTeaResult* prefills, int trace_iterations = 1,
                         int detail_pipelines = kDetailPipelines);
std::string dc_selection_json(const DcSelection& selection, const NetworkSpec& network);
std::string bubbletea_json(const BubbleTeaResult& result, const GeoEmulation& training, bool detail);
// Figs. 8-11, BubbleTea's rates and fill or slow, as `perseus geo reproduce --json` prints them.
std::string reproduce_json(const GeoEvaluation& evaluation);
// The policies side by side; with `detail`, every bubble and its choice.
std::string fill_or_slow_json(const FillOrSlowResult& result, bool detail);

}  // namespace perseus::geo
