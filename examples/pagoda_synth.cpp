// pagoda-synth: writes a random-weight model (llama, qwen2, qwen2vl, qwen3, gemma2, gemma3, phi3,
// qwen2moe, qwen3moe, or llama with experts; the bert, nomic-bert and jina-bert-v2 encoders),
// a random LoRA adapter for one, or a random vision projector (mmproj) file, as GGUF,
// deterministic from a seed.
//   pagoda-synth --preset s15m -o s15m.gguf
//   pagoda-synth --preset llama-3.2-1b --type q4_k_m -o llama-3.2-1b-q4_k_m.gguf
//   pagoda-synth --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 160 --vocab 1000 -o tiny.gguf
//   pagoda-synth --arch qwen2 --vocab ../shared/vocab/ggml-vocab-qwen2.gguf --dim 64 -o q.gguf
//   pagoda-synth --arch qwen3moe --experts 8 --experts-used 2 --expert-ffn 64 --dim 64 -o moe.gguf
//   pagoda-synth --arch bert --pooling cls --dim 64 --heads 4 --ffn 128 --layers 2 -o bert.gguf
//   pagoda-synth --arch jina-bert-v2 --dim 96 --heads 6 --ffn 256 --layers 2 --type q8_0 -o jina.gguf
//   pagoda-synth --arch qwen3 --pooling rank --vocab ../shared/vocab/ggml-vocab-qwen2.gguf --dim 64 -o rr.gguf
//   pagoda-synth --lora-for s15m.gguf --rank 16 -o s15m-lora.gguf
//   pagoda-synth --mmproj qwen2vl --layout legacy -o mmproj-qwen2vl.gguf
//   pagoda-synth --mmproj gemma3:full --type f16 -o mmproj-gemma3-4b.gguf

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>
#include <span>

#include "engine/model/model.h"
#include "testing/lora_synth.h"
#include "testing/synth.h"
#include "testing/vision_synth.h"
#include "examples/common/args.h"

namespace {

constexpr const char* kUsage = R"(usage: pagoda-synth [--preset NAME] -o FILE.gguf [options]
       pagoda-synth --lora-for BASE -o ADAPTER.gguf [--rank N] [--alpha X] [--type T] [--seed N]
       pagoda-synth --mmproj FAMILY[:PRESET] -o MMPROJ.gguf [--layout L] [--type T] [--seed N]
Writes a model with random weights (deterministic from --seed) and a synthetic SentencePiece
vocabulary, or a real one copied from a GGUF, one tensor at a time straight to the file (an 8B
model needs about one tensor's memory). Flags override the preset's shape.
With --lora-for, writes instead a random LoRA adapter (llama.cpp's GGUF adapter format) on
every attention and FFN projection of every block of BASE.
With --mmproj, writes instead a vision projector file (llama.cpp's mmproj GGUF: a ViT and the
projector into a language model's embeddings).
  -o, --output FILE   where to write (required)
  --preset NAME       s15m (dim 288, 6 layers, 6 heads, FFN 768, vocab 32000)
                      s110m (dim 768, 12 layers, 12 heads, FFN 2048, vocab 32000)
                      the shapes (and tied embeddings, RoPE) of real models, with their
                      family's vocabulary from --vocab-dir: qwen2.5-0.5b, llama-3.2-1b,
                      qwen2.5-3b, llama-3.2-3b, llama-3.1-8b, qwen3-8b, qwen3-30b-a3b
  --vocab-dir DIR     where the presets' vocabularies are (../shared/vocab)
  --arch NAME         llama (the small presets'), qwen2 (Q/K/V biases, NEOX RoPE), qwen2vl (qwen2
                      with M-RoPE, its sections Qwen2-VL's split of the head), qwen3 (Q/K norms,
                      NEOX RoPE), gemma2 (post-norms, GeGLU, soft-capping 50/30 and window 4096
                      unless given), gemma3 (Q/K norms, 5 sliding layers to 1 global), phi3 (fused
                      QKV and gate|up), qwen2moe (experts and a shared expert), qwen3moe; llama
                      with --experts is Mixtral-style; bert (an encoder: learned positions
                      and token types, post-LayerNorm, GELU, a WordPiece vocabulary, context
                      512 and LayerNorm epsilon 1e-12 unless given); nomic-bert (bert's with
                      fused QKV, NEOX RoPE of base 1000 unless given, SwiGLU, no biases);
                      jina-bert-v2 (bert's with ALiBi, GEGLU, and the optional Q/K
                      LayerNorms and attn_norm_2 unless --no-jina-norms)
  --pooling P         ARCH.pooling_type: mean, cls, last, or rank (bert, jina-bert-v2: adds
                      the rank head cls.*; qwen3: Qwen3-Reranker's cls.output, the classifier's
                      rows of "yes" and "no" from --vocab, its labels and rerank prompt); the
                      encoders' default is mean
  --rope-dim N        rotate only the first N values of each head (partial rotary)
  --sliding-window N  the window of the sliding layers (gemma2, gemma3, phi3)
  --attn-softcap X  --final-softcap X
                      attention and final logit soft-capping (0: none)
  --longrope CTX      write Phi-3 LongRoPE factors with original context CTX (long ones apply
                      when --context exceeds it) and --rope-attn-factor X (1)
  --experts N  --experts-used K  --expert-ffn N  --shared-ffn N
                      a mixture of N experts, K per token, each of FFN length N (the shared
                      expert's: qwen2moe)
  --dim N  --layers N  --heads N  --kv-heads N  --ffn N  --context N
  --vocab N|FILE      vocabulary size of a synthetic vocabulary, or a GGUF (vocab-only is
                      enough) whose tokenizer.* keys are copied
  --head-dim N        head dimension when it is not dim / heads (ARCH.attention.key_length)
  --rope-theta X      RoPE frequency base (10000)
  --rope-scale X      linear RoPE scaling by factor X (ARCH.rope.scaling.*)
  --rope-freqs        write Llama 3.1-style rope_freqs.weight frequency factors
  --type T            f32 (default), or any type pagoda-quantize writes: f16, bf16, q8_0,
                      q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k, q2_k, q3_k_s, q3_k_m,
                      q3_k_l, iq4_nl, iq4_xs (the model is quantized
                      as pagoda-quantize would, with the same per-tensor types and
                      fallbacks). For an adapter: f32, f16, bf16 or q8_0
  --tied              no output.weight: the classifier reuses token_embd (the preset's choice
                      otherwise)
  --seed N            random seed (1)
  --attn-output-scale X
                      multiply every attn_output.weight by X: 0 makes the next token depend
                      on the current one alone, so the model retells its own text word for
                      word (for measuring speculative decoding at high acceptance)
  --lora-for BASE     write a LoRA adapter shaped for the model BASE (GGUF or llama2.c)
  --rank N            the adapter's rank (8)
  --alpha X           adapter.lora.alpha (the rank, so scale 1); the scale is alpha / rank
  --mmproj FAMILY[:PRESET]
                      write a projector: llava (CLIP ViT, LLaVA's MLP), gemma3 (SigLIP, pooled
                      to tokens_per_image, Gemma 3's projection), qwen2vl or qwen2.5vl (Qwen's
                      ViT and 2x2 merger; 2.5: RMSNorm, gated SiLU FFN, window attention).
                      PRESET: tiny (the default: image 56 or 112, patch 14, dim 64, 2 to 4
                      blocks, FFN 128, projecting to 96) or full: LLaVA-1.5's CLIP ViT-L/336
                      (1024->4096), Gemma 3 4B's (image 896, 1152->2560), Qwen2-VL-2B's
                      (1280->1536), Qwen2.5-VL-3B's (1280->2048)
  --layout L          current (default: tools/mtmd's names, as convert_hf_to_gguf.py writes)
                      or legacy (examples/llava's converters, which llama.cpp's older
                      llama-llava-cli and llama-qwen2vl-cli read; llava and qwen2vl only)
  --image-size N  --patch-size N  --projection-dim N
                      override the preset's shape, as --dim, --layers, --heads and --ffn do;
                      --projection-dim is the language model's width. --type: f32 or f16
)";

// Flags that shape a model, meaningless for an adapter, and those only an adapter takes.
constexpr const char* kModelOnly[] = {"--preset",
                                      "--arch",
                                      "--dim",
                                      "--layers",
                                      "--heads",
                                      "--kv-heads",
                                      "--ffn",
                                      "--vocab",
                                      "--vocab-dir",
                                      "--head-dim",
                                      "--context",
                                      "--rope-theta",
                                      "--rope-scale",
                                      "--rope-freqs",
                                      "--tied",
                                      "--rope-dim",
                                      "--sliding-window",
                                      "--attn-softcap",
                                      "--final-softcap",
                                      "--longrope",
                                      "--rope-attn-factor",
                                      "--experts",
                                      "--experts-used",
                                      "--expert-ffn",
                                      "--shared-ffn",
                                      "--attn-output-scale",
                                      "--pooling",
                                      "--no-jina-norms"};
constexpr const char* kAdapterOnly[] = {"--rank", "--alpha"};
// Flags only a projector takes, and the model's shape flags a projector shares.
constexpr const char* kProjectorOnly[] = {"--layout", "--image-size", "--patch-size", "--projection-dim"};
constexpr const char* kProjectorShape[] = {"--dim", "--layers", "--heads", "--ffn"};

// llama.cpp's llama_pooling_type number of a --pooling name.
int32_t parse_pooling(const std::string& name) {
  if (name == "mean") return 1;
  if (name == "cls") return 2;
  if (name == "last") return 3;
  if (name == "rank") return 4;
  throw pagoda::Error("--pooling must be mean, cls, last or rank, got '" + name + "'");
}

pagoda::GgmlType parse_adapter_type(const std::string& name) {
  if (name == "f32") return pagoda::GgmlType::F32;
  if (name == "f16") return pagoda::GgmlType::F16;
  if (name == "bf16") return pagoda::GgmlType::BF16;
  if (name == "q8_0") return pagoda::GgmlType::Q8_0;
  throw pagoda::Error("--type for an adapter must be f32, f16, bf16 or q8_0, got '" + name + "'");
}

void write_model(const pagoda::cli::Args& args, const std::string& output) {
  const pagoda::SynthPreset& preset = pagoda::find_synth_preset(args.get("--preset", "s15m"));
  pagoda::SynthSpec spec;
  spec.config = preset.config;
  pagoda::ModelConfig& c = spec.config;
  if (args.has("--arch")) c.arch = pagoda::parse_architecture(*args.get("--arch"), "--arch");
  c.dim = args.number("--dim", c.dim);
  c.n_layers = args.number("--layers", c.n_layers);
  c.n_heads = args.number("--heads", c.n_heads);
  c.n_kv_heads = args.number("--kv-heads", args.has("--heads") ? c.n_heads : c.n_kv_heads);
  c.ffn_dim = args.number("--ffn", c.ffn_dim);
  if (!preset.vocab_file.empty()) {
    spec.vocab_path = (std::filesystem::path(args.get("--vocab-dir", "../shared/vocab")) / preset.vocab_file).string();
  }
  if (const auto vocab = args.get("--vocab")) {
    if (!vocab->empty() && vocab->find_first_not_of("0123456789") == std::string::npos) {
      c.vocab_size = args.number("--vocab", c.vocab_size);
      spec.vocab_path.clear();
    } else {
      spec.vocab_path = *vocab;
    }
  }
  if (!spec.vocab_path.empty() && !std::filesystem::exists(spec.vocab_path)) {
    throw pagoda::Error(
        "vocabulary file " + spec.vocab_path + " not found" +
        (args.has("--vocab") ? "" : " (preset " + preset.name + "; give --vocab-dir DIR or --vocab FILE)"));
  }
  c.key_length = args.number("--head-dim", c.key_length);
  if (c.is_encoder() && !args.has("--preset")) {
    // BERT's own values, where the decoder presets' would not fit; nomic-embed-text's RoPE base.
    c.context_length = 512, c.norm_eps = 1e-12f, c.pooling_type = 1;
    if (c.arch == pagoda::Architecture::NomicBert) c.rope_theta = 1000.0f;
  }
  spec.jina_norms = !args.has("--no-jina-norms");
  if (args.has("--pooling")) c.pooling_type = parse_pooling(*args.get("--pooling"));
  c.context_length = args.number("--context", c.context_length);
  c.rope_theta = args.number("--rope-theta", c.rope_theta);
  c.rope_freq_scale = 1.0f / args.number("--rope-scale", 1.0f);
  spec.rope_freqs = args.has("--rope-freqs") || preset.rope_freqs;
  c.rope_dim = args.number("--rope-dim", c.rope_dim);
  if (c.arch == pagoda::Architecture::Gemma2 && !args.has("--preset")) {
    // Gemma 2's own values, which llama.cpp also assumes when a file lacks them.
    c.attn_softcap = 50.0f, c.final_softcap = 30.0f, c.sliding_window = 4096;
  }
  c.sliding_window = args.number("--sliding-window", c.sliding_window);
  c.attn_softcap = args.number("--attn-softcap", c.attn_softcap);
  c.final_softcap = args.number("--final-softcap", c.final_softcap);
  if (args.has("--longrope")) {
    spec.longrope = true;
    c.rope_original_context = args.number("--longrope", 0);
    c.rope_attn_factor = args.number("--rope-attn-factor", 1.0f);
  }
  c.n_experts = args.number("--experts", c.n_experts);
  c.n_experts_used = args.number("--experts-used", c.n_experts_used);
  c.expert_ffn_dim = args.number("--expert-ffn", c.expert_ffn_dim);
  c.shared_ffn_dim = args.number("--shared-ffn", c.shared_ffn_dim);
  spec.tied_output = args.has("--tied") || preset.tied_output;
  spec.seed = args.number<uint64_t>("--seed", 1);
  spec.attn_output_scale = args.number("--attn-output-scale", 1.0f);

  const std::string type = args.get("--type", "f32");
  if (type != "f32") spec.quant = pagoda::parse_quant_preset(type);
  c.vocab_size = pagoda::write_synth_model(output, spec).vocab_size;
  std::fprintf(
      stderr,
      "pagoda-synth: wrote %s (%s, dim %d, %d layers, %d heads, %d KV heads, head dim %d, FFN %d, vocab %d, %s%s",
      output.c_str(), pagoda::architecture_name(c.arch), c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim(),
      c.ffn_dim, c.vocab_size, type.c_str(), spec.tied_output || c.is_gemma() ? ", tied" : "");
  if (c.has_experts())
    std::fprintf(stderr, ", %d experts, %d used, expert FFN %d", c.n_experts, c.n_experts_used, c.moe_ffn_dim());
  std::fprintf(stderr, ")\n");
}

pagoda::ProjectorType parse_family(const std::string& name) {
  if (name == "llava" || name == "mlp") return pagoda::ProjectorType::LlavaMlp;
  if (name == "gemma3") return pagoda::ProjectorType::Gemma3;
  if (name == "qwen2vl" || name == "qwen2vl_merger") return pagoda::ProjectorType::Qwen2VL;
  if (name == "qwen2.5vl" || name == "qwen2.5vl_merger") return pagoda::ProjectorType::Qwen25VL;
  throw pagoda::Error("--mmproj family must be llava, gemma3, qwen2vl or qwen2.5vl, got '" + name + "'");
}

void write_projector(const pagoda::cli::Args& args, const std::string& output, const std::string& what) {
  const size_t colon = what.find(':');
  const pagoda::ProjectorType family = parse_family(what.substr(0, colon));
  pagoda::VisionSynthSpec spec;
  spec.config =
      pagoda::find_vision_synth_preset(family, colon == std::string::npos ? "tiny" : what.substr(colon + 1)).config;
  pagoda::VisionConfig& c = spec.config;
  c.image_size = args.number("--image-size", c.image_size);
  c.patch_size = args.number("--patch-size", c.patch_size);
  c.dim = args.number("--dim", c.dim);
  c.n_layers = args.number("--layers", c.n_layers);
  c.n_heads = args.number("--heads", c.n_heads);
  c.ffn_dim = args.number("--ffn", c.ffn_dim);
  c.projection_dim = args.number("--projection-dim", c.projection_dim);
  if (!c.full_attention_layers.empty()) {
    // The preset's period of full-attention blocks, over however many blocks there are.
    const int32_t period = c.full_attention_layers[0] + 1;
    c.full_attention_layers.clear();
    for (int32_t l = period - 1; l < c.n_layers; l += period) c.full_attention_layers.push_back(l);
  }
  const std::string layout = args.get("--layout", "current");
  if (layout != "current" && layout != "legacy")
    throw pagoda::Error("--layout must be current or legacy, got '" + layout + "'");
  spec.layout = layout == "legacy" ? pagoda::ProjectorLayout::Legacy : pagoda::ProjectorLayout::Current;
  const std::string type = args.get("--type", "f32");
  if (type != "f32" && type != "f16")
    throw pagoda::Error("--type for a projector must be f32 or f16, got '" + type + "'");
  spec.type = type == "f16" ? pagoda::GgmlType::F16 : pagoda::GgmlType::F32;
  spec.seed = args.number<uint64_t>("--seed", 1);

  c = pagoda::write_synth_projector(output, spec);
  std::fprintf(stderr,
               "pagoda-synth: wrote %s (%s projector, %s layout, image %d, patch %d, dim %d, %d blocks, %d heads, "
               "FFN %d, projecting to %d, %s)\n",
               output.c_str(), pagoda::projector_type_name(c.projector), layout.c_str(), c.image_size, c.patch_size,
               c.dim, c.n_layers, c.n_heads, c.ffn_dim, c.projection_dim, type.c_str());
}

void write_adapter(const pagoda::cli::Args& args, const std::string& output, const std::string& base_path) {
  // Loading the whole base model also proves it is one the engine can serve the adapter on.
  const pagoda::ModelConfig base = pagoda::load_model(base_path).config;
  pagoda::LoraSynthSpec spec;
  spec.rank = args.number("--rank", spec.rank);
  spec.alpha = args.number("--alpha", float(spec.rank));
  spec.seed = args.number<uint64_t>("--seed", 1);
  spec.type = parse_adapter_type(args.get("--type", "f32"));

  pagoda::write_synth_lora(output, base, spec);
  std::fprintf(stderr, "pagoda-synth: wrote %s (LoRA rank %d, alpha %g, for %s: %d blocks, 7 projections each)\n",
               output.c_str(), spec.rank, double(spec.alpha), base_path.c_str(), base.n_layers);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    pagoda::cli::Args args(
        argc, argv, {"--output",         "--preset",       "--arch",          "--dim",        "--layers",
                     "--heads",          "--kv-heads",     "--ffn",           "--vocab",      "--vocab-dir",
                     "--head-dim",       "--context",      "--rope-theta",    "--rope-scale", "--type",
                     "--seed",           "--lora-for",     "--rank",          "--alpha",      "--rope-dim",
                     "--sliding-window", "--attn-softcap", "--final-softcap", "--longrope",   "--rope-attn-factor",
                     "--experts",        "--experts-used", "--expert-ffn",    "--shared-ffn", "--attn-output-scale",
                     "--pooling",        "--mmproj",       "--layout",        "--image-size", "--patch-size",
                     "--projection-dim"},
        {"--tied", "--rope-freqs", "--no-jina-norms", "--help"}, {{"-o", "--output"}});
    if (args.has("--help")) {
      std::cout << kUsage;
      return 0;
    }
    auto output = args.get("--output");
    if (!output) throw pagoda::Error("-o FILE is required (see --help)");

    const std::optional<std::string> lora_for = args.get("--lora-for");
    const std::optional<std::string> mmproj = args.get("--mmproj");
    using Flags = std::span<const char* const>;
    if (mmproj) {
      const std::set<std::string> shared(std::begin(kProjectorShape), std::end(kProjectorShape));
      for (Flags table : {Flags(kModelOnly), Flags(kAdapterOnly)}) {
        for (const char* flag : table) {
          if (args.has(flag) && !shared.count(flag))
            throw pagoda::Error(std::string(flag) + " does not apply with --mmproj");
        }
      }
      if (lora_for) throw pagoda::Error("--lora-for does not apply with --mmproj");
      write_projector(args, *output, *mmproj);
      return 0;
    }
    for (const char* flag : kProjectorOnly)
      if (args.has(flag)) throw pagoda::Error(std::string(flag) + " needs --mmproj");
    for (const char* flag : lora_for ? Flags(kModelOnly) : Flags(kAdapterOnly)) {
      if (args.has(flag)) {
        throw pagoda::Error(std::string(flag) + (lora_for ? " does not apply with" : " needs") + " --lora-for");
      }
    }
    if (lora_for) {
      write_adapter(args, *output, *lora_for);
    } else {
      write_model(args, *output);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-synth: %s\n", e.what());
    return 1;
  }
}
