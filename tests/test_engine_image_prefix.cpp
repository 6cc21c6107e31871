// Prompts with images in the prefix cache, end to end: a conversation that sends its image again
// takes the pages of the image and what follows it from the cache, in memory or on disk, and
// answers bit for bit as an engine that computes everything; another image in the same place, or
// the same image under another projector, finds nothing from the image on; a hit that ends
// inside an image feeds the image's other rows, but one whose rows attend both ways (Gemma 3's)
// is hit whole or not at all; the text before an image shares its pages with text-only prompts.

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "pagoda/engine.h"
#include "support/test_support.h"
#include "support/vision_models.h"

namespace pagoda {
namespace {

using namespace std::chrono_literals;

constexpr int32_t kTokensPerPage = 4;  // an image's 16 rows span four or five pages

EngineConfig image_prefix_config(const test::VisionFiles& files = test::llava_files()) {
  EngineConfig c;
  c.model_path = files.model;
  c.mmproj_path = files.mmproj;
  c.threads = 2;
  c.kv_pages = 256;
  c.tokens_per_page = kTokensPerPage;
  return c;
}

// `ids` with `image` before ids[at], greedy, with logprobs.
Request picture_request(const std::vector<int32_t>& ids, int32_t at, const std::string& image, int32_t n = 6) {
  Request r = test::greedy_request(ids, n);
  r.images = {{image, at}};
  r.logprobs = 2;
  return r;
}

int32_t whole_pages(int64_t tokens) { return int32_t(tokens / kTokensPerPage * kTokensPerPage); }

// A question about a picture, then a second turn that repeats it with the answer and asks more.
struct Conversation {
  std::vector<int32_t> before;  // the ids before the image
  std::vector<int32_t> after;   // and after it
  std::string image;

  Conversation(const Engine& engine, std::string picture)
      : before(engine.tokenize("A picture: ", engine.add_bos())),
        after(engine.tokenize(" What is in it?", false)),
        image(std::move(picture)) {}

  int32_t image_at() const { return int32_t(before.size()); }
  Request first() const {
    std::vector<int32_t> ids = before;
    ids.insert(ids.end(), after.begin(), after.end());
    return picture_request(ids, image_at(), image);
  }
  Request second(const Engine& engine, const Completion& answer) const {
    Request r = first();
    r.prompt_ids.insert(r.prompt_ids.end(), answer.token_ids.begin(), answer.token_ids.end());
    const std::vector<int32_t> more = engine.tokenize(" And what else?", false);
    r.prompt_ids.insert(r.prompt_ids.end(), more.begin(), more.end());
    return r;
  }
};

// What an engine without a prefix cache answers, one request after the other.
std::vector<Completion> computed_answers(const std::vector<Request>& requests,
                                         const test::VisionFiles& files = test::llava_files()) {
  EngineConfig c = image_prefix_config(files);
  c.prefix_caching = false;
  Engine engine(c);
  std::vector<Completion> out;
  for (const Request& r : requests) out.push_back(test::run_all(engine, {r})[0]);
  return out;
}

// The positions the first turn left in the KV cache: its prompt and every answer token but the
// last (which was sampled, never fed).
int64_t cached_after(const Completion& answer) { return answer.prompt_tokens + int64_t(answer.token_ids.size()) - 1; }

TEST(EngineImagePrefix, ASecondTurnSendingTheImageAgainHitsPastItAndAnswersAsComputingDoes) {
  Engine engine(image_prefix_config());
  const Conversation talk(engine, test::png_file(40, 30, 1));
  const Completion one = test::run_all(engine, {talk.first()})[0];
  ASSERT_EQ(one.finish_reason, FinishReason::Length) << one.error;
  EXPECT_EQ(engine.metrics().prefix_hit_tokens, 0);
  const int32_t rows = one.prompt_tokens - int32_t(talk.before.size() + talk.after.size());
  ASSERT_EQ(rows, 16);

  const Completion two = test::run_all(engine, {talk.second(engine, one)})[0];
  const int64_t hit = engine.metrics().prefix_hit_tokens;
  EXPECT_EQ(hit, whole_pages(cached_after(one))) << "every full page of the first turn";
  EXPECT_GT(hit, talk.image_at() + rows) << "the image and what follows it";
  test::expect_same_completions({one, two}, computed_answers({talk.first(), talk.second(engine, one)}));
  test::expect_engine_idle(engine);
}

TEST(EngineImagePrefix, AnotherImageInTheSamePlaceFindsNothingFromTheImagesFirstPageOn) {
  Engine engine(image_prefix_config());
  const Conversation a(engine, test::png_file(40, 30, 1)), b(engine, test::png_file(40, 30, 2));
  const Completion with_a = test::run_all(engine, {a.first()})[0];
  const Completion with_b = test::run_all(engine, {b.first()})[0];
  // The same ids, placeholders included: only the text pages before the image are shared.
  EXPECT_EQ(engine.metrics().prefix_hit_tokens, whole_pages(b.image_at()));
  EXPECT_NE(with_b.logprobs[0].logprob, with_a.logprobs[0].logprob);
  test::expect_same_completions({with_a, with_b}, computed_answers({a.first(), b.first()}));
}

TEST(EngineImagePrefix, AHitEndingInsideAnImageFeedsTheImagesOtherRows) {
  Engine engine(image_prefix_config());
  const Conversation talk(engine, test::png_file(40, 30, 3));
  // The prompt ends with the image: its last page, which holds the last row, is always fed, so
  // a second ask hits up to a page boundary inside the image.
  const Request ends_with_image = picture_request(talk.before, talk.image_at(), talk.image);
  const Completion one = test::run_all(engine, {ends_with_image})[0];
  const Completion two = test::run_all(engine, {ends_with_image})[0];
  const int64_t hit = engine.metrics().prefix_hit_tokens;
  EXPECT_EQ(hit, whole_pages(one.prompt_tokens - 1));
  EXPECT_GT(hit, talk.image_at());
  EXPECT_LT(hit, one.prompt_tokens);
  test::expect_same_completions({one, two}, computed_answers({ends_with_image, ends_with_image}));
}

// Gemma 3's image rows attend to each other both ways, so an image is computed whole: a hit
// that covers the image goes on past it (a second turn), one that would end inside it stops at
// the page its first row is on (a prompt that ends with the image, whose last page is fed).
TEST(EngineImagePrefix, AGemma3ImageIsHitWholeOrNotAtAll) {
  const test::VisionFiles& gemma = test::gemma3_files();
  Engine engine(image_prefix_config(gemma));
  const Conversation talk(engine, test::png_file(40, 30, 5));
  const int32_t first_row = talk.image_at() + 1;  // after <start_of_image>
  const Completion one = test::run_all(engine, {talk.first()})[0];
  ASSERT_EQ(one.finish_reason, FinishReason::Length) << one.error;
  const int32_t rows = 16;
  ASSERT_GT(one.prompt_tokens, first_row + rows + int32_t(talk.after.size()) - 1) << "the image's rows and marks";
  const Completion two = test::run_all(engine, {talk.second(engine, one)})[0];
  const int64_t second_hit = engine.metrics().prefix_hit_tokens;
  EXPECT_EQ(second_hit, whole_pages(cached_after(one))) << "every full page of the first turn";
  EXPECT_GE(second_hit, first_row + rows) << "the image and what follows it";

  const Request ends_with_image = picture_request(talk.before, talk.image_at(), talk.image);
  const Completion three = test::run_all(engine, {ends_with_image})[0];
  const Completion four = test::run_all(engine, {ends_with_image})[0];
  ASSERT_GT(whole_pages(three.prompt_tokens - 1), first_row) << "a hit of every full page ends inside the image";
  ASSERT_LT(whole_pages(three.prompt_tokens - 1), first_row + rows);
  EXPECT_EQ(engine.metrics().prefix_hit_tokens - second_hit, 2 * whole_pages(first_row)) << "turns 3 and 4 alike";
  test::expect_same_completions(
      {one, two, three, four},
      computed_answers({talk.first(), talk.second(engine, one), ends_with_image, ends_with_image}, gemma));
  test::expect_engine_idle(engine);
}

TEST(EngineImagePrefix, TheTextBeforeAnImageSharesItsPagesWithTextOnlyPrompts) {
  Engine engine(image_prefix_config());
  const Conversation talk(engine, test::png_file(40, 30, 4));
  std::vector<int32_t> text_only = talk.before;
  const std::vector<int32_t> more = engine.tokenize(" There is no picture, only a long sentence.", false);
  text_only.insert(text_only.end(), more.begin(), more.end());
  test::run_all(engine, {test::greedy_request(text_only, 2)});
  const Completion got = test::run_all(engine, {talk.first()})[0];
  EXPECT_EQ(engine.metrics().prefix_hit_tokens, whole_pages(talk.image_at()));
  test::expect_same_completions({got}, computed_answers({talk.first()}));
}

// Waits until every page sent to disk is written.
void settle(const Engine& engine) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (engine.metrics().kv_disk_write_backlog > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(engine.metrics().kv_disk_write_backlog, 0);
}

TEST(EngineImagePrefix, ImagePagesComeBackFromDiskAfterARestartButNotUnderAnotherProjector) {
  const std::string dir = test::scratch_path("image-pages");
  std::filesystem::remove_all(dir);
  EngineConfig c = image_prefix_config();
  c.kv_disk_path = dir;
  c.kv_disk_bytes = size_t(64) << 20;
  Completion one;
  Request second;
  int32_t image_at = 0;
  {
    Engine engine(c);
    const Conversation talk(engine, test::png_file(40, 30, 5));
    image_at = talk.image_at();
    one = test::run_all(engine, {talk.first()})[0];
    second = talk.second(engine, one);
    settle(engine);
  }
  const Completion want = computed_answers({second})[0];
  {
    Engine restarted(c);  // its memory holds no page: every hit is read from disk
    test::expect_same_completions({test::run_all(restarted, {second})[0]}, {want});
    EXPECT_EQ(restarted.metrics().kv_disk_hit_tokens, whole_pages(cached_after(one)));
    EXPECT_EQ(restarted.metrics().kv_disk_damaged, 0);
  }
  // Another projector file for the same model: its rows of the image, and so the pages computed
  // from them, would differ; only the text pages before the image are the same.
  c.mmproj_path = test::llava_projector("other-mmproj.gguf", 10);
  Engine other(c);
  test::run_all(other, {second});
  EXPECT_EQ(other.metrics().prefix_hit_tokens, whole_pages(image_at));
}

}  // namespace
}  // namespace pagoda
