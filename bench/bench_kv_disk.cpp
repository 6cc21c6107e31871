// The prefix cache's disk tier against computing, on one model:
//
//   bench_kv_disk MODEL [--context N] [--dir DIR] [--threads N] [--cold]
//
// 1. An engine with a disk tier in DIR (emptied first) prefills a context of N random tokens
//    (BOS first) and generates one token: the prefill time. It is shut down (its queued writes
//    finish), so the pages are on disk.
// 2. With --cold, the page files are flushed and dropped from the OS's file cache
//    (posix_fadvise), so what follows reads the disk itself.
// 3. A new engine on the same DIR (a restart) gets the same context and 16 new tokens: its time
//    to first token, against the prefill time.
// 4. The page files are read again, one after the other, as the disk tier reads them (cold
//    again with --cold): the disk's bandwidth, and a page's read time against its share of the
//    prefill (the prefill time over the context's pages).
// Prints the figures and the load average at the end. The restarted engine's first token must
// equal that of an engine that computes everything, or it exits with status 1.

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/kv/page_file.h"
#include "pagoda/engine.h"
#include "pagoda/error.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

pagoda::Completion first_token(pagoda::Engine& engine, const std::vector<int32_t>& prompt) {
  pagoda::Request r;
  r.prompt_ids = prompt;
  r.max_new_tokens = 1;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  return engine.submit(r).get();
}

// Writes the directory's page files back and drops them from the OS's file cache.
void drop_from_file_cache(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const int fd = ::open(entry.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) throw pagoda::Error("usage: bench_kv_disk MODEL [--context N] [--dir DIR] [--threads N] [--cold]");
    int32_t context = 8192, threads = 0;
    std::string dir = "/var/tmp/pagoda-bench-kv-disk";
    bool cold = false;
    for (int i = 2; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--cold") {
        cold = true;
        continue;
      }
      if (i + 1 >= argc) throw pagoda::Error(flag + " needs a value");
      const std::string value = argv[++i];
      if (flag == "--context") context = std::stoi(value);
      else if (flag == "--dir") dir = value;
      else if (flag == "--threads") threads = std::stoi(value);
      else throw pagoda::Error("unknown argument " + flag);
    }
    fs::remove_all(dir);
    pagoda::EngineConfig config{.model_path = argv[1], .threads = threads};
    config.kv_bytes = size_t(2) << 30;
    config.kv_disk_path = dir;
    config.kv_disk_bytes = size_t(64) << 30;

    std::vector<int32_t> prompt;
    double prefill_s = 0.0;
    {
      pagoda::Engine engine(config);
      if (context + 17 > engine.context_length()) throw pagoda::Error("--context is past the model's context length");
      std::mt19937 rng(7);
      std::uniform_int_distribution<int32_t> token(3, engine.vocab_size() - 1);
      const std::vector<int32_t> bos = engine.tokenize("", engine.add_bos());
      prompt = bos;
      while (int32_t(prompt.size()) < context) prompt.push_back(token(rng));
      const auto start = Clock::now();
      first_token(engine, prompt);
      prefill_s = seconds_since(start);
      for (int i = 0; i < 16; ++i) prompt.push_back(token(rng));
    }
    if (cold) drop_from_file_cache(dir);

    pagoda::Engine restarted(config);
    const auto start = Clock::now();
    const pagoda::Completion again = first_token(restarted, prompt);
    const double restart_ttft_s = seconds_since(start);
    const pagoda::EngineMetrics m = restarted.metrics();
    restarted.shutdown();

    // The first token of the extended context, computed: the restarted engine's must equal it.
    pagoda::EngineConfig plain = config;
    plain.kv_disk_path.clear();
    plain.prefix_caching = false;
    int32_t want = -1;
    {
      pagoda::Engine engine(plain);
      want = first_token(engine, prompt).token_ids.at(0);
    }

    if (cold) drop_from_file_cache(dir);
    size_t files = 0, bytes = 0;
    std::vector<std::byte> buffer;
    const auto read_start = Clock::now();
    for (const auto& entry : fs::directory_iterator(dir)) {
      const auto name = pagoda::parse_page_file_name(entry.path().filename().string());
      if (!name) continue;
      // As read_page_file reads (open, one read of the whole file), without its checks.
      const int fd = ::open(entry.path().c_str(), O_RDONLY);
      const auto size = size_t(fs::file_size(entry.path()));
      buffer.resize(size);
      if (::pread(fd, buffer.data(), size, 0) != ssize_t(size)) throw pagoda::Error("short read");
      ::close(fd);
      ++files;
      bytes += size;
    }
    const double read_s = seconds_since(read_start);
    const size_t context_pages = (size_t(context) + 15) / 16;
    const double page_read_s = files ? read_s / double(files) : 0.0;
    const double page_compute_s = prefill_s / double(context_pages);

    double load[3] = {};
    getloadavg(load, 3);
    std::printf("context %d tokens, %zu page files of %zu bytes, %s file cache\n", context, files,
                files ? bytes / files : 0, cold ? "cold (dropped)" : "warm");
    std::printf("prefill (computed)            %8.3f s   %7.1f tokens/s\n", prefill_s, context / prefill_s);
    std::printf(
        "restart, time to first token  %8.3f s   = 1/%.1f of the prefill (disk hit %lld tokens, read %.1f MiB)\n",
        restart_ttft_s, prefill_s / restart_ttft_s, (long long)m.kv_disk_hit_tokens,
        double(m.kv_disk_read_bytes) / (1 << 20));
    std::printf("disk read bandwidth           %8.1f MiB/s (%zu files, %.3f s)\n", double(bytes) / (1 << 20) / read_s,
                files, read_s);
    std::printf("a page: read %.3f ms, computed %.3f ms: read = %.1f%% of compute\n", page_read_s * 1e3,
                page_compute_s * 1e3, 100.0 * page_read_s / page_compute_s);
    std::printf("first token of the extended context: computed %d, after the restart %d -> %s\n", want,
                again.token_ids.at(0), again.token_ids.at(0) == want ? "same" : "DIFFERENT");
    std::printf("load average %.2f %.2f %.2f\n", load[0], load[1], load[2]);
    fs::remove_all(dir);
    return again.token_ids.at(0) == want ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_kv_disk: %s\n", e.what());
    return 1;
  }
}
