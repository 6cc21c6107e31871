// The disk tier's files and their index: a page file reads back only as the page it was written
// for, whole and unchanged (anything else is Damaged or Missing, never data); a directory scan
// finds the files least recently used first and removes dead writers' temporary files; the
// index keeps its files within the byte budget, least recently used out first.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <thread>

#include "engine/kv/disk_page_index.h"
#include "engine/kv/page_file.h"
#include "engine/kv/tier_fingerprint.h"
#include "support/test_support.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

struct PageFixture {
  PageFileName name{{1, 2}, {0x1234, 0xabcdef}, 3};
  PageHash previous{7, 8};
  std::vector<int32_t> tokens{5, 6, 7, 8};
  std::vector<std::byte> bytes = std::vector<std::byte>(1000);
  fs::path dir;

  explicit PageFixture(const std::string& test) : dir(test::scratch_path(test)) {
    fs::create_directories(dir);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::byte(i * 31 + 7);
  }
  fs::path file() const { return dir / page_file_name(name); }
  size_t write() const {
    std::string error;
    const auto written = write_page_file(dir, name, {previous, tokens, bytes}, error);
    EXPECT_TRUE(written) << error;
    return written.value_or(0);
  }
  PageFileStatus read(std::vector<std::byte>& out) const {
    out.assign(bytes.size(), std::byte{0});
    return read_page_file(dir, name, previous, tokens, out);
  }
};

void flip_byte(const fs::path& path, size_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(std::streamoff(at));
  const char c = char(f.get());
  f.seekp(std::streamoff(at));
  f.put(char(c ^ 0x20));
}

TEST(PageFile, NamesReadBackAsTheyWereWritten) {
  const PageFileName name{{0xffffffffffffffffull, 1}, {2, 0x8000000000000000ull}, 17};
  const std::string text = page_file_name(name);
  EXPECT_TRUE(text.ends_with(".kvpage"));
  ASSERT_TRUE(parse_page_file_name(text));
  EXPECT_EQ(*parse_page_file_name(text), name);
  for (const char* stranger : {"notes.txt", ".kvpage", "abc-1-def.kvpage", ".tmp-12-0-x.kvpage"}) {
    EXPECT_FALSE(parse_page_file_name(stranger)) << stranger;
  }
}

TEST(PageFile, AWrittenPageReadsBackBitForBit) {
  const PageFixture p("page-roundtrip");
  const size_t size = p.write();
  EXPECT_EQ(size, fs::file_size(p.file()));
  std::vector<std::byte> out;
  ASSERT_EQ(p.read(out), PageFileStatus::Read);
  EXPECT_EQ(out, p.bytes);
  // Nothing is left behind but the file itself.
  EXPECT_EQ(std::distance(fs::directory_iterator(p.dir), fs::directory_iterator()), 1);
}

TEST(PageFile, AFileThatIsNotThereIsMissing) {
  const PageFixture p("page-missing");
  std::vector<std::byte> out;
  EXPECT_EQ(p.read(out), PageFileStatus::Missing);
}

TEST(PageFile, EveryCorruptedByteIsFoundOut) {
  PageFixture p("page-corrupt");
  const size_t size = p.write();
  const std::string good = test::read_file(p.file());
  // Each byte of the header, the tokens and a sample of the page, flipped in turn.
  for (size_t at = 0; at < size; at += at < 200 ? 1 : 37) {
    flip_byte(p.file(), at);
    std::vector<std::byte> out;
    EXPECT_EQ(p.read(out), PageFileStatus::Damaged) << "byte " << at;
    std::ofstream(p.file(), std::ios::binary | std::ios::trunc) << good;
  }
}

TEST(PageFile, ATruncatedOrLongerFileIsDamaged) {
  PageFixture p("page-truncated");
  const size_t size = p.write();
  for (size_t length : {size_t(0), size_t(10), size - 1, size + 1}) {
    p.write();
    fs::resize_file(p.file(), length);
    std::vector<std::byte> out;
    EXPECT_EQ(p.read(out), PageFileStatus::Damaged) << length;
  }
}

TEST(PageFile, AFileOfAnotherBlockOrPageSizeIsDamaged) {
  PageFixture p("page-other-block");
  p.write();
  std::vector<std::byte> out(p.bytes.size());
  std::vector<int32_t> other_tokens = p.tokens;
  other_tokens[2] += 1;
  EXPECT_EQ(read_page_file(p.dir, p.name, p.previous, other_tokens, out), PageFileStatus::Damaged);
  EXPECT_EQ(read_page_file(p.dir, p.name, PageHash{9, 9}, p.tokens, out), PageFileStatus::Damaged);
  std::vector<std::byte> larger(p.bytes.size() + 64);
  EXPECT_EQ(read_page_file(p.dir, p.name, p.previous, p.tokens, larger), PageFileStatus::Damaged);
  // A good file renamed to another page's name is not that page.
  PageFileName other = p.name;
  other.group = 4;
  fs::rename(p.file(), p.dir / page_file_name(other));
  EXPECT_EQ(read_page_file(p.dir, other, p.previous, p.tokens, out), PageFileStatus::Damaged);
}

TEST(PageFile, AScanListsPagesOldestFirstAndRemovesDeadWritersTemporaries) {
  PageFixture p("page-scan");
  std::vector<PageFileName> names;
  for (int i = 0; i < 3; ++i) {
    p.name.hash.low = uint64_t(100 + i);
    p.write();
    names.push_back(p.name);
    // Distinct modification times, oldest first, whatever the file system's clock step.
    fs::last_write_time(p.file(), fs::file_time_type::clock::now() - std::chrono::hours(3 - i));
  }
  // Reading marks a file used: the first becomes the newest.
  p.name = names[0];
  std::vector<std::byte> out;
  ASSERT_EQ(p.read(out), PageFileStatus::Read);
  // A temporary of a writer that is gone (no process has pid 0x7ffffffe), one of this live
  // process, and a stranger.
  std::ofstream(p.dir / (".tmp-2147483646-0-" + page_file_name(names[1]))) << "torn";
  const fs::path live = p.dir / (".tmp-" + std::to_string(getpid()) + "-0-" + page_file_name(names[1]));
  std::ofstream(live) << "being written";
  std::ofstream(p.dir / "README") << "not a page";
  int64_t torn = 0;
  const std::vector<FoundPageFile> found = scan_page_files(p.dir, torn);
  EXPECT_EQ(torn, 1);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].name, names[1]);
  EXPECT_EQ(found[1].name, names[2]);
  EXPECT_EQ(found[2].name, names[0]);
  EXPECT_EQ(found[0].bytes, fs::file_size(p.dir / page_file_name(names[1])));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(p.dir / "README"));
}

TEST(DiskPageIndex, KeepsItsFilesWithinTheBudgetLeastRecentlyUsedOutFirst) {
  DiskPageIndex index(300);
  auto name = [](uint64_t i) { return PageFileName{{1, 1}, {i, 0}, 0}; };
  EXPECT_TRUE(index.insert(name(1), 100).empty());
  EXPECT_TRUE(index.insert(name(2), 100).empty());
  EXPECT_TRUE(index.insert(name(3), 100).empty());
  index.touch(name(1));
  const std::vector<PageFileName> out = index.insert(name(4), 150);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], name(2));
  EXPECT_EQ(out[1], name(3));
  EXPECT_TRUE(index.contains(name(1)));
  EXPECT_TRUE(index.contains(name(4)));
  EXPECT_FALSE(index.contains(name(2)));
  EXPECT_EQ(index.bytes(), 250u);
  EXPECT_EQ(index.files(), 2u);
  EXPECT_TRUE(index.erase(name(1)));
  EXPECT_FALSE(index.erase(name(1)));
  EXPECT_EQ(index.bytes(), 150u);
  // A file larger than the whole budget stays alone rather than evicting itself.
  EXPECT_EQ(index.insert(name(5), 500).size(), 1u);
  EXPECT_TRUE(index.contains(name(5)));
}

TEST(TierFingerprint, ChangesWithAnyByteOfTheModelAndWithTheKernels) {
  std::vector<std::byte> model(3 << 20);
  std::iota(reinterpret_cast<unsigned char*>(model.data()), reinterpret_cast<unsigned char*>(model.data()) + 256, 0);
  const PageHash base = tier_fingerprint(model, "avx2");
  EXPECT_EQ(tier_fingerprint(model, "avx2"), base);
  EXPECT_NE(tier_fingerprint(model, "avx512"), base);
  model[model.size() - 1] ^= std::byte{1};
  EXPECT_NE(tier_fingerprint(model, "avx2"), base);
  model.pop_back();
  EXPECT_NE(tier_fingerprint(model, "avx2"), base);
}

}  // namespace
}  // namespace pagoda
