// Runs K optimizer steps on random tensors and writes every input and output to safetensors, for
// compare_optim.py to replay with its own PyTorch implementation of the update rules.
//   zaya_optim_dump OUT_DIR      → OUT_DIR/<case>.safetensors for each case below
// File layout: "init/<p>", "grad/<k>/<p>" (before clipping), "after/<p>/<k>" ... see write_case.
// The metadata entry "case" is JSON: hyper-parameters, per-step lr, and the tensor specs.
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/newton_schulz.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "optim/optimizer.h"

namespace zaya {
namespace {

constexpr int kSteps = 5;

// Tall, wide and square Muon matrices; AdamW 2-D (embedding-like), 3-D (conv-like) and 1-D
// tensors; one Buffer that must stay untouched.
std::vector<ParamSpec> test_specs(size_t& total) {
  const std::vector<std::tuple<std::string, Shape, OptimGroup>> list = {
      {"muon_tall", {48, 16}, OptimGroup::Muon},   {"muon_wide", {16, 40}, OptimGroup::Muon},
      {"muon_square", {32, 32}, OptimGroup::Muon}, {"muon_big", {96, 256}, OptimGroup::Muon},
      {"muon_tiny", {5, 3}, OptimGroup::Muon},     {"embed", {50, 16}, OptimGroup::AdamW},
      {"conv", {8, 4, 2}, OptimGroup::AdamW},      {"norm", {16}, OptimGroup::AdamW},
      {"bias", {40}, OptimGroup::AdamW},           {"balancing", {5}, OptimGroup::Buffer}};
  std::vector<ParamSpec> specs;
  for (const auto& [name, shape, group] : list) {
    ParamSpec p;
    p.name = name;
    p.shape = shape;
    p.group = group;
    specs.push_back(p);
  }
  total = assign_flat_offsets(specs);
  return specs;
}

Tensor copy_of(const float* data, const Shape& shape) {
  Tensor t(shape, DType::F32);
  std::copy(data, data + t.numel(), t.data<float>());
  return t;
}

void write_case(const std::string& path, const OptimConfig& config, const std::vector<double>& lrs,
                uint32_t seed) {
  size_t total = 0;
  const std::vector<ParamSpec> specs = test_specs(total);
  Optimizer optimizer(specs, total, config);
  std::vector<float> weights(total), grads(total);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& w : weights) w = 0.05f * normal(rng);

  std::vector<std::pair<std::string, Tensor>> out;
  nlohmann::json meta = {{"lr", lrs},
                         {"weight_decay", config.weight_decay},
                         {"adam_beta1", config.adam_beta1},
                         {"adam_beta2", config.adam_beta2},
                         {"adam_eps", config.adam_eps},
                         {"muon_momentum", config.muon_momentum},
                         {"muon_nesterov", config.muon_nesterov},
                         {"muon_ns_steps", config.muon_ns_steps},
                         {"grad_clip", config.grad_clip},
                         {"params", nlohmann::json::array()}};
  for (const ParamSpec& p : specs) {
    meta["params"].push_back({{"name", p.name}, {"group", optim_group_name(p.group)}});
    out.emplace_back("init/" + p.name, copy_of(weights.data() + p.offset, p.shape));
  }
  Tensor norms({kSteps}, DType::F32);
  for (int k = 0; k < kSteps; ++k) {
    // Per-tensor gradient scales that change per step, so AdamW's moments see varied magnitudes.
    for (const ParamSpec& p : specs) {
      const float scale = 0.1f * float(1 + (k + p.offset) % 7);
      for (int64_t i = 0; i < p.numel; ++i) grads[p.offset + size_t(i)] = scale * normal(rng);
      out.emplace_back("grad/" + std::to_string(k) + "/" + p.name,
                       copy_of(grads.data() + p.offset, p.shape));
    }
    norms.data<float>()[k] = optimizer.step(weights.data(), grads.data(), lrs[size_t(k)]);
    for (const ParamSpec& p : specs)
      out.emplace_back("after/" + std::to_string(k) + "/" + p.name,
                       copy_of(weights.data() + p.offset, p.shape));
  }
  out.emplace_back("norm", norms);
  for (const auto& [state_name, state] : optimizer.state_tensors())
    for (const ParamSpec& p : specs)
      out.emplace_back("state/" + state_name + "/" + p.name,
                       copy_of(state.data<float>() + p.offset, p.shape));
  write_safetensors(path, out, {{"case", meta.dump()}});
}

// Newton–Schulz alone on random matrices (the directions Muon orthogonalises), to measure how
// close two fp32 implementations of it get: "ns_in/<r>x<c>", "ns_out/<r>x<c>".
void write_newton_schulz(const std::string& path) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::pair<std::string, Tensor>> out;
  NsWorkspace ws;
  for (const Shape& shape : {Shape{48, 16}, Shape{16, 40}, Shape{32, 32}, Shape{256, 96},
                             Shape{128, 512}, Shape{5, 3}}) {
    Tensor in(shape, DType::F32), result(shape, DType::F32);
    for (int64_t i = 0; i < in.numel(); ++i) in.data<float>()[i] = normal(rng);
    newton_schulz(in.data<float>(), result.data<float>(), shape[0], shape[1], 5, ws);
    const std::string tag = std::to_string(shape[0]) + "x" + std::to_string(shape[1]);
    out.emplace_back("ns_in/" + tag, in);
    out.emplace_back("ns_out/" + tag, result);
  }
  write_safetensors(path, out);
}

int run(int argc, char** argv) {
  ZAYA_CHECK(argc == 2, "usage: zaya_optim_dump OUT_DIR");
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);

  OptimConfig nesterov;  // weight decay on, clipping off, Nesterov
  nesterov.weight_decay = 0.1;
  nesterov.grad_clip = 0;
  write_case((dir / "nesterov_noclip.safetensors").string(), nesterov,
             {0.01, 0.02, 0.03, 0.02, 0.01}, 1);

  OptimConfig clipped;  // clipping active every step (norms are ~10), plain momentum, other betas
  clipped.weight_decay = 0.05;
  clipped.grad_clip = 1.0;
  clipped.muon_nesterov = false;
  clipped.muon_momentum = 0.9;
  clipped.adam_beta1 = 0.8;
  clipped.adam_beta2 = 0.99;
  clipped.adam_eps = 1e-6;
  write_case((dir / "clip_momentum.safetensors").string(), clipped,
             {0.005, 0.005, 0.004, 0.003, 0.002}, 2);
  write_newton_schulz((dir / "newton_schulz.ns").string());
  return 0;
}

}  // namespace
}  // namespace zaya

int main(int argc, char** argv) {
  try {
    return zaya::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zaya_optim_dump: %s\n", e.what());
    return 1;
  }
}
