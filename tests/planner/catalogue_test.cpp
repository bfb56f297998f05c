// The catalogues and the per-layer closed forms: parameter counts against the published sizes
// (and torchvision's exact ResNet counts), FLOPs and activation memory against the formulas of
// Narayanan et al. (SC'21) and Korthikanti et al. (MLSys'23).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/planner/catalogue.hpp"
#include "perseus/planner/layers.hpp"

namespace perseus::planner {
namespace {

double params_of(const ModelSpec& model) { return total_parameters(model_layers(model, Workload{})); }

TEST(Catalogue, ParameterCountsMatchThePublishedSizes) {
  for (const ModelSpec& model : model_catalogue()) {
    if (model.published_parameters <= 0.0) continue;
    // Published sizes are rounded (e.g. "13B", "340M"): 6% covers T5-large's 737M vs "770M".
    EXPECT_NEAR(params_of(model) / model.published_parameters, 1.0, 0.06) << model.name;
  }
  EXPECT_NEAR(params_of(find_model("gpt3-175b")), 174.6e9, 0.1e9);   // 12*96*12288^2 + embeddings
  EXPECT_NEAR(params_of(find_model("bloom-176b")), 176.25e9, 0.1e9);  // BLOOM paper: 176,247M
  EXPECT_NEAR(params_of(find_model("llama3-8b")), 8.03e9, 0.01e9);
  EXPECT_NEAR(params_of(find_model("llama3-70b")), 70.55e9, 0.05e9);
  EXPECT_NEAR(params_of(find_model("bert-large")), 336e6, 2e6);
}

TEST(Catalogue, GptsGivenByTheirShapeHaveThePublishedPtdpSizes) {
  // data/published/ptdp.csv: each published run's model (layers, hidden, heads), as a GPT given
  // by its shape, against the size the dissertation prints for it (equation 4.3: 12lh^2 + 13lh
  // + (V + s)h, V = 51,200, s = 2048; printed to 0.1 billion).
  std::ifstream in(std::string(PERSEUS_SOURCE_DIR) + "/data/published/ptdp.csv");
  ASSERT_TRUE(in) << "data/published/ptdp.csv";
  int rows = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("source,", 0) == 0) continue;
    std::vector<std::string> cells;
    std::stringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    ASSERT_GE(cells.size(), 5u) << line;
    const ModelShape shape{std::stoi(cells[2]), std::stoi(cells[3]), std::stoi(cells[4]), 0, 0};
    const ModelSpec model = resolve_model("", shape);
    EXPECT_EQ(model.transformer.vocab, 51200);
    EXPECT_EQ(model.transformer.seq_len, 2048);
    EXPECT_NEAR(params_of(model) / 1e9, std::stod(cells[1]), 0.051) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 17);
}

TEST(Catalogue, AShapeChangesACatalogueModelOrMakesAGptAndBadOnesAreNamed) {
  const ModelSpec half = resolve_model("gpt3-175b", {48, 0, 0, 4096, 0});
  EXPECT_EQ(half.transformer.layers, 48);
  EXPECT_EQ(half.transformer.seq_len, 4096);
  EXPECT_EQ(half.transformer.hidden, 12288);
  EXPECT_EQ(half.published_parameters, 0.0);  // no longer the published model
  EXPECT_NE(half.name, "gpt3-175b");
  // 12 l h^2 + 13 l h per layer stack: half the layers, half those parameters.
  const double layer_params = 12.0 * 12288.0 * 12288.0 + 13.0 * 12288.0;
  EXPECT_NEAR(params_of(find_model("gpt3-175b")) - params_of(resolve_model("gpt3-175b", {48, 0, 0, 0, 0})), 48 * layer_params, 1e3);
  EXPECT_EQ(resolve_model("gpt3-13b", {}).name, "gpt3-13b");
  const auto message = [](std::string_view name, ModelShape shape) {
    try {
      resolve_model(name, shape);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("", {2, 100, 3, 0, 0}).find("--heads 3 does not divide --hidden 100"), std::string::npos);
  EXPECT_NE(message("", {2, 0, 0, 0, 0}).find("--layers, --hidden and --heads"), std::string::npos);
  EXPECT_NE(message("gpt3-175b", {0, 1024, 0, 0, 0}).find("without --model gpt3-175b"), std::string::npos);
  EXPECT_NE(message("wide-resnet50-8", {4, 0, 0, 0, 0}).find("not a Transformer"), std::string::npos);
  EXPECT_NE(message("", {-1, 64, 4, 0, 0}).find("--layers -1"), std::string::npos);
}

TEST(Catalogue, ResNetCountsAreTorchvisionsExactly) {
  ModelSpec resnet = find_model("wide-resnet50-8");
  resnet.convnet.width_factor = 1;  // ResNet-50
  EXPECT_DOUBLE_EQ(params_of(resnet), 25557032.0);
  resnet.convnet.width_factor = 2;  // torchvision's wide_resnet50_2
  EXPECT_DOUBLE_EQ(params_of(resnet), 68883240.0);
  ModelSpec deep = find_model("wide-resnet101-8");
  deep.convnet.width_factor = 2;  // wide_resnet101_2
  EXPECT_DOUBLE_EQ(params_of(deep), 126886696.0);
  // ResNet-50 forward: about 4.1 GMACs per 224x224 image (He et al. 2016: 3.8e9 FLOPs as MACs
  // without the projection shortcuts' share).
  resnet.convnet.width_factor = 1;
  double flops = 0.0;
  for (const LayerCost& layer : model_layers(resnet, Workload{})) flops += layer.forward_flops;
  EXPECT_NEAR(flops / 2.0, 4.09e9, 0.05e9);
}

TEST(Layers, TransformerFlopsAreTheClosedForm) {
  const ModelSpec& model = find_model("gpt3-13b");
  const double h = model.transformer.hidden, s = model.transformer.seq_len, V = model.transformer.vocab;
  for (int b : {1, 4}) {
    const auto layers = model_layers(model, Workload{b, 1, 0, false, false});
    ASSERT_EQ(layers.size(), 42u);
    EXPECT_EQ(layers.front().kind, LayerKind::kEmbedding);
    EXPECT_EQ(layers.back().kind, LayerKind::kLmHead);
    EXPECT_DOUBLE_EQ(layers[1].forward_flops, 24.0 * b * s * h * h + 4.0 * b * s * s * h);
    EXPECT_DOUBLE_EQ(layers.back().forward_flops, 2.0 * b * s * h * V);
    EXPECT_DOUBLE_EQ(layers[1].unique_parameters, 12.0 * h * h + 13.0 * h);
  }
}

TEST(Layers, TensorParallelismSplitsFlopsAndMatrices) {
  const ModelSpec& model = find_model("gpt3-175b");
  const double h = model.transformer.hidden;
  const auto whole = model_layers(model, Workload{2, 1, 0, false, false});
  for (int t : {2, 4, 8}) {
    const auto split = model_layers(model, Workload{2, t, 0, false, false});
    EXPECT_DOUBLE_EQ(split[5].forward_flops * t, whole[5].forward_flops);
    // Matrices and column-parallel biases split; the two row-parallel biases and the norms do not.
    const double replicated = 2.0 * h + 4.0 * h;
    EXPECT_NEAR(split[5].parameters, (whole[5].unique_parameters - replicated) / t + replicated, 1e-6);
    // Megatron's f/g all-reduces: two of 2*b*s*h bytes, ring volume 2(t-1)/t.
    EXPECT_DOUBLE_EQ(split[5].tp_comm_bytes, 2.0 * 2.0 * (t - 1) / t * 2.0 * 2 * 2048 * h);
  }
}

TEST(Layers, ActivationMemoryIsKorthikantisFormula) {
  const ModelSpec& model = find_model("gpt3-175b");
  const double h = model.transformer.hidden, a = model.transformer.heads, s = 2048, b = 1;
  const double sbh = s * b * h;
  EXPECT_DOUBLE_EQ(model_layers(model, Workload{1, 1, 0, false, false})[1].activation_bytes,
                   sbh * (34.0 + 5.0 * a * s / h));
  for (double t : {2.0, 8.0}) {
    const int ti = static_cast<int>(t);
    EXPECT_DOUBLE_EQ(model_layers(model, Workload{1, ti, 0, false, false})[1].activation_bytes,
                     sbh * (10.0 + 24.0 / t + 5.0 * a * s / (h * t)));
    EXPECT_DOUBLE_EQ(model_layers(model, Workload{1, ti, 0, true, false})[1].activation_bytes,
                     sbh * (34.0 + 5.0 * a * s / h) / t);
  }
  // Flash attention stashes no s^2 matrices; full recomputation keeps only the 2sbh input.
  const LayerCost flash = model_layers(model, Workload{1, 1, 0, false, true})[1];
  EXPECT_DOUBLE_EQ(flash.activation_bytes, 34.0 * sbh);
  EXPECT_DOUBLE_EQ(flash.checkpoint_bytes, 2.0 * sbh);
}

TEST(Layers, GroupedQueryAttentionAndSwiGlu) {
  const ModelSpec& model = find_model("llama3-8b");
  const TransformerShape& m = model.transformer;
  const double h = m.hidden, kv = m.kv_heads * m.head_dim, f = m.ffn_hidden, s = m.seq_len;
  const auto layers = model_layers(model, Workload{});
  EXPECT_DOUBLE_EQ(layers[1].unique_parameters, 2.0 * h * h + 2.0 * h * kv + 3.0 * h * f + 2.0 * h);
  EXPECT_DOUBLE_EQ(layers[1].forward_flops, 2.0 * s * (2.0 * h * h + 2.0 * h * kv + 3.0 * h * f) + 4.0 * s * s * h);
  EXPECT_FALSE(layers.back().holds_tied_copy);  // Llama 3 8B has its own output matrix
}

TEST(Layers, T5DecoderCarriesTheEncoderOutput) {
  const ModelSpec& model = find_model("t5-base");
  const auto layers = model_layers(model, Workload{});
  ASSERT_EQ(layers.size(), 1u + 12u + 1u + 12u + 1u);
  EXPECT_EQ(layers[13].name, "decoder_embedding");
  EXPECT_EQ(layers[14].kind, LayerKind::kCrossDecoder);
  const double h = model.transformer.hidden;
  EXPECT_DOUBLE_EQ(layers[14].output_bytes, 2.0 * (128 + 512) * h);
  EXPECT_DOUBLE_EQ(layers[12].output_bytes, 2.0 * 512 * h);
  EXPECT_EQ(layers[13].unique_parameters, 0.0);  // the shared embedding, counted once
}

TEST(Layers, RejectsDegreesThatDoNotDivide) {
  std::string why;
  EXPECT_FALSE(tensor_parallel_divides(find_model("gpt3-13b"), 3, &why));
  EXPECT_NE(why.find("40 attention heads"), std::string::npos) << why;
  EXPECT_TRUE(tensor_parallel_divides(find_model("llama3-70b"), 16));  // 8 KV heads replicated
  EXPECT_THROW(model_layers(find_model("wide-resnet50-8"), Workload{1, 2, 0, false, false}), InputError);
  EXPECT_THROW(model_layers(find_model("gpt3-13b"), Workload{0, 1, 0, false, false}), InputError);
}

TEST(Catalogue, LookupsAreForgivingAndErrorsListTheNames) {
  EXPECT_EQ(find_model("GPT-3-13B").name, "gpt3-13b");
  EXPECT_EQ(find_model("gpt3_175b").name, "gpt3-175b");
  EXPECT_EQ(find_gpu("A100").name, "a100-sxm");
  try {
    find_model("gpt4");
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown model 'gpt4'"), std::string::npos);
    EXPECT_NE(what.find("gpt3-13b"), std::string::npos);
    EXPECT_NE(what.find("wide-resnet101-8"), std::string::npos);
  }
  EXPECT_THROW(find_gpu("v100"), InputError);
}

TEST(Catalogue, GpuClocksAndReferencePowers) {
  const GpuSpec& a100 = find_gpu("a100-sxm");
  const auto all = supported_frequencies(a100, 0);
  EXPECT_EQ(all.size(), (1410u - 210u) / 15u + 1u);
  EXPECT_EQ(all.front(), 1410);
  EXPECT_EQ(all.back(), 210);
  EXPECT_EQ(supported_frequencies(find_gpu("a40"), 855).size(), 60u);  // as the A40 profiles
  EXPECT_EQ(supported_frequencies(a100, 855).size(), 38u);              // as the A100 profiles
  EXPECT_EQ(find_gpu("h100-sxm").max_mhz, 1980);
  EXPECT_DOUBLE_EQ(a100.p_blocking_w, 83.64);
  EXPECT_DOUBLE_EQ(find_gpu("a40").p_blocking_w, 70.38);
  for (const GpuSpec& g : gpu_catalogue()) {
    EXPECT_TRUE(g.calibrated || !g.calibration.empty()) << g.name << " must say where its energy model comes from";
    EXPECT_GT(g.energy.power_limit_w, g.energy.static_power_w) << g.name;
    // Transferred models keep to the board's limit; fitted ones may exceed it (effective parameters).
    if (!g.calibrated) {
      EXPECT_LE(g.energy.power_limit_w, g.tdp_w) << g.name;
    }
  }
}

}  // namespace
}  // namespace perseus::planner
