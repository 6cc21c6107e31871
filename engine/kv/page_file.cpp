#include "engine/kv/page_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace pagoda {

namespace {

constexpr char kMagic[8] = {'P', 'G', 'K', 'V', 'P', 'A', 'G', 'E'};
constexpr uint32_t kVersion = 1;
constexpr std::string_view kSuffix = ".kvpage";
constexpr std::string_view kTemporary = ".tmp-";

// Little-endian as the x86-64 host writes it; 96 bytes.
struct Header {
  char magic[8];
  uint32_t version;
  int32_t group;
  PageHash fingerprint;
  PageHash hash;
  PageHash previous;
  uint64_t n_tokens;
  uint64_t page_bytes;
  uint64_t body_checksum;    // XXH3-64 of the tokens, then the page
  uint64_t header_checksum;  // XXH3-64 of the header's bytes before this field
};
static_assert(sizeof(Header) == 96);

uint64_t header_checksum(const Header& h) { return XXH3_64bits(&h, offsetof(Header, header_checksum)); }

uint64_t body_checksum(std::span<const int32_t> tokens, std::span<const std::byte> bytes) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, tokens.data(), tokens.size_bytes());
  XXH3_64bits_update(state, bytes.data(), bytes.size());
  const uint64_t sum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return sum;
}

void append_hex(std::string& out, const PageHash& h) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (uint64_t word : {h.high, h.low}) {
    for (int shift = 60; shift >= 0; shift -= 4) out.push_back(kDigits[(word >> shift) & 0xf]);
  }
}

std::optional<PageHash> parse_hex(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  PageHash h;
  for (auto [part, word] : {std::pair{text.substr(0, 16), &h.high}, std::pair{text.substr(16), &h.low}}) {
    for (char c : part)
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
    std::from_chars(part.data(), part.data() + part.size(), *word, 16);
  }
  return h;
}

// Reads or writes all of `iov`, resuming after short transfers; false on an error.
template <class Transfer>
bool transfer_all(Transfer&& transfer, std::span<iovec> iov) {
  size_t done_before = 0;
  while (!iov.empty()) {
    const ssize_t n = transfer(iov.data(), int(std::min<size_t>(iov.size(), IOV_MAX)), done_before);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done_before += size_t(n);
    auto left = size_t(n);
    while (!iov.empty() && left >= iov.front().iov_len) {
      left -= iov.front().iov_len;
      iov = iov.subspan(1);
    }
    if (!iov.empty()) {
      iov.front().iov_base = static_cast<char*>(iov.front().iov_base) + left;
      iov.front().iov_len -= left;
    }
  }
  return true;
}

// A temporary name no other writer uses at the same time: this process's id and a counter.
std::string temporary_name(const PageFileName& name) {
  static std::atomic<uint64_t> counter{0};
  return std::string(kTemporary) + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1)) + "-" +
         page_file_name(name);
}

// The writer's process id in a temporary file's name, 0 when it has none.
pid_t temporary_owner(std::string_view file_name) {
  if (!file_name.starts_with(kTemporary)) return 0;
  file_name.remove_prefix(kTemporary.size());
  pid_t pid = 0;
  const auto [end, ec] = std::from_chars(file_name.data(), file_name.data() + file_name.size(), pid);
  return ec == std::errc() && end != file_name.data() + file_name.size() && *end == '-' ? pid : 0;
}

}  // namespace

std::string page_file_name(const PageFileName& name) {
  std::string out;
  out.reserve(96);
  append_hex(out, name.hash);
  out += '-' + std::to_string(name.group) + '-';
  append_hex(out, name.fingerprint);
  out += kSuffix;
  return out;
}

std::optional<PageFileName> parse_page_file_name(std::string_view file_name) {
  if (!file_name.ends_with(kSuffix)) return std::nullopt;
  file_name.remove_suffix(kSuffix.size());
  const size_t first = file_name.find('-'), last = file_name.rfind('-');
  if (first == std::string_view::npos || first == last) return std::nullopt;
  const std::string_view group_text = file_name.substr(first + 1, last - first - 1);
  PageFileName name;
  const auto [end, ec] = std::from_chars(group_text.data(), group_text.data() + group_text.size(), name.group);
  if (ec != std::errc() || end != group_text.data() + group_text.size() || name.group < 0) return std::nullopt;
  const auto hash = parse_hex(file_name.substr(0, first)), fingerprint = parse_hex(file_name.substr(last + 1));
  if (!hash || !fingerprint) return std::nullopt;
  name.hash = *hash;
  name.fingerprint = *fingerprint;
  return name;
}

std::optional<size_t> write_page_file(const std::filesystem::path& dir, const PageFileName& name,
                                      const PageFileContents& contents, std::string& error) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.group = name.group;
  h.fingerprint = name.fingerprint;
  h.hash = name.hash;
  h.previous = contents.previous;
  h.n_tokens = contents.tokens.size();
  h.page_bytes = contents.bytes.size();
  h.body_checksum = body_checksum(contents.tokens, contents.bytes);
  h.header_checksum = header_checksum(h);

  const std::filesystem::path temporary = dir / temporary_name(name);
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot create " + temporary.string() + ": " + std::strerror(errno);
    return std::nullopt;
  }
  iovec iov[] = {{&h, sizeof(h)},
                 {const_cast<int32_t*>(contents.tokens.data()), contents.tokens.size_bytes()},
                 {const_cast<std::byte*>(contents.bytes.data()), contents.bytes.size()}};
  const bool written =
      transfer_all([&](const iovec* v, int n, size_t) { return ::writev(fd, v, n); }, std::span<iovec>(iov));
  const int write_errno = errno;
  const bool closed = ::close(fd) == 0;
  if (!written || !closed) {
    error = "cannot write " + temporary.string() + ": " + std::strerror(written ? errno : write_errno);
    ::unlink(temporary.c_str());
    return std::nullopt;
  }
  if (::rename(temporary.c_str(), (dir / page_file_name(name)).c_str()) != 0) {
    error = "cannot rename " + temporary.string() + ": " + std::strerror(errno);
    ::unlink(temporary.c_str());
    return std::nullopt;
  }
  return sizeof(h) + contents.tokens.size_bytes() + contents.bytes.size();
}

PageFileStatus read_page_file(const std::filesystem::path& dir, const PageFileName& name, const PageHash& previous,
                              std::span<const int32_t> tokens, std::span<std::byte> out) {
  const int fd = ::open((dir / page_file_name(name)).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? PageFileStatus::Missing : PageFileStatus::Damaged;
  struct stat st {};
  Header h{};
  std::vector<int32_t> stored(tokens.size());
  const size_t expected = sizeof(h) + tokens.size_bytes() + out.size();
  bool good = ::fstat(fd, &st) == 0 && size_t(st.st_size) == expected;
  if (good) {
    iovec iov[] = {{&h, sizeof(h)}, {stored.data(), stored.size() * sizeof(int32_t)}, {out.data(), out.size()}};
    good = transfer_all([&](const iovec* v, int n, size_t at) { return ::preadv(fd, v, n, off_t(at)); },
                        std::span<iovec>(iov));
  }
  // Marks the file recently used, so a restarted engine's scan keeps the LRU order.
  if (good) ::futimens(fd, nullptr);
  ::close(fd);
  good = good && std::memcmp(h.magic, kMagic, sizeof(kMagic)) == 0 && h.header_checksum == header_checksum(h) &&
         h.version == kVersion && h.group == name.group && h.fingerprint == name.fingerprint && h.hash == name.hash &&
         h.previous == previous && h.n_tokens == tokens.size() && h.page_bytes == out.size() &&
         std::equal(stored.begin(), stored.end(), tokens.begin()) && h.body_checksum == body_checksum(tokens, out);
  return good ? PageFileStatus::Read : PageFileStatus::Damaged;
}

std::vector<FoundPageFile> scan_page_files(const std::filesystem::path& dir, int64_t& torn) {
  std::vector<FoundPageFile> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file_name = entry.path().filename().string();
    if (const pid_t owner = temporary_owner(file_name); owner > 0) {
      if (::kill(owner, 0) != 0 && errno == ESRCH && ::unlink(entry.path().c_str()) == 0) ++torn;
      continue;
    }
    const auto name = parse_page_file_name(file_name);
    struct stat st {};
    if (!name || ::stat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    found.push_back({*name, size_t(st.st_size), int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec});
  }
  std::sort(found.begin(), found.end(),
            [](const FoundPageFile& a, const FoundPageFile& b) { return a.modified_ns < b.modified_ns; });
  return found;
}

bool remove_page_file(const std::filesystem::path& dir, const PageFileName& name) {
  return ::unlink((dir / page_file_name(name)).c_str()) == 0;
}

}  // namespace pagoda
