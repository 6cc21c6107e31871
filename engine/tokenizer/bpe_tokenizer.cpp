#include "engine/tokenizer/bpe_tokenizer.h"

#include <queue>

#include "engine/tokenizer/byte_unicode.h"
#include "pagoda/error.h"

namespace pagoda {

namespace {

uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }

}  // namespace

BpeTokenizer::BpeTokenizer(const std::string& pre, const std::vector<std::string>& merges, const PieceMap& pieces)
    : pre_(pre) {
  auto id_of = [&](std::string_view piece) {
    auto it = pieces.find(piece);
    return it == pieces.end() ? -1 : it->second;
  };
  for (int b = 0; b < 256; ++b) byte_ids_[size_t(b)] = id_of(byte_to_unicode(uint8_t(b)));

  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    auto bad = [&](const std::string& why) {
      return Error("tokenizer.ggml.merges[" + std::to_string(i) + "] \"" + m + "\" " + why);
    };
    const size_t space = m.find(' ', 1);  // a half may itself be a space (llama.cpp looks from 1)
    if (space == std::string::npos || space + 1 >= m.size()) throw bad("is not two pieces separated by a space");
    const std::string_view left = std::string_view(m).substr(0, space), right = std::string_view(m).substr(space + 1);
    const int32_t l = id_of(left), r = id_of(right);
    if (l < 0) throw bad("names \"" + std::string(left) + "\", which is not a token");
    if (r < 0) throw bad("names \"" + std::string(right) + "\", which is not a token");
    const int32_t result = id_of(std::string(left) + std::string(right));
    if (result < 0) throw bad("makes \"" + std::string(left) + std::string(right) + "\", which is not a token");
    merges_.emplace(pair_key(l, r), Merge{int32_t(i), result});  // a repeated merge keeps its best rank
  }
}

void BpeTokenizer::encode(std::string_view text, const PieceMap& pieces, std::vector<int32_t>& out) const {
  const std::string clean = well_formed_utf8(text);
  std::vector<std::string_view> words;
  pre_.split(clean, words);
  for (std::string_view w : words) encode_piece(w, pieces, out);
}

void BpeTokenizer::encode_piece(std::string_view piece, const PieceMap& pieces, std::vector<int32_t>& out) const {
  if (pre_.ignore_merges()) {
    std::string spelled;
    append_byte_level(piece, spelled);
    auto it = pieces.find(spelled);
    if (it != pieces.end()) {
      out.push_back(it->second);
      return;
    }
  }

  // Symbols: a doubly linked list, one byte each to begin with; a merge folds the right
  // symbol into the left one.
  struct Symbol {
    int32_t id;  // -1: a byte whose character is no token
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> sym(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    sym[i] = {byte_ids_[static_cast<unsigned char>(piece[i])], int32_t(i) - 1, int32_t(i) + 1, true};
  }
  if (!sym.empty()) sym.back().next = -1;

  // Candidate merges, best first: lowest rank, then leftmost. An entry is stale once either
  // side has died or changed id.
  struct Candidate {
    int32_t rank, left, right, left_id, right_id, result;
  };
  struct Worse {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, Worse> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t l = sym[size_t(left)].id, r = sym[size_t(right)].id;
    if (l < 0 || r < 0) return;
    auto it = merges_.find(pair_key(l, r));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, l, r, it->second.result});
  };
  for (size_t i = 1; i < sym.size(); ++i) try_add(int32_t(i - 1), int32_t(i));

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[size_t(c.left)];
    Symbol& right = sym[size_t(c.right)];
    if (!left.alive || !right.alive || left.id != c.left_id || right.id != c.right_id) continue;
    left.id = c.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[size_t(right.next)].prev = c.left;
    try_add(left.prev, c.left);
    try_add(c.left, left.next);
  }

  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[size_t(i)].next) {
    if (sym[size_t(i)].id >= 0) out.push_back(sym[size_t(i)].id);
  }
}

}  // namespace pagoda
