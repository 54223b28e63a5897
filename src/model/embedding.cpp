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
  const auto b = reinterpret_cast<uintptr_t>(data);
  const auto base = file ? reinterpret_cast<uintptr_t>(file->data()) : 0;
  TRITIUM_CHECK(!file || (b >= base && b - base + static_cast<size_t>(rows * cols) * 2 <= file->size()),
                "Embedding: the bf16 table [{}, {}] does not lie inside the mapping of {}", rows, cols, file->path());
  Embedding e;
  e.rows_ = rows;
  e.cols_ = cols;
  e.bf16_ = data;
  e.owner_ = std::move(owner);
  e.widened_ = std::make_shared<Widened>();
  if (file) {
    e.file_ = file;
    e.file_offset_ = b - base;
  }
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
  if (file) {
    const auto b = reinterpret_cast<uintptr_t>(data), base = reinterpret_cast<uintptr_t>(file->data());
    TRITIUM_CHECK(b >= base && b - base + e.bytes() <= file->size(),
                  "Embedding: the Q2_0 table [{}, {}] does not lie inside the mapping of {}", rows, cols, file->path());
    e.file_ = file;
    e.file_offset_ = b - base;
  }
  return e;
}

void Embedding::row(int64_t r, float* out) const {
  if (q2_) {
    const uint8_t* src = q2_ + static_cast<size_t>(r) * row_bytes();
    if (read_file_) {
      thread_local Scratch<uint8_t> buf;
      uint8_t* b = buf.get(row_bytes());
      file_->read_at(file_offset_ + static_cast<size_t>(r) * row_bytes(), row_bytes(), b);
      src = b;
    }
    dequantize_q2_0(src, cols_, q2_block_, out);
    return;
  }
  if (!bf16_) {
    std::memcpy(out, f32_->data() + r * cols_, sizeof(float) * static_cast<size_t>(cols_));
    return;
  }
  const uint16_t* src = bf16_ + r * cols_;
  if (read_file_) {
    thread_local Scratch<uint16_t> buf;
    uint16_t* b = buf.get(static_cast<size_t>(cols_));
    file_->read_at(file_offset_ + static_cast<size_t>(r) * row_bytes(), row_bytes(), b);
    src = b;
  }
  for (int64_t c = 0; c < cols_; ++c) out[c] = bf16_to_f32(src[c]);
}

void Embedding::release_rows(int64_t r0, int64_t n) const {
  if (owner_ || (!q2_ && !bf16_)) return;
  const auto* base = q2_ ? q2_ : reinterpret_cast<const uint8_t*>(bf16_);
  release_mapped_pages(base + static_cast<size_t>(r0) * row_bytes(), static_cast<size_t>(n) * row_bytes());
}

bool Embedding::read_rows_from_file() {
  const void* mapped = q2_ ? static_cast<const void*>(q2_) : static_cast<const void*>(bf16_);
  if (q2_ && !file_) {
    // Lookups fault back the pages of the rows they read (and the kernel's fault-around, 64 KiB, with each).
    release_mapped_pages(q2_, bytes());
    return false;
  }
  if (!file_ || owner_) return false;
  read_file_ = true;
  release_mapped_pages(mapped, bytes());
  return true;
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
