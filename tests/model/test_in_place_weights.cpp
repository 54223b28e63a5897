// Weights used in place: the bf16 embedding and a tied bf16 head read one table from the mapped file with the
// float32 head's exact results; quantized heads built a block of rows at a time equal the whole-table ones; a table
// that serves lookups only is read from the file (the same rows, none of it resident); and a process running a
// synthetic 2B4T-width model never holds a second full copy of the file (peak RSS).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "core/dtype.h"
#include "model/lm_head.h"
#include "model/loader.h"
#include "test_util.h"

using namespace tritium;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<const Transformer> load_with_head(const std::string& dir, const std::string& head) {
  LoadOptions lo;
  lo.ternary_format = TernaryFormat::kI2;
  lo.lm_head = head;
  return load_transformer(dir, lo);
}

void expect_bf16_head_equals_f32(const std::string& dir) {
  auto f32 = load_with_head(dir, "f32");
  auto bf16 = load_with_head(dir, "bf16");
  EXPECT_FALSE(f32->embed().is_bf16());
  EXPECT_TRUE(bf16->embed().is_bf16());
  EXPECT_TRUE(f32->head_shares_embedding());
  EXPECT_TRUE(bf16->head_shares_embedding());
  EXPECT_EQ(bf16->lm_head().format_name(), "bf16");
  // The table is counted once and in 2 bytes per value.
  EXPECT_EQ(f32->weight_bytes() - bf16->weight_bytes(), f32->embed().bytes() / 2);
  auto be_f32 = test::cpu_backend(f32), be_bf16 = test::cpu_backend(bf16);
  const std::vector<int32_t> ids = {0, 17, 300, 4095, 8191, 5, 5, 99, 1234};
  const std::vector<float> a = test::prompt_logits(*be_f32, ids), b = test::prompt_logits(*be_bf16, ids);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << dir << " logit " << i;
}

// A synthetic model of 2B4T width (128,256 x 2,560 bf16 embedding, 656 MB) with two layers, made once per process.
const fs::path& wide_model_dir() {
  struct Dir {
    fs::path path = fs::temp_directory_path() / ("tritium_wide_" + std::to_string(::getpid()));
    bool made = false;
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static Dir d;
  if (!d.made) {
    auto synth = test::run_cli({"synth", "--shape", "bitnet-2b4t", "--layers", "2", "-o", d.path.string()});
    EXPECT_EQ(synth.exit_code, 0) << synth.err;
    d.made = true;
  }
  return d.path;
}

// kB of file-backed pages in this process's resident set (/proc/self/status RssFile).
int64_t rss_file_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8));
  return -1;
}

}  // namespace

TEST(InPlaceWeights, LookupOnlyTableReadsRowsFromTheFile) {
  const std::string dir = test::bundled_model();
  auto bf16 = load_with_head(dir, "bf16"), q6 = load_with_head(dir, "q6");
  // The tied bf16 head reads the mapped table; beside a q6 head the table serves lookups only.
  EXPECT_FALSE(bf16->embed().reads_rows_from_file());
  EXPECT_TRUE(q6->embed().reads_rows_from_file());
  const Embedding& a = bf16->embed();
  const Embedding& b = q6->embed();
  std::vector<float> ra(a.cols()), rb(b.cols());
  for (int64_t r : {int64_t{0}, int64_t{1}, a.rows() / 2, a.rows() - 1}) {
    a.row(r, ra.data());
    b.row(r, rb.data());
    for (int64_t c = 0; c < a.cols(); ++c) ASSERT_EQ(ra[c], rb[c]) << "row " << r << " column " << c;
  }
  // An owned table has no file to read from.
  auto bits = std::make_shared<std::vector<uint16_t>>(64, uint16_t{0x3f80});
  Embedding owned = Embedding::bf16(bits->data(), 4, 16, bits);
  EXPECT_FALSE(owned.read_rows_from_file());
}

// With lookups through the mapping, every row read mapped the 64 KiB around it (the kernel's fault-around), and
// 20,000 random tokens made most of the 656 MB table resident beside the q6 head.
TEST(InPlaceWeights, RandomLookupsLeaveTheTableInTheFile) {
  if (test::under_sanitizer()) GTEST_SKIP() << "RSS is measured in the Release suite (the sanitizers add shadow memory)";
  auto model = load_with_head(wide_model_dir().string(), "q6");
  const Embedding& e = model->embed();
  ASSERT_TRUE(e.reads_rows_from_file());
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> tok(0, e.rows() - 1);
  std::vector<float> row(e.cols());
  double sum = 0;
  const int64_t before = rss_file_kib();
  for (int i = 0; i < 20000; ++i) {
    e.row(tok(rng), row.data());
    sum += row[0];
  }
  const int64_t grown = rss_file_kib() - before;
  std::printf("  20,000 lookups: file-backed RSS %+lld KiB (checksum %g)\n", static_cast<long long>(grown), sum);
  EXPECT_LT(grown, 16 * 1024);
}

TEST(InPlaceWeights, Bf16HeadReproducesF32HeadBitForBit) {
  expect_bf16_head_equals_f32(test::bundled_model());
  REQUIRE_SHARED_DATA(s);
  expect_bf16_head_equals_f32(s + "/models/tiny-qwen2");
}

TEST(InPlaceWeights, HeadsFromABf16TableEqualWholeTableQuantization) {
  const int64_t V = 4100, H = 128;  // more rows than one quantization block, a partial last block
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 0.05f);
  auto bits = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(V * H));
  std::vector<float> widened(bits->size());
  for (size_t i = 0; i < bits->size(); ++i) {
    (*bits)[i] = f32_to_bf16(d(rng));
    widened[i] = bf16_to_f32((*bits)[i]);
  }
  const Embedding table = Embedding::bf16(bits->data(), V, H, bits);
  std::vector<float> row(H);
  table.row(4099, row.data());
  for (int64_t c = 0; c < H; ++c) ASSERT_EQ(row[c], widened[static_cast<size_t>(4099 * H + c)]);
  std::vector<float> x(3 * H);
  for (auto& v : x) v = d(rng) * 20;
  for (const std::string kind : {"f32", "bf16", "int8", "q6", "q4"}) {
    auto from_table = make_head_from_table(table, kind);
    auto whole = make_head_linear(widened, V, H, kind == "bf16" ? "f32" : kind);
    EXPECT_EQ(from_table->format_name(), kind == "int8" ? "vectorwise" : kind);
    std::vector<float> a(3 * V), b(3 * V);
    from_table->forward(x.data(), 3, a.data());
    whole->forward(x.data(), 3, b.data());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << kind << " at " << i;
  }
}

// Peak RSS of `tritium generate` on a synthetic model of 2B4T width (128,256 x 2,560 bf16 embedding, 656 MB) with
// two layers: the default head (bf16, as stored) holds the one mapped copy of the table (plus the layers, tokenizer
// and buffers); the opt-in q6 head keeps the process well below the size of its file; a float32 embedding alone is
// twice the size of the file.
TEST(InPlaceWeights, PeakRssStaysBelowOneCopyOfTheFile) {
  if (test::under_sanitizer()) GTEST_SKIP() << "peak RSS is measured in the Release suite (the sanitizers add shadow memory)";
  const fs::path& dir = wide_model_dir();
  const double file_mib = static_cast<double>(fs::file_size(dir / "model.safetensors")) / (1 << 20);
  auto peak = [&](const std::string& head, const std::string& model) {
    auto r = test::run_cli({"generate", "-m", model, "-p", "hello world", "-n", "4", "--temp", "0", "-t", "2",
                            "--lm-head", head});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.err, m, std::regex("peak RSS: ([0-9.]+) MiB"))) << r.err;
    return m.size() > 1 ? std::stod(m[1]) : 0.0;
  };
  // The process's own floor (libraries, e.g. the CUDA runtime in a CUDA build; the bundled 14 MB model) is
  // measured the same way and taken off: the figures below are what the model costs.
  const double floor = peak("auto", test::bundled_model());
  const double def = peak("auto", dir.string()) - floor, q6 = peak("q6", dir.string()) - floor,
               f32 = peak("f32", dir.string()) - floor;
  std::printf("  model.safetensors %.1f MiB; peak RSS above the %.1f MiB floor: default (bf16) head %.1f MiB, "
              "q6 %.1f MiB, f32 %.1f MiB\n", file_mib, floor, def, q6, f32);
  EXPECT_LT(def, 1.25 * file_mib);  // the head streams the mapped table: one copy of it, no second
  EXPECT_LT(q6, 0.75 * file_mib);   // q6 head (~250 MiB) + 2 layers + runtime, the embedding left in the file
  EXPECT_GT(f32, 1.5 * file_mib);   // the float32 table is the second (double-size) copy the others avoid
}
