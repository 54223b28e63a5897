// tritium model: the token embedding table [vocab, hidden], held in the dtype it is stored in.
//
// A bf16 table is read in place from the memory-mapped model file (or owned when it was converted), so a model
// holds no float32 copy of it: a lookup widens one row. When the table serves lookups only (the head holds its own
// quantized copy), lookups read their rows from the file with pread (read_rows_from_file), so the table is not
// resident. A float32 table is held when the output head is float32 (the two then share it, tied). A GGUF Q2_0 table
// (Ternary Bonsai's embedding and head: formats/gguf_quants.h) stays in its 2-bit blocks in the mapped file and a
// lookup decodes one row.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/mapped_file.h"

namespace tritium {

class Embedding {
 public:
  Embedding() = default;
  /// A float32 table [rows, cols] (shared with a float32 head when tied).
  static Embedding f32(std::shared_ptr<const std::vector<float>> table, int64_t rows, int64_t cols);
  /// A bf16 table [rows, cols] at `data` (bit patterns): borrowed from a memory-mapped file that must outlive the
  /// model (Transformer::set_keep_alive), or owned by `owner` (which then keeps `data` alive). `file`, for a
  /// borrowed table, is the mapping `data` lies in (it enables read_rows_from_file).
  static Embedding bf16(const uint16_t* data, int64_t rows, int64_t cols, std::shared_ptr<const void> owner = {},
                        const MappedFile* file = nullptr);

  /// A GGUF Q2_0 table [rows, cols] at `data`: rows * cols / block blocks of `block_bytes` (block 64 / 18 bytes or
  /// 128 / 34 bytes), row-major, cols a multiple of block; borrowed from a memory-mapped file that must outlive the
  /// model. `file`, when given, is the mapping `data` lies in (it enables read_rows_from_file).
  static Embedding q2_0(const uint8_t* data, int64_t rows, int64_t cols, int64_t block, int64_t block_bytes,
                        const MappedFile* file = nullptr);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool is_f32() const { return f32_ != nullptr; }
  bool is_bf16() const { return bf16_ != nullptr; }
  bool is_q2_0() const { return q2_ != nullptr; }
  /// "f32", "bf16" or "q2_0".
  const char* dtype_name() const { return is_q2_0() ? "q2_0" : is_bf16() ? "bf16" : "f32"; }
  /// Bytes of the table as held.
  size_t bytes() const { return static_cast<size_t>(rows_) * row_bytes(); }
  /// Bytes one lookup reads.
  size_t row_bytes() const {
    if (is_q2_0()) return static_cast<size_t>(cols_ / q2_block_ * q2_block_bytes_);
    return static_cast<size_t>(cols_) * (is_bf16() ? 2 : 4);
  }

  /// out[cols] = row `r` as float32 (exact widening of bf16). r must be in [0, rows). Throws tritium::Error when
  /// a row read from the file fails (read_rows_from_file).
  void row(int64_t r, float* out) const;
  /// For a table that serves lookups only (the head holds its own copy): when it was borrowed with its `file`,
  /// row() from now on reads from the file with pread instead of through the mapping (MappedFile::read_at says
  /// why), and the table's mapped pages are released. Returns whether it does (bf16 and Q2_0 tables given their
  /// file; a Q2_0 table without it has its pages released and returns false); no effect on other tables.
  bool read_rows_from_file();
  bool reads_rows_from_file() const { return read_file_; }
  /// For a table borrowed from a mapped file (bf16, Q2_0): drops the mapped pages that lie wholly inside rows
  /// [r0, r0 + n) from the resident set (release_mapped_pages), e.g. once a head has been built from them. No effect
  /// on other tables; later reads map the pages again.
  void release_rows(int64_t r0, int64_t n) const;

  /// The bf16 bit patterns [rows, cols]; nullptr for a float32 table.
  const uint16_t* bf16_data() const { return bf16_; }
  /// The Q2_0 blocks (rows * cols / q2_0_block() blocks of q2_0_block_bytes() bytes, row-major); nullptr unless Q2_0.
  const uint8_t* q2_0_data() const { return q2_; }
  int64_t q2_0_block() const { return q2_block_; }
  int64_t q2_0_block_bytes() const { return q2_block_bytes_; }
  const std::shared_ptr<const void>& owner() const { return owner_; }
  /// The float32 table: the one held, or (bf16, q2_0) a widened copy made on the first call and kept (for consumers that
  /// need the whole table in float32: the GPU upload, tensor-parallel slicing).
  std::shared_ptr<const std::vector<float>> f32_table() const;

 private:
  struct Widened;
  int64_t rows_ = 0, cols_ = 0;
  std::shared_ptr<const std::vector<float>> f32_;
  const uint16_t* bf16_ = nullptr;
  const uint8_t* q2_ = nullptr;
  int64_t q2_block_ = 0, q2_block_bytes_ = 0;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<Widened> widened_;
  /// Records `file` (when given) as the mapping the borrowed table at `data` lies in; throws when it does not.
  void attach_file(const void* data, const MappedFile* file);
  /// Row r's bytes as stored (bf16 or Q2_0 blocks): from the mapping, or read from the file into a per-thread buffer.
  const uint8_t* stored_row(int64_t r) const;
  const MappedFile* file_ = nullptr;
  size_t file_offset_ = 0;
  bool read_file_ = false;
};

}  // namespace tritium
