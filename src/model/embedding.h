// tritium model: the token embedding table [vocab, hidden], held in the dtype it is stored in.
//
// A bf16 table is read in place from the memory-mapped model file (or owned when it was converted), so a model
// holds no float32 copy of it: a lookup widens one row. A float32 table is held when the output head is float32
// (the two then share it, tied).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tritium {

class Embedding {
 public:
  Embedding() = default;
  /// A float32 table [rows, cols] (shared with a float32 head when tied).
  static Embedding f32(std::shared_ptr<const std::vector<float>> table, int64_t rows, int64_t cols);
  /// A bf16 table [rows, cols] at `data` (bit patterns): borrowed from a memory-mapped file that must outlive the
  /// model (Transformer::set_keep_alive), or owned by `owner` (which then keeps `data` alive).
  static Embedding bf16(const uint16_t* data, int64_t rows, int64_t cols, std::shared_ptr<const void> owner = {});

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool is_bf16() const { return bf16_ != nullptr; }
  /// Bytes of the table as held.
  size_t bytes() const { return static_cast<size_t>(rows_ * cols_) * (is_bf16() ? 2 : 4); }
  /// Bytes one lookup reads.
  size_t row_bytes() const { return static_cast<size_t>(cols_) * (is_bf16() ? 2 : 4); }

  /// out[cols] = row `r` as float32 (exact widening of bf16). r must be in [0, rows).
  void row(int64_t r, float* out) const;

  /// The bf16 bit patterns [rows, cols]; nullptr for a float32 table.
  const uint16_t* bf16_data() const { return bf16_; }
  const std::shared_ptr<const void>& owner() const { return owner_; }
  /// The float32 table: the one held, or (bf16) a widened copy made on the first call and kept (for consumers that
  /// need the whole table in float32: the GPU upload, tensor-parallel slicing).
  std::shared_ptr<const std::vector<float>> f32_table() const;

 private:
  struct Widened;
  int64_t rows_ = 0, cols_ = 0;
  std::shared_ptr<const std::vector<float>> f32_;
  const uint16_t* bf16_ = nullptr;
  std::shared_ptr<const void> owner_;
  std::shared_ptr<Widened> widened_;
};

}  // namespace tritium
