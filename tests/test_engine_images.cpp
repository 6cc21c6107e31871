// Requests with images through the engine (EngineConfig::mmproj_path, Request::images): the
// encoder's rows go where each image stands in the prompt, answers do not depend on what shares
// the batch, and bad images or layouts are refused at submit with what is wrong.

#include <gtest/gtest.h>
#include <random>

#include "engine/forward/model_runner.h"
#include "engine/forward/vision_encoder.h"
#include "engine/image/image_decode.h"
#include "engine/sampling/logprobs.h"
#include "engine/vision/image_preprocess.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/batch_driver.h"
#include "support/test_support.h"
#include "support/vision_models.h"
#include "testing/synth.h"
#include "testing/vision_synth.h"

namespace pagoda {
namespace {

using test::gemma3_files;
using test::llava_files;
using test::png_file;
using test::VisionFiles;

EngineConfig vision_config(const VisionFiles& files = llava_files()) {
  EngineConfig c;
  c.model_path = files.model;
  c.mmproj_path = files.mmproj;
  c.threads = 2;
  c.kv_pages = 256;
  c.tokens_per_page = 16;
  return c;
}

Request image_request(const std::string& image, int32_t max_tokens = 8) {
  Request r;
  r.prompt = "A picture: <__image__> What is in it?";
  r.images = {{image, -1}};
  r.max_new_tokens = max_tokens;
  r.logprobs = 2;
  r.ignore_eos = true;
  return r;
}

void expect_same_image_same_answer(const VisionFiles& files) {
  Engine engine(vision_config(files));
  ASSERT_TRUE(engine.takes_images());
  const std::string a = png_file(40, 30, 1), b = png_file(40, 30, 2);
  const std::vector<Completion> got = test::run_all(engine, {image_request(a), image_request(a), image_request(b)});
  test::expect_same_completions({got[1]}, {got[0]});
  EXPECT_NE(got[2].logprobs[0].logprob, got[0].logprobs[0].logprob);
  EXPECT_EQ(got[0].finish_reason, FinishReason::Length);
  EXPECT_GT(got[0].prompt_tokens, 16);  // the image's rows count as prompt positions
}

TEST(EngineImages, TheSameImageGivesTheSameAnswerAndAnotherImageAnotherOne) {
  expect_same_image_same_answer(llava_files());
}

TEST(EngineImages, AGemma3ImageGivesTheSameAnswerTwiceAndAnotherImageAnotherOne) {
  expect_same_image_same_answer(gemma3_files());
}

// Alone, then among image and text requests in steps of `max_tokens` tokens and chunks of
// `chunk`, smaller than the image.
void expect_answer_independent_of_steps(const EngineConfig& config, int32_t max_tokens, int32_t chunk) {
  const std::string a = png_file(40, 30, 1);
  std::vector<Completion> alone;
  {
    Engine engine(config);
    alone = test::run_all(engine, {image_request(a)});
  }
  EngineConfig c = config;
  c.max_tokens_per_step = max_tokens;
  c.prefill_chunk = chunk;
  Engine engine(c);
  std::vector<Request> mixed;
  for (uint32_t i = 0; i < 5; ++i) {
    Request other = image_request(png_file(20 + int32_t(i) * 9, 50, 10 + i), 6);
    if (i % 2) {
      other.images.clear();
      other.prompt = "text only, number " + std::to_string(i);
    }
    mixed.push_back(std::move(other));
  }
  mixed.insert(mixed.begin() + 2, image_request(a));
  const std::vector<Completion> got = test::run_all(engine, mixed);
  test::expect_same_completions({got[2]}, alone);
  test::expect_engine_idle(engine);
}

TEST(EngineImages, AnImageRequestsAnswerDoesNotDependOnWhatSharesItsSteps) {
  expect_answer_independent_of_steps(vision_config(), 24, 7);  // the image's rows come over several chunks
}

// Its 16 rows come in one step, the first chunk's, past the budget when they must.
TEST(EngineImages, AGemma3ImageRequestsAnswerDoesNotDependOnStepsSmallerThanItsImage) {
  expect_answer_independent_of_steps(vision_config(gemma3_files()), 12, 5);
}

// The encoder's rows for `image` (its file's bytes) under the projector `mmproj`, encoded by
// hand on `runner`'s arena, and the image as preprocessed.
struct HandRows {
  PreprocessedImage pre;
  std::vector<float> rows;
  int32_t count = 0;
};
HandRows encode_by_hand(const std::string& mmproj, const std::string& image, ModelRunner& runner) {
  const VisionModel vision = load_projector(mmproj);
  VisionEncoder encoder(vision, runner.arena());
  HandRows out{preprocess_image(decode_image(std::as_bytes(std::span(image.data(), image.size()))), vision.config)};
  std::vector<int32_t> counts;
  const PixelPlanes* input = &out.pre.pixels;
  encoder.encode(std::span(&input, 1), out.rows, counts);
  out.count = counts[0];
  return out;
}

TEST(EngineImages, TheEncodersRowsStandWhereTheImageIsInThePrompt) {
  Engine engine(vision_config());
  Request r = image_request(png_file(33, 47, 3), 6);
  r.sampling.temperature = 0.0f;
  const Completion got = engine.submit(r).get();
  ASSERT_EQ(got.finish_reason, FinishReason::Length) << got.error;

  // The same by hand: the encoder's rows after the tokens before the marker, then the rest.
  const Model model = load_model(llava_files().model);
  ModelRunner runner(model, 2);
  const HandRows image = encode_by_hand(llava_files().mmproj, r.images[0].data, runner);
  ASSERT_EQ(image.count, image.pre.tokens());
  std::vector<int32_t> prompt = model.tokenizer.encode("A picture: ", model.tokenizer.add_bos());
  const auto image_at = int32_t(prompt.size());
  prompt.insert(prompt.end(), size_t(image.count), 0);
  const std::vector<int32_t> rest = model.tokenizer.encode(" What is in it?", false);
  prompt.insert(prompt.end(), rest.begin(), rest.end());
  EXPECT_EQ(got.prompt_tokens, int32_t(prompt.size()));
  PagePool pool(KvLayout::for_model(model.config, 16), 256);
  std::vector<test::DrivenSequence> seqs;
  seqs.emplace_back(prompt, int32_t(prompt.size()) + 5, -1, 16);
  seqs.back().embeddings = {{image_at, image.count, image.rows.data()}};
  test::run_together(runner, pool, seqs, 64);
  EXPECT_EQ(seqs[0].generated(), got.token_ids);
}

TEST(EngineImages, AMarkerInTextAndAPositionInIdsPlaceTheImageAlike) {
  Engine engine(vision_config());
  const std::string a = png_file(40, 30, 4);
  Request by_marker = image_request(a);
  Request by_position = image_request(a);
  by_position.prompt.clear();
  by_position.prompt_ids = engine.tokenize("A picture: ", engine.add_bos());
  const auto at = int32_t(by_position.prompt_ids.size());
  const std::vector<int32_t> rest = engine.tokenize(" What is in it?", false);
  by_position.prompt_ids.insert(by_position.prompt_ids.end(), rest.begin(), rest.end());
  by_position.images[0].position = at;
  const std::vector<Completion> got = test::run_all(engine, {by_marker, by_position});
  test::expect_same_completions({got[1]}, {got[0]});
}

void expect_refused(Engine& engine, Request r, const std::string& words) {
  try {
    engine.submit(std::move(r)).get();
    ADD_FAILURE() << "not refused; expected: " << words;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(EngineImages, BadImagesAndLayoutsAreRefusedAtSubmitSayingWhat) {
  Engine engine(vision_config());
  const std::string a = png_file(40, 30, 5);
  Request two_markers = image_request(a);
  two_markers.prompt += " <__image__>";
  expect_refused(engine, two_markers, "2 image markers ('<__image__>') for 1 images");
  Request broken = image_request(a.substr(0, a.size() / 2));
  expect_refused(engine, broken, "bad request: image 0:");
  Request gif = image_request("GIF89a\x01\x00\x01\x00");
  expect_refused(engine, gif, "GIF");
  Request far = image_request(a);
  far.prompt = "";
  far.prompt_ids = {1, 2, 3};
  far.images[0].position = 4;
  expect_refused(engine, far, "position 4 is outside the prompt");
  Request scored = image_request(a);
  scored.prompt_logprobs = 0;
  expect_refused(engine, scored, "prompt_logprobs");
  EXPECT_EQ(engine.metrics().kv_pages_used, 0);

  EngineConfig text = vision_config();
  text.mmproj_path.clear();
  Engine text_only(text);
  EXPECT_FALSE(text_only.takes_images());
  expect_refused(text_only, image_request(a), "the model takes no images");
}

TEST(EngineImages, AProjectorOfAnotherWidthIsRefusedAtStart) {
  EngineConfig c = vision_config();
  c.model_path = test::tiny_gqa_model();  // 64 wide, the projector's rows 96
  EXPECT_THROW({ Engine engine(c); }, Error);
}

void expect_clean_shutdown(const VisionFiles& files) {
  Engine engine(vision_config(files));
  std::vector<RequestHandle> handles;
  for (uint32_t i = 0; i < 6; ++i) handles.push_back(engine.submit(image_request(png_file(30, 30, 20 + i), 200)));
  handles[1].cancel();
  engine.shutdown();
  for (RequestHandle& h : handles) {
    const Completion c = h.get();
    EXPECT_TRUE(c.finish_reason == FinishReason::Cancelled || c.finish_reason == FinishReason::Length);
  }
  EXPECT_EQ(engine.metrics().kv_pages_used, 0);
}

TEST(EngineImages, ShutdownWithImageRequestsInFlightResolvesEveryFutureAndFreesEveryPage) {
  expect_clean_shutdown(llava_files());
}

TEST(EngineImages, ShutdownWithGemma3ImageRequestsInFlightResolvesEveryFutureAndFreesEveryPage) {
  expect_clean_shutdown(gemma3_files());
}

// The engine's answer is the runner's by hand over the same prompt: the encoder's rows between
// <start_of_image> and <end_of_image>, attending to each other both ways; attending causally,
// the same rows give other logprobs.
TEST(EngineImages, AGemma3ImagesRowsAttendBothWaysBetweenItsImageTokensAsTheRunnerDoesByHand) {
  Engine engine(vision_config(gemma3_files()));
  Request r = image_request(png_file(33, 47, 3), 6);
  r.sampling.temperature = 0.0f;
  const Completion got = engine.submit(r).get();
  ASSERT_EQ(got.finish_reason, FinishReason::Length) << got.error;

  const Model model = load_model(gemma3_files().model);
  ModelRunner runner(model, 2);
  const HandRows image = encode_by_hand(gemma3_files().mmproj, r.images[0].data, runner);
  ASSERT_EQ(image.count, 16);
  const Tokenizer& tok = model.tokenizer;
  std::vector<int32_t> prompt = tok.encode("A picture: ", tok.add_bos());
  prompt.push_back(tok.find_piece("<start_of_image>"));
  const auto image_at = int32_t(prompt.size());
  prompt.insert(prompt.end(), size_t(image.count), tok.find_piece("<image_soft_token>"));
  prompt.push_back(tok.find_piece("<end_of_image>"));
  const std::vector<int32_t> rest = tok.encode(" What is in it?", false);
  prompt.insert(prompt.end(), rest.begin(), rest.end());
  EXPECT_EQ(got.prompt_tokens, int32_t(prompt.size()));
  PagePool pool(KvLayout::for_model(model.config, 16, vision_config(gemma3_files()).kv_cache_type), 256);
  for (bool bidirectional : {true, false}) {
    std::vector<test::DrivenSequence> seqs;
    seqs.emplace_back(prompt, int32_t(prompt.size()) + 5, -1, 16);
    seqs.back().embeddings = {{image_at, image.count, image.rows.data(), bidirectional}};
    test::run_together(runner, pool, seqs, 64);
    const float first = token_logprobs(seqs[0].logits[0], seqs[0].generated()[0], 2).logprob;
    if (bidirectional) {
      EXPECT_EQ(seqs[0].generated(), got.token_ids);
      for (size_t i = 0; i < got.token_ids.size(); ++i)
        EXPECT_EQ(token_logprobs(seqs[0].logits[i], got.token_ids[i], 2).logprob, got.logprobs[i].logprob) << i;
    } else {
      EXPECT_NE(first, got.logprobs[0].logprob);
    }
  }
}

// A tiny Qwen2-VL pair: a random qwen2vl (M-RoPE) of width 96 with Qwen2's vocabulary, which
// holds the vision tokens, and a random Qwen2-VL projector into it; or the same model as plain
// qwen2 (no M-RoPE).
std::string qwen2vl_model(const std::string& vocab, Architecture arch) {
  SynthSpec spec;
  spec.config = test::tiny_gqa_config();
  spec.config.arch = arch;
  spec.config.dim = 96, spec.config.n_heads = 6, spec.config.context_length = 512;
  spec.vocab_path = vocab;
  spec.seed = 21;
  const std::string path = test::scratch_path(std::string(architecture_name(arch)) + "-vision-lm.gguf");
  write_synth_model(path, spec);
  return path;
}

EngineConfig qwen2vl_config(const std::string& vocab, Architecture arch = Architecture::Qwen2VL) {
  EngineConfig c = vision_config();
  c.model_path = qwen2vl_model(vocab, arch);
  c.mmproj_path = test::scratch_path("qwen2vl-mmproj.gguf");
  VisionSynthSpec spec;
  spec.config = find_vision_synth_preset(ProjectorType::Qwen2VL, "tiny").config;
  spec.config.projection_dim = 96;
  spec.seed = 22;
  write_synth_projector(c.mmproj_path, spec);
  return c;
}

TEST(EngineImagesQwen2VL, TheEncodersRowsStandOnTheirGridsMRopePositions) {
  PAGODA_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-qwen2.gguf");
  const EngineConfig config = qwen2vl_config(vocab);
  Engine engine(config);
  Request r = image_request(test::png_file(90, 60, 6), 6);  // smart-resized to 84×56: 2×3 merged rows
  r.sampling.temperature = 0.0f;
  const Completion got = engine.submit(r).get();
  ASSERT_EQ(got.finish_reason, FinishReason::Length) << got.error;

  // By hand: the encoder's rows between <|vision_start|> and <|vision_end|>, on their grid.
  const Model model = load_model(config.model_path);
  ModelRunner runner(model, 2);
  const HandRows image = encode_by_hand(config.mmproj_path, r.images[0].data, runner);
  ASSERT_EQ(image.pre.token_rows, 2);
  ASSERT_EQ(image.pre.token_cols, 3);
  std::vector<int32_t> prompt = model.tokenizer.encode("A picture: ", false);
  prompt.push_back(model.tokenizer.find_piece("<|vision_start|>"));
  const auto image_at = int32_t(prompt.size());
  prompt.insert(prompt.end(), size_t(image.count), model.tokenizer.find_piece("<|image_pad|>"));
  prompt.push_back(model.tokenizer.find_piece("<|vision_end|>"));
  const std::vector<int32_t> rest = model.tokenizer.encode(" What is in it?", false);
  prompt.insert(prompt.end(), rest.begin(), rest.end());
  EXPECT_EQ(got.prompt_tokens, int32_t(prompt.size()));
  PagePool pool(KvLayout::for_model(model.config, 16), 256);
  std::vector<test::DrivenSequence> seqs;
  seqs.emplace_back(prompt, int32_t(prompt.size()) + 5, -1, 16);
  seqs.back().embeddings = {{image_at, image.count, image.rows.data()}};
  seqs.back().image_grids = {{image_at, 2, 3}};
  test::run_together(runner, pool, seqs, 64);
  EXPECT_EQ(seqs[0].generated(), got.token_ids);
}

TEST(EngineImagesQwen2VL, AnImageRequestsAnswerDoesNotDependOnWhatSharesItsSteps) {
  PAGODA_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-qwen2.gguf");
  expect_answer_independent_of_steps(qwen2vl_config(vocab), 16, 5);  // the image's rows come over several chunks
}

TEST(EngineImagesQwen2VL, AQwenProjectorNeedsAModelWithMRope) {
  PAGODA_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-qwen2.gguf");
  try {
    Engine engine(qwen2vl_config(vocab, Architecture::Qwen2));
    ADD_FAILURE() << "a qwen2 model took a Qwen2-VL projector";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("placed by M-RoPE positions"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pagoda
