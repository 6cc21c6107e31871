#include "testing/lora_synth.h"

#include <cmath>
#include <random>

#include "engine/gguf/gguf_writer.h"
#include "testing/synth_random.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

// Each target has its own generator, seeded from (seed, block, projection), so choosing
// targets does not change the values of the others.
std::mt19937_64 target_rng(uint64_t seed, int32_t layer, LoraProjection p) {
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(layer), uint32_t(p)};
  return std::mt19937_64(seq);
}

void add(GgufWriter& w, const std::string& name, std::vector<uint64_t> shape, GgmlType type,
         const std::vector<float>& values) {
  if (type == GgmlType::F32) {
    w.add_tensor(name, std::move(shape), values);
  } else {
    w.add_tensor(name, std::move(shape), type, encode_tensor(type, values));
  }
}

// a ~ U(-1,1)/√n_in keeps A·x at the scale of x's entries; b ~ U(-1,1)/(2√rank) then makes
// B·A·x about a sixth of W·x at scale 1: a visible change of the output, not a new model.
void add_target(GgufWriter& w, const ModelConfig& base, const LoraSynthSpec& spec, int32_t layer, LoraProjection p) {
  const LoraShape s = lora_projection_shape(base, p);
  std::mt19937_64 rng = target_rng(spec.seed, layer, p);
  std::vector<float> a(size_t(spec.rank) * size_t(s.n_in)), b(size_t(s.n_out) * size_t(spec.rank));
  for (float& x : a) x = uniform_symmetric(rng) / std::sqrt(float(s.n_in));
  for (float& x : b) x = 0.5f * uniform_symmetric(rng) / std::sqrt(float(spec.rank));
  const std::string stem = "blk." + std::to_string(layer) + "." + lora_projection_name(p) + ".weight";
  add(w, stem + ".lora_a", {uint64_t(s.n_in), uint64_t(spec.rank)}, spec.type, a);
  add(w, stem + ".lora_b", {uint64_t(spec.rank), uint64_t(s.n_out)}, spec.type, b);
}

void check_spec(const ModelConfig& base, const LoraSynthSpec& spec) {
  base.validate("synthetic LoRA base model");
  // Its projections are not the decoder's seven (no gate), and nothing serves it yet.
  if (base.is_encoder()) throw Error("synthetic LoRA: the base model is an encoder (bert), which takes no adapters");
  if (spec.rank < 1) throw Error("synthetic LoRA: rank must be at least 1, got " + std::to_string(spec.rank));
  if (spec.projections.empty()) throw Error("synthetic LoRA: no projections to adapt");
  if (!std::isfinite(spec.alpha)) throw Error("synthetic LoRA: alpha must be finite");
  for (int32_t l : spec.layers) {
    if (l < 0 || l >= base.n_layers) {
      throw Error("synthetic LoRA: block " + std::to_string(l) + " does not exist (the base model has " +
                  std::to_string(base.n_layers) + " blocks)");
    }
  }
}

}  // namespace

void write_synth_lora(const std::string& path, const ModelConfig& base, const LoraSynthSpec& spec) {
  check_spec(base, spec);
  GgufWriter w;
  w.set_string("general.architecture", architecture_name(base.arch));
  w.set_string("general.type", "adapter");
  w.set_string("general.name", "pagoda-synth LoRA (random, rank " + std::to_string(spec.rank) + ", seed " +
                                   std::to_string(spec.seed) + ")");
  w.set_string("adapter.type", "lora");
  w.set_f32("adapter.lora.alpha", spec.alpha);
  std::vector<int32_t> layers = spec.layers;
  if (layers.empty()) {
    for (int32_t l = 0; l < base.n_layers; ++l) layers.push_back(l);
  }
  for (int32_t l : layers) {
    for (LoraProjection p : spec.projections) add_target(w, base, spec, l, p);
  }
  w.write(path);
}

}  // namespace pagoda
