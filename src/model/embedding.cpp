#include "model/embedding.h"

#include <cstring>
#include <mutex>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scratch.h"

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

void Embedding::row(int64_t r, float* out) const {
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

bool Embedding::read_rows_from_file() {
  if (!file_ || owner_) return false;
  read_file_ = true;
  release_mapped_pages(bf16_, bytes());
  return true;
}

std::shared_ptr<const std::vector<float>> Embedding::f32_table() const {
  if (!bf16_) return f32_;
  std::call_once(widened_->once, [&] {
    auto t = std::make_shared<std::vector<float>>(static_cast<size_t>(rows_ * cols_));
    for (int64_t r = 0; r < rows_; ++r) row(r, t->data() + r * cols_);
    widened_->table = std::move(t);
  });
  return widened_->table;
}

}  // namespace tritium
