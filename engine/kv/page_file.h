#pragma once
// One KV page on disk: the disk tier's unit (EngineConfig::kv_disk_path). A page file is
// named by what its bytes depend on — the engine's fingerprint (tier_fingerprint.h: the model
// file, the kernels), the block's prefix hash (which covers the KV layout and type, the
// adapter and every token before it) and the KV group — so a file can only ever be read back
// by an engine that would have computed the same bits.
//
// A file is a header, the block's tokens and the page's bytes. The header repeats the name
// and the hash the block was chained from, and carries a checksum of itself and one of the
// tokens and bytes: a file that is torn, truncated, corrupted, renamed or of another layout is
// found out when it is read (PageFileStatus::Damaged), never used. Files are written whole
// under a temporary name and renamed into place, so a reader — this engine or another one
// sharing the directory — sees a complete file or none; a writer killed half-way leaves only
// a temporary file, which the next scan removes. There is no fsync: a page is a cache entry,
// and one lost or torn by a power cut is detected and computed again.
//
// Every function here is a plain file operation, safe to call from any thread.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kv/prefix_cache.h"

namespace pagoda {

// What a page file is named by.
struct PageFileName {
  PageHash fingerprint;  // the engine's (tier_fingerprint.h)
  PageHash hash;         // the block's prefix hash
  int32_t group = 0;     // the KV group
  friend bool operator==(const PageFileName&, const PageFileName&) = default;
};

struct PageFileNameHasher {
  size_t operator()(const PageFileName& n) const {
    return size_t(n.hash.low ^ (n.fingerprint.low * 0x9e3779b97f4a7c15ull) ^ uint64_t(n.group) << 56);
  }
};

// "<hash>-<group>-<fingerprint>.kvpage", hashes as 32 lowercase hex digits.
std::string page_file_name(const PageFileName& name);
// The name a file name spells; nullopt for anything else (a temporary file, a stranger).
std::optional<PageFileName> parse_page_file_name(std::string_view file_name);

// What a page file holds besides its name.
struct PageFileContents {
  PageHash previous;                 // the hash the block was chained from (NamedPage::previous)
  std::span<const int32_t> tokens;   // the block's tokens
  std::span<const std::byte> bytes;  // the page (KvLayout::bytes_per_page)
};

// Writes the page's file into `dir` atomically. Returns the file's size, or nullopt with
// `error` set when it could not (the directory is full, gone, not writable).
std::optional<size_t> write_page_file(const std::filesystem::path& dir, const PageFileName& name,
                                      const PageFileContents& contents, std::string& error);

enum class PageFileStatus {
  Read,     // the page is in `out`
  Missing,  // no such file (never written, or removed since)
  Damaged,  // the file is there but not a good copy of this page: `out` holds garbage
};

// Reads the page named `name` into `out` (exactly a page's bytes), checking that the file is
// whole and is this page: its name, `previous` and `tokens` as expected, both checksums good.
PageFileStatus read_page_file(const std::filesystem::path& dir, const PageFileName& name, const PageHash& previous,
                              std::span<const int32_t> tokens, std::span<std::byte> out);

// A page file found by scan_page_files.
struct FoundPageFile {
  PageFileName name;
  size_t bytes = 0;
  int64_t modified_ns = 0;  // its last write or use (read_page_file touches it)
};

// What a directory holds: its page files, least recently used first. Temporary files that
// writers no longer alive left behind (a process killed mid-write) are removed and counted in
// `torn`; other files are left alone.
std::vector<FoundPageFile> scan_page_files(const std::filesystem::path& dir, int64_t& torn);

// Removes a page file; false when it was not there.
bool remove_page_file(const std::filesystem::path& dir, const PageFileName& name);

}  // namespace pagoda
