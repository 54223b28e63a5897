#include "model/embedding.h"

#include <cstring>
#include <mutex>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scratch.h"
#include "formats/gguf_quants.h"

namespace tritium {

struct Embedding::Widened {
  std::once_flag once;
  std::shared_ptr<const std::vector<float>> table;
};

Embedding Embedding::f32(std::shared_ptr<const std::vector<float>> table, int64_t rows, int64_t cols) {
  TRITIUM_CHECK(table && static_cast<int64_t>(table->size()) == rows * cols, "Embedding: {} values, expected {} x {}",
                table ? table->size() : 0, rows, cols);
  Embedding e;
  e.rows_ = rows;
  e.cols_ = cols;
  e.f32_ = std::move(table);
  return e;
}

Embedding Embedding::bf16(const uint16_t* data, int64_t rows, int64_t cols, std::shared_ptr<const void> owner,
                          const MappedFile* file) {
  TRITIUM_CHECK(data && rows > 0 && cols > 0, "Embedding: bf16 table [{}, {}] has no data", rows, cols);
  Embedding e;
  e.rows_ = rows;
  e.cols_ = cols;
  e.bf16_ = data;
  e.owner_ = std::move(owner);
  e.widened_ = std::make_shared<Widened>();
  e.attach_file(data, file);
  return e;
}

Embedding Embedding::q2_0(const uint8_t* data, int64_t rows, int64_t cols, int64_t block, int64_t block_bytes,
                          const MappedFile* file) {
  TRITIUM_CHECK(data && rows > 0 && cols > 0 && (block == 64 || block == 128) && block_bytes == 2 + block / 4 &&
                    cols % block == 0,
                "Embedding: Q2_0 table [{}, {}] with blocks of {} weights in {} bytes", rows, cols, block, block_bytes);
  Embedding e;
  e.rows_ = rows;
  e.cols_ = cols;
  e.q2_ = data;
  e.q2_block_ = block;
  e.q2_block_bytes_ = block_bytes;
  e.widened_ = std::make_shared<Widened>();
  e.attach_file(data, file);
  return e;
}

void Embedding::attach_file(const void* data, const MappedFile* file) {
  if (!file) return;
  const auto b = reinterpret_cast<uintptr_t>(data), base = reinterpret_cast<uintptr_t>(file->data());
  TRITIUM_CHECK(b >= base && b - base + bytes() <= file->size(),
                "Embedding: the {} table [{}, {}] does not lie inside the mapping of {}", dtype_name(), rows_, cols_,
                file->path());
  file_ = file;
  file_offset_ = b - base;
}

const uint8_t* Embedding::stored_row(int64_t r) const {
  const size_t n = row_bytes();
  if (read_file_) {
    thread_local Scratch<uint8_t> buf;
    uint8_t* b = buf.get(n);
    file_->read_at(file_offset_ + static_cast<size_t>(r) * n, n, b);
    return b;
  }
  return (q2_ ? q2_ : reinterpret_cast<const uint8_t*>(bf16_)) + static_cast<size_t>(r) * n;
}

void Embedding::row(int64_t r, float* out) const {
  if (q2_) return dequantize_q2_0(stored_row(r), cols_, q2_block_, out);
  if (!bf16_) {
    std::memcpy(out, f32_->data() + r * cols_, sizeof(float) * static_cast<size_t>(cols_));
    return;
  }
  const uint8_t* src = stored_row(r);
  for (int64_t c = 0; c < cols_; ++c) {
    uint16_t v;
    std::memcpy(&v, src + 2 * c, 2);
    out[c] = bf16_to_f32(v);
  }
}

void Embedding::release_rows(int64_t r0, int64_t n) const {
  if (owner_ || (!q2_ && !bf16_)) return;
  const auto* base = q2_ ? q2_ : reinterpret_cast<const uint8_t*>(bf16_);
  release_mapped_pages(base + static_cast<size_t>(r0) * row_bytes(), static_cast<size_t>(n) * row_bytes());
}

bool Embedding::read_rows_from_file() {
  // A bf16 table lent without its file stays as it is; a Q2_0 one is always borrowed from a file mapping.
  if (owner_ || (!q2_ && !bf16_) || (bf16_ && !file_)) return false;
  release_rows(0, rows_);
  // Without the file, lookups fault back the pages of the rows they read (and the kernel's fault-around, 64 KiB).
  read_file_ = file_ != nullptr;
  return read_file_;
}

std::shared_ptr<const std::vector<float>> Embedding::f32_table() const {
  if (f32_) return f32_;
  std::call_once(widened_->once, [&] {
    auto t = std::make_shared<std::vector<float>>(static_cast<size_t>(rows_ * cols_));
    for (int64_t r = 0; r < rows_; ++r) row(r, t->data() + r * cols_);
    widened_->table = std::move(t);
  });
  return widened_->table;
}

}  // namespace tritium
