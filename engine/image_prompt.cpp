#include "engine/image_prompt.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>

#include "engine/image/image_decode.h"
#include "engine/kv/tier_fingerprint.h"
#include "engine/vision/image_preprocess.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

[[noreturn]] void refuse(const std::string& what) { throw Error("bad request: " + what); }

int32_t piece_id(const Tokenizer& tokenizer, std::string_view piece, const VisionConfig& config) {
  const int32_t id = tokenizer.find_piece(piece);
  if (id < 0) {
    throw Error(std::string("the vision projector (") + projector_type_name(config.projector) + ") needs the token " +
                std::string(piece) +
                ", which the model's vocabulary does not have: " + "is the projector this model's?");
  }
  return id;
}

// The image's pixels hashed with their size, seeded with the projector's fingerprint: the key
// of its rows, in the row cache and in the prefix cache's keys (whose disk tier outlives the
// engine, so another projector file must not find these rows' pages).
uint64_t pixels_hash(const PixelPlanes& p, uint64_t projector) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset_withSeed(state, projector);
  const int32_t size[2] = {p.width, p.height};
  XXH3_64bits_update(state, size, sizeof size);
  XXH3_64bits_update(state, p.values.data(), p.values.size() * sizeof(float));
  const uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return h;
}

// Image `index` decoded and preprocessed, its rows to go at `position` (after its begin tokens).
SequenceImage prepare(const RequestImage& image, size_t index, const VisionModel& vision) {
  try {
    const RgbImage rgb = decode_image(std::as_bytes(std::span(image.data.data(), image.data.size())));
    PreprocessedImage pre = preprocess_image(rgb, vision.config);
    SequenceImage out;
    out.tokens = pre.tokens();
    out.grid_rows = pre.token_rows;
    out.grid_cols = pre.token_cols;
    out.hash = pixels_hash(pre.pixels, vision.fingerprint);
    out.pixels = std::make_shared<const PixelPlanes>(std::move(pre.pixels));
    return out;
  } catch (const Error& e) {
    refuse("image " + std::to_string(index) + ": " + e.what());
  }
}

}  // namespace

std::unique_ptr<VisionModel> load_vision(const EngineConfig& c, const Model& model) {
  if (c.mmproj_path.empty()) return nullptr;
  if (model.config.is_encoder()) throw Error(c.mmproj_path + ": an encoder model (" + model.path + ") takes no images");
  auto vision = std::make_unique<VisionModel>(load_projector(c.mmproj_path));
  const VisionConfig& v = vision->config;
  if (v.projection_dim != model.config.dim) {
    throw Error(c.mmproj_path + ": the projector's rows are " + std::to_string(v.projection_dim) +
                " wide but the model's embeddings are " + std::to_string(model.config.dim) +
                ": the projector is not this model's");
  }
  const bool qwen = v.projector == ProjectorType::Qwen2VL || v.projector == ProjectorType::Qwen25VL;
  if (qwen && !model.config.has_mrope()) {
    throw Error(c.mmproj_path + ": Qwen2-VL's images are placed by M-RoPE positions, which " + model.path + " (" +
                architecture_name(model.config.arch) + ") does not have: pair it with its qwen2vl language model");
  }
  vision->fingerprint = contents_hash(vision->file->bytes());
  return vision;
}

bool images_attend_both_ways(ProjectorType projector) { return projector == ProjectorType::Gemma3; }

int32_t max_step_positions(const EngineConfig& config, const VisionModel* vision) {
  if (!vision || !images_attend_both_ways(vision->config.projector)) return config.max_tokens_per_step;
  return std::max(config.max_tokens_per_step, vision->config.tokens_per_image);
}

std::vector<ChatPrompt> split_at_marker(const ChatPrompt& prompt, std::string_view marker) {
  if (marker.empty()) return {prompt};
  std::vector<ChatPrompt> pieces;
  size_t from = 0;
  for (;;) {
    const size_t at = prompt.text.find(marker, from);
    const size_t end = at == std::string::npos ? prompt.text.size() : at;
    ChatPrompt& piece = pieces.emplace_back(ChatPrompt{prompt.text.substr(from, end - from), {}});
    for (const TextSpan& span : prompt.data_spans) {
      const size_t b = std::max(span.begin, from), e = std::min(span.end, end);
      if (b < e) piece.data_spans.push_back({b - from, e - from});
    }
    if (at == std::string::npos) return pieces;
    from = at + marker.size();
  }
}

ImageTokens image_tokens(const VisionConfig& config, const Tokenizer& tokenizer) {
  ImageTokens t;
  switch (config.projector) {
    case ProjectorType::LlavaMlp: break;
    case ProjectorType::Gemma3:
      t.begin = {piece_id(tokenizer, "<start_of_image>", config)};
      t.end = {piece_id(tokenizer, "<end_of_image>", config)};
      t.placeholder = piece_id(tokenizer, "<image_soft_token>", config);
      break;
    case ProjectorType::Qwen2VL:
    case ProjectorType::Qwen25VL:
      t.begin = {piece_id(tokenizer, "<|vision_start|>", config)};
      t.end = {piece_id(tokenizer, "<|vision_end|>", config)};
      t.placeholder = piece_id(tokenizer, "<|image_pad|>", config);
      break;
  }
  return t;
}

ImagePrompt lay_out_images(const Request& request, const VisionModel& vision, const ImageTokens& image_tokens,
                           const Tokenizer& tokenizer) {
  // The prompt's text pieces as ids, and where each image goes among them.
  std::vector<int32_t> text;
  std::vector<int32_t> at;
  if (request.prompt_ids.empty()) {
    if (request.image_marker.empty()) refuse("images in a text prompt need a non-empty image_marker");
    const std::vector<ChatPrompt> pieces = split_at_marker(ChatPrompt{request.prompt, {}}, request.image_marker);
    for (size_t k = 0; k < pieces.size(); ++k) {
      if (k > 0) at.push_back(int32_t(text.size()));
      const std::vector<int32_t> ids =
          tokenizer.encode(pieces[k].text, k == 0 && tokenizer.add_bos(), request.parse_special);
      text.insert(text.end(), ids.begin(), ids.end());
    }
    if (at.size() != request.images.size()) {
      refuse("the prompt has " + std::to_string(at.size()) + " image markers ('" + request.image_marker + "') for " +
             std::to_string(request.images.size()) + " images");
    }
  } else {
    text = request.prompt_ids;
    for (size_t i = 0; i < request.images.size(); ++i) {
      const int32_t p = request.images[i].position;
      if (p < 0 || p > int32_t(text.size()) || (!at.empty() && p < at.back())) {
        refuse("image " + std::to_string(i) + "'s position " + std::to_string(p) + " is outside the prompt (0.." +
               std::to_string(text.size()) + ") or before the previous image's");
      }
      at.push_back(p);
    }
  }

  ImagePrompt out;
  size_t copied = 0;
  for (size_t i = 0; i < request.images.size(); ++i) {
    out.tokens.insert(out.tokens.end(), text.begin() + ptrdiff_t(copied), text.begin() + at[i]);
    copied = size_t(at[i]);
    SequenceImage image = prepare(request.images[i], i, vision);
    image.bidirectional = images_attend_both_ways(vision.config.projector);
    out.tokens.insert(out.tokens.end(), image_tokens.begin.begin(), image_tokens.begin.end());
    image.position = int32_t(out.tokens.size());
    out.tokens.insert(out.tokens.end(), size_t(image.tokens), image_tokens.placeholder);
    out.tokens.insert(out.tokens.end(), image_tokens.end.begin(), image_tokens.end.end());
    out.images.push_back(std::move(image));
  }
  out.tokens.insert(out.tokens.end(), text.begin() + ptrdiff_t(copied), text.end());
  return out;
}

}  // namespace pagoda
