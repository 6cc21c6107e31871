#pragma once
// A request's images laid into its prompt: each decoded and preprocessed as its model family's
// processor does (engine/image, engine/vision), given the prompt positions its rows take, and
// wrapped in the family's image tokens, as llama.cpp's mtmd lays them out:
//   LLaVA:      the rows alone;
//   Gemma 3:    <start_of_image> rows <end_of_image>;
//   Qwen2-VL:   <|vision_start|> rows <|vision_end|>.
// Each row's position holds a placeholder id in the token list (the family's image pad token,
// Gemma 3's <image_soft_token>, or else 0); the forward pass reads the image's rows there
// instead (BatchEntry::embeddings), never the placeholder's embedding.

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/model/model.h"
#include "engine/request/sequence.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/vision/vision_model.h"
#include "pagoda/chat.h"
#include "pagoda/engine_config.h"
#include "pagoda/request.h"

namespace pagoda {

// EngineConfig::mmproj_path's projector for `model`; null without one. Throws pagoda::Error when
// the file does not load, its rows are not the model's width, the model is an encoder, or the
// family is one the engine does not run yet.
std::unique_ptr<VisionModel> load_vision(const EngineConfig& config, const Model& model);

// Whether the family's language model attends both ways within an image (SequenceImage::
// bidirectional): Gemma 3's, as transformers opens its causal mask over each image and llama.cpp's
// mtmd decodes an image's rows in one non-causal batch.
bool images_attend_both_ways(ProjectorType projector);

// The most positions of one sequence a step computes: max_tokens_per_step, or one image's rows
// when they attend both ways and are more (the step planner never cuts such an image).
int32_t max_step_positions(const EngineConfig& config, const VisionModel* vision);

// `prompt` cut at each `marker` (which becomes no text), each piece with the data spans that
// fall in it; one piece, the prompt, when the marker is empty or absent.
std::vector<ChatPrompt> split_at_marker(const ChatPrompt& prompt, std::string_view marker);

// The ids around an image and the one standing for each of its rows.
struct ImageTokens {
  std::vector<int32_t> begin, end;
  int32_t placeholder = 0;
};

// The image tokens of `config`'s family in `tokenizer`'s vocabulary. Throws pagoda::Error when
// the vocabulary lacks one the family needs (a projector paired with another family's model).
ImageTokens image_tokens(const VisionConfig& config, const Tokenizer& tokenizer);

struct ImagePrompt {
  std::vector<int32_t> tokens;        // the whole prompt, BOS first for a text prompt that adds it
  std::vector<SequenceImage> images;  // by position: pixels and bidirectional set, rows not yet
};

// Lays out `request`'s prompt and images. A text prompt is cut at each image_marker, and its
// pieces tokenized one by one (BOS before the first when the vocabulary adds it; control tokens
// parsed as Request::parse_special says); prompt_ids take each image at its position. Throws
// pagoda::Error ("bad request: ...") for markers that do not match the images one for one,
// positions out of order or outside the prompt, and an image that does not decode or preprocess
// (the decoder's words, naming the image by its index).
ImagePrompt lay_out_images(const Request& request, const VisionModel& vision, const ImageTokens& image_tokens,
                           const Tokenizer& tokenizer);

}  // namespace pagoda
