// tritium core: read-only memory-mapped files (weights are used in place, never copied).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tritium {

/// A read-only mmap of a whole file, with its descriptor kept open for read_at. Move-only; unmaps and closes on
/// destruction. Throws tritium::Error naming the path when the file cannot be opened or mapped.
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// Copies bytes [offset, offset + n) of the file into dst with pread, not through the mapping: the copy leaves
  /// no pages resident in the process (the page cache keeps them). For tables read a row at a time: a fault on
  /// the mapping maps the 64 KiB around the row (the kernel's fault-around), so a few thousand random lookups made
  /// most of a 656 MB embedding resident. Thread-safe. Throws tritium::Error naming the path when the range lies
  /// outside the file as mapped or the read fails (the file was truncated since).
  void read_at(size_t offset, size_t n, void* dst) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

/// Drops the pages of a read-only file mapping that lie wholly inside [p, p + n) from the process's resident set
/// (madvise MADV_DONTNEED): the page cache keeps them and a later read maps them again. Loaders call it after
/// repacking or quantizing a tensor, so the source bytes do not stay resident beside the result. Does nothing
/// when the range holds no whole page; never fails.
void release_mapped_pages(const void* p, size_t n);

/// Reads a whole (small) text file; throws tritium::Error naming the path.
std::string read_text_file(const std::string& path);

}  // namespace tritium
