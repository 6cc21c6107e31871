// Requests with images through the engine (EngineConfig::mmproj_path, Request::images): the
// encoder's rows go where each image stands in the prompt, answers do not depend on what shares
// the batch, and bad images or layouts are refused at submit with what is wrong.

#include <gtest/gtest.h>

#include "engine/forward/model_runner.h"
#include "engine/forward/vision_encoder.h"
#include "engine/image/image_decode.h"
#include "engine/vision/image_preprocess.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"
#include "support/batch_driver.h"
#include "support/test_support.h"
#include "support/vision_models.h"

namespace pagoda {
namespace {

using test::llava_files;
using test::png_file;

EngineConfig vision_config() {
  EngineConfig c;
  c.model_path = llava_files().model;
  c.mmproj_path = llava_files().mmproj;
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

TEST(EngineImages, TheSameImageGivesTheSameAnswerAndAnotherImageAnotherOne) {
  Engine engine(vision_config());
  ASSERT_TRUE(engine.takes_images());
  const std::string a = png_file(40, 30, 1), b = png_file(40, 30, 2);
  const std::vector<Completion> got = test::run_all(engine, {image_request(a), image_request(a), image_request(b)});
  test::expect_same_completions({got[1]}, {got[0]});
  EXPECT_NE(got[2].logprobs[0].logprob, got[0].logprobs[0].logprob);
  EXPECT_EQ(got[0].finish_reason, FinishReason::Length);
  EXPECT_GT(got[0].prompt_tokens, 16);  // the image's rows count as prompt positions
}

TEST(EngineImages, AnImageRequestsAnswerDoesNotDependOnWhatSharesItsSteps) {
  const std::string a = png_file(40, 30, 1);
  std::vector<Completion> alone;
  {
    Engine engine(vision_config());
    alone = test::run_all(engine, {image_request(a)});
  }
  EngineConfig c = vision_config();
  c.max_tokens_per_step = 24;  // the image's rows come over several chunks
  c.prefill_chunk = 7;
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
}

TEST(EngineImages, TheEncodersRowsStandWhereTheImageIsInThePrompt) {
  Engine engine(vision_config());
  Request r = image_request(png_file(33, 47, 3), 6);
  r.sampling.temperature = 0.0f;
  const Completion got = engine.submit(r).get();
  ASSERT_EQ(got.finish_reason, FinishReason::Length) << got.error;

  // The same by hand: the encoder's rows after the tokens before the marker, then the rest.
  const Model model = load_model(llava_files().model);
  const VisionModel vision = load_projector(llava_files().mmproj);
  ModelRunner runner(model, 2);
  VisionEncoder encoder(vision, runner.arena());
  const PreprocessedImage pre = preprocess_image(
      decode_image(std::as_bytes(std::span(r.images[0].data.data(), r.images[0].data.size()))), vision.config);
  std::vector<float> rows;
  std::vector<int32_t> counts;
  const PixelPlanes* input = &pre.pixels;
  encoder.encode(std::span(&input, 1), rows, counts);
  ASSERT_EQ(counts[0], pre.tokens());
  std::vector<int32_t> prompt = model.tokenizer.encode("A picture: ", model.tokenizer.add_bos());
  const auto image_at = int32_t(prompt.size());
  prompt.insert(prompt.end(), size_t(counts[0]), 0);
  const std::vector<int32_t> rest = model.tokenizer.encode(" What is in it?", false);
  prompt.insert(prompt.end(), rest.begin(), rest.end());
  EXPECT_EQ(got.prompt_tokens, int32_t(prompt.size()));
  PagePool pool(KvLayout::for_model(model.config, 16), 256);
  std::vector<test::DrivenSequence> seqs;
  seqs.emplace_back(prompt, int32_t(prompt.size()) + 5, -1, 16);
  seqs.back().embeddings = {{image_at, counts[0], rows.data()}};
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

TEST(EngineImages, ShutdownWithImageRequestsInFlightResolvesEveryFutureAndFreesEveryPage) {
  Engine engine(vision_config());
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

}  // namespace
}  // namespace pagoda
