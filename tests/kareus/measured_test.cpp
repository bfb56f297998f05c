// The measured knob space of data/kareus (the Kareus authors' attention partition): read, looked
// up, and the emulated GPU calibrated against it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "perseus/kareus/measured.hpp"

namespace perseus::kareus {
namespace {

namespace fs = std::filesystem;
const fs::path kData = PERSEUS_SOURCE_DIR "/data/kareus";

TEST(KareusMeasured, ReadsBothFilesWithTheirMeansPerGpu) {
  const auto full = read_measured_space(kData / "attention-tp2-bs4-seq4096-default-clock.csv", 1410);
  const auto locked = read_measured_space(kData / "attention-tp2-bs4-seq4096-1200mhz.csv", 1200);
  EXPECT_EQ(full.size(), 640u);  // 16 windows x 20 SM counts x 2 block sizes
  EXPECT_EQ(locked.size(), 236u);
  // The first row: sequential (-1, -1), 1 SM, block 512; three repeats of time and both GPUs' energy.
  const MeasuredConfig& r = full.front();
  EXPECT_TRUE(r.config.sequential());
  EXPECT_EQ(r.config.comm_sms, 1);
  EXPECT_EQ(r.block_size, 512);
  EXPECT_EQ(r.config.clock_mhz, 1410);
  EXPECT_NEAR(r.time_s, (0.011560347686289139 + 0.011435330114332586 + 0.011429522098912905) / 3, 1e-15);
  EXPECT_NEAR(r.energy_j, (3.2940929451287793 + 3.3235587905935966 + 3.335851063828786) / 6, 1e-12);
  EXPECT_LT(r.spread, 0.01);
  // The partition they measured: 7 kernels, the windows index them.
  const Partition p = measured_attention_partition();
  ASSERT_EQ(p.compute.size(), 7u);
  for (const MeasuredConfig& m : full) EXPECT_LT(m.config.last, 7);
  EXPECT_TRUE(p.compute[0].memory_bound(planner::find_gpu("a100-sxm")));
  EXPECT_FALSE(p.compute[5].memory_bound(planner::find_gpu("a100-sxm")));
}

TEST(KareusMeasured, TheTableAnswersMeasuredConfigurationsOnly) {
  TableEvaluator table(read_measured_space(kData / "attention-tp2-bs4-seq4096-1200mhz.csv", 1200), 1024, 72.9);
  const Partition p = measured_attention_partition();
  const MeasuredConfig& row = table.rows().front();
  const Measurement m = table.evaluate(p, row.config);
  EXPECT_DOUBLE_EQ(m.time_s, row.time_s);
  EXPECT_NEAR(m.total_j(), row.energy_j, 1e-12);
  EXPECT_NEAR(m.static_j, 72.9 * row.time_s, 1e-12);
  EXPECT_THROW(table.evaluate(p, Config{1200, 3, 0, 2}), InputError);  // window 0..2 was not measured at 1200 MHz
  EXPECT_THROW(TableEvaluator(table.rows(), 256, 72.9), InputError);
}

TEST(KareusMeasured, CalibrationBringsTheEmulatedGpuWithinAFewPercent) {
  std::vector<MeasuredConfig> rows;
  for (const char* file : {"attention-tp2-bs4-seq4096-default-clock.csv", "attention-tp2-bs4-seq4096-1200mhz.csv"}) {
    for (const MeasuredConfig& r :
         read_measured_space(kData / file, std::string(file).find("1200") != std::string::npos ? 1200 : 1410)) {
      if (r.block_size == 1024) rows.push_back(r);
    }
  }
  const Calibration c = calibrate(planner::find_gpu("a100-sxm"), measured_attention_partition(), rows);
  EXPECT_GT(c.before.time_median, 0.5);  // the catalogue's GEMM efficiency is a large GEMM's, not these small ones'
  EXPECT_LT(c.after.time_median, 0.05);
  EXPECT_LT(c.after.energy_median, 0.05);
  EXPECT_GT(c.after.time_rank_correlation, 0.7);
  // And the schedule it calls fastest is nearly the measured fastest (averaged over the clocks).
  EXPECT_LT(c.after.fastest_pick_loss, c.before.fastest_pick_loss);
  EXPECT_LT(c.after.fastest_pick_loss, 0.04);
  EXPECT_LT(c.params.attention_efficiency, c.params.gemm_efficiency);  // attention runs below a GEMM's share of peak
  EXPECT_EQ(c.candidates, 3024u);
}

TEST(KareusMeasured, MalformedFilesNameTheLine) {
  const fs::path dir = fs::temp_directory_path() / ("perseus-kareus-measured-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  std::ofstream(dir / "bad.csv") << "overlap_start,overlap_end,comm_sm_number,comm_block_size,0:time (s),0:total energy (J)\n"
                                 << "-1,-1,4,1024,0.003,2.0\n"
                                 << "0,1,four,1024,0.003,2.0\n";
  try {
    read_measured_space(dir / "bad.csv", 1410);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv:3"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace perseus::kareus
