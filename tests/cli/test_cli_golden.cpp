// The built `tritium` binary with default flags reproduces the Hugging Face goldens: greedy token ids of every golden
// prompt for the bundled tiny-bitnet, tiny-qwen2, each GGUF fixture of ternary weights (I2_S, TQ2_0, F16) and a
// BITCOS-converted copy, through `tritium generate`; and one completion through `tritium serve`. Only the sampling
// is set (greedy, the golden's length): storage, head, KV cache and kernels are the defaults a user gets.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gguf_test_util.h"
#include "test_util.h"

using namespace tritium;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const std::string& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// The JSON that `generate --token-ids` prints on stderr after "token ids: ".
json token_ids_line(const std::string& err) {
  const std::string key = "token ids: ";
  const size_t at = err.find(key);
  if (at == std::string::npos) return json();
  const size_t end = err.find('\n', at);
  return json::parse(err.substr(at + key.size(), end - at - key.size()), nullptr, false);
}

// Every golden prompt through `tritium -m model generate` with default flags: prompt ids and greedy ids equal.
void expect_golden_greedy(const std::string& model, const std::string& golden_path) {
  SCOPED_TRACE(model);
  const json golden = read_json(golden_path);
  for (const auto& pr : golden["prompts"]) {
    const auto want = pr["greedy_ids"].get<std::vector<int32_t>>();
    const auto r = test::run_cli({"generate", "-m", model, "-p", pr["text"].get<std::string>(), "-n",
                                  std::to_string(want.size()), "--temp", "0", "--ignore-eos", "--token-ids"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json ids = token_ids_line(r.err);
    ASSERT_TRUE(ids.is_object()) << r.err;
    EXPECT_EQ(ids["prompt"].get<std::vector<int32_t>>(), pr["input_ids"].get<std::vector<int32_t>>()) << pr["text"];
    EXPECT_EQ(ids["generated"].get<std::vector<int32_t>>(), want) << pr["text"];
  }
}

std::string golden_bitnet() { return test::data_dir() + "/golden/tiny-bitnet.json"; }

}  // namespace

TEST(CliGolden, BundledBitnetDefaultFlags) { expect_golden_greedy(test::bundled_model(), golden_bitnet()); }

TEST(CliGolden, TinyQwen2DefaultFlags) {
  REQUIRE_SHARED_DATA(s);
  expect_golden_greedy(s + "/models/tiny-qwen2", s + "/golden/tiny-qwen2.json");
}

TEST(CliGolden, TernaryGgufFixturesDefaultFlags) {
  REQUIRE_GGUF_FIXTURES(dir);
  for (const char* f : {"tiny-bitnet-I2_S.gguf", "tiny-bitnet-TQ2_0.gguf", "tiny-bitnet-F16.gguf"})
    expect_golden_greedy(dir + "/" + f, golden_bitnet());
}

TEST(CliGolden, BitcosConvertedDefaultFlags) {
  const fs::path out = fs::temp_directory_path() / ("tritium_cli_golden_bitcos_" + std::to_string(::getpid()));
  fs::remove_all(out);
  const auto c = test::run_cli({"convert", "-m", test::bundled_model(), "-o", out.string(), "--weights", "bitcos"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  expect_golden_greedy(out.string(), golden_bitnet());
  fs::remove_all(out);
}

// One completion through `tritium serve` (default flags, an ephemeral port): the golden's greedy text.
TEST(CliGolden, ServeCompletionDefaultFlags) {
  const fs::path log = fs::temp_directory_path() / ("tritium_cli_golden_serve_" + std::to_string(::getpid()) + ".err");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> args = {TRITIUM_BINARY, "serve", "--port", "0"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, TRITIUM_BINARY, &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  // The port from the start-up line "serving ... on http://127.0.0.1:PORT (...)".
  int port = 0;
  std::string err;
  for (int i = 0; i < 600 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(log);
    err.assign(std::istreambuf_iterator<char>(in), {});
    const size_t at = err.find("on http://127.0.0.1:");
    if (at != std::string::npos) port = std::atoi(err.c_str() + at + 20);
    if (err.find("error:") != std::string::npos) break;
  }
  json resp;
  int status = 0;
  const json golden = read_json(golden_bitnet());
  const auto& pr = golden["prompts"][0];
  if (port > 0) {
    httplib::Client cl("127.0.0.1", port);
    cl.set_read_timeout(120);
    const json body = {{"prompt", pr["text"]},
                       {"max_tokens", pr["greedy_ids"].size()},
                       {"temperature", 0},
                       {"ignore_eos", true}};
    if (auto res = cl.Post("/v1/completions", body.dump(), "application/json")) {
      status = res->status;
      resp = json::parse(res->body, nullptr, false);
    }
  }
  ::kill(pid, SIGTERM);
  int st = 0;
  ::waitpid(pid, &st, 0);
  fs::remove(log);
  ASSERT_GT(port, 0) << err;
  ASSERT_EQ(status, 200) << resp.dump();
  EXPECT_EQ(resp["choices"][0]["text"].get<std::string>(), pr["greedy_text"].get<std::string>());
  EXPECT_EQ(resp["usage"]["completion_tokens"].get<size_t>(), pr["greedy_ids"].size());
  EXPECT_EQ(resp["usage"]["prompt_tokens"].get<size_t>(), pr["input_ids"].size());
}
