// pagoda-synth: writes a random-weight Llama model as GGUF, deterministic from a seed.
//   pagoda-synth --preset s15m -o s15m.gguf
//   pagoda-synth --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 160 --vocab 1000 -o tiny.gguf

#include <cstdio>
#include <iostream>

#include "engine/synth.h"
#include "examples/common/args.h"

namespace {

constexpr const char* kUsage = R"(usage: pagoda-synth [--preset s15m|s110m] -o FILE.gguf [options]
Writes a Llama model with random weights (deterministic from --seed) and a synthetic
SentencePiece vocabulary. Flags override the preset's shape.
  -o, --output FILE   where to write (required)
  --preset NAME       s15m (dim 288, 6 layers, 6 heads, FFN 768, vocab 32000)
                      s110m (dim 768, 12 layers, 12 heads, FFN 2048, vocab 32000)
  --dim N  --layers N  --heads N  --kv-heads N  --ffn N  --vocab N  --context N
  --rope-theta X      RoPE frequency base (10000)
  --type T            f32 (default), f16, bf16 or q8_0 for the matrices
  --tied              no output.weight: the classifier reuses token_embd
  --seed N            random seed (1)
)";

pagoda::GgmlType parse_type(const std::string& name) {
  if (name == "f32") return pagoda::GgmlType::F32;
  if (name == "f16") return pagoda::GgmlType::F16;
  if (name == "bf16") return pagoda::GgmlType::BF16;
  if (name == "q8_0") return pagoda::GgmlType::Q8_0;
  throw pagoda::Error("--type must be f32, f16, bf16 or q8_0, got '" + name + "'");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    pagoda::cli::Args args(argc, argv,
                           {"--output", "--preset", "--dim", "--layers", "--heads", "--kv-heads", "--ffn",
                            "--vocab", "--context", "--rope-theta", "--type", "--seed"},
                           {"--tied", "--help"}, {{"-o", "--output"}, {"-h", "--help"}});
    if (args.has("--help")) {
      std::cout << kUsage;
      return 0;
    }
    auto output = args.get("--output");
    if (!output) throw pagoda::Error("-o FILE is required (see --help)");

    pagoda::SynthSpec spec;
    spec.config = pagoda::synth_preset(args.get("--preset", "s15m"));
    pagoda::ModelConfig& c = spec.config;
    c.dim = args.number("--dim", c.dim);
    c.n_layers = args.number("--layers", c.n_layers);
    c.n_heads = args.number("--heads", c.n_heads);
    c.n_kv_heads = args.number("--kv-heads", args.has("--heads") ? c.n_heads : c.n_kv_heads);
    c.ffn_dim = args.number("--ffn", c.ffn_dim);
    c.vocab_size = args.number("--vocab", c.vocab_size);
    c.context_length = args.number("--context", c.context_length);
    c.rope_theta = args.number("--rope-theta", c.rope_theta);
    spec.type = parse_type(args.get("--type", "f32"));
    spec.tied_output = args.has("--tied");
    spec.seed = args.number<uint64_t>("--seed", 1);

    pagoda::write_synth_model(*output, spec);
    std::fprintf(stderr, "pagoda-synth: wrote %s (dim %d, %d layers, %d heads, %d KV heads, FFN %d, vocab %d)\n",
                 output->c_str(), c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.ffn_dim, c.vocab_size);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-synth: %s\n", e.what());
    return 1;
  }
}
