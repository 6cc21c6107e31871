// Replays a harness's committed inputs (seed corpus and crash regressions) without libFuzzer,
// so every Release/ASan test run checks them: `replay_fuzz_X FILE_OR_DIR...`.

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void replay(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  int replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(arg)) {
        if (entry.is_regular_file()) replay(entry.path()), ++replayed;
      }
    } else if (std::filesystem::exists(arg)) {
      replay(arg), ++replayed;
    }
  }
  std::printf("replayed %d inputs\n", replayed);
  return 0;
}
