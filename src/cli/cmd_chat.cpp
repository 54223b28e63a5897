// tritium chat: an interactive conversation through the model's chat template (one turn per stdin line).
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "engine/generator.h"
#include "model/model_files.h"
#include "template/chat_template.h"
#include "tokenizer/utf8.h"

namespace tritium::cli {
namespace {

struct ChatArgs {
  ModelOptions model;
  std::string system;
  std::string prompt;  // one message, non-interactive
  int n = 256;
  SamplingOptions sampling;
};

int run(const ChatArgs& a) {
  ModelOptions mo = a.model;
  mo.single_sequence = true;  // one sequence: the CUDA backend's "auto" layout picks the batch-1 kernels
  LoadedModel lm = load_model(mo);
  const ChatTemplateFiles files = load_model_chat_template(lm.dir);
  const ChatTemplate tmpl = ChatTemplate::from_string(files.source);
  Generator gen(*lm.backend, *lm.tokenizer);
  GenerateOptions go;
  go.max_new_tokens = a.n;
  go.sampling = a.sampling.params();
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (!a.system.empty()) messages.push_back({{"role", "system"}, {"content", a.system}});
  const bool interactive = a.prompt.empty();
  std::string line;
  int line_no = 0;
  while (true) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
      if (!std::getline(std::cin, line)) break;
      ++line_no;
      if (line == "/exit" || line == "/quit") break;
      if (line.empty()) continue;
    } else {
      line = a.prompt;
    }
    // Checked here, not by the tokenizer: its message would count bytes of the rendered conversation.
    if (const size_t bad = utf8::find_invalid(line); bad != std::string::npos) {
      if (!interactive) fail("chat: --prompt is not valid UTF-8 (byte {})", bad);
      fmt::print(stderr, "error: input line {} is not valid UTF-8 (byte {}); it was skipped\n", line_no, bad);
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    std::string reply;
    try {
      const std::string rendered = apply_chat_template(tmpl, messages, true, files.bos_token, files.eos_token);
      // The template writes BOS itself where the model wants one: never add a second.
      const std::vector<int32_t> ids = lm.tokenizer->encode(rendered, false);
      GenerateStats st;
      gen.generate(ids, go, [&](const std::string& s) {
        reply += s;
        std::fwrite(s.data(), 1, s.size(), stdout);
        std::fflush(stdout);
      }, &st);
    } catch (const Error& e) {
      // A turn that cannot be answered (e.g. the conversation outgrew the context) ends only that turn.
      if (!interactive) throw;
      messages.erase(messages.end() - 1);
      if (!reply.empty()) std::fputc('\n', stdout);
      fmt::print(stderr, "error: {}\n", e.what());
      continue;
    }
    std::fputc('\n', stdout);
    messages.push_back({{"role", "assistant"}, {"content", reply}});
    if (!interactive) break;
  }
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<ChatArgs>();
  CLI::App* sub = app.add_subcommand("chat", "Chat through the model's chat template (one turn per line, /exit ends)");
  add_model_options(sub, a->model);
  sub->add_option("--system", a->system, "system message");
  sub->add_option("-p,--prompt", a->prompt, "one user message, answered non-interactively");
  sub->add_option("-n,--n-predict", a->n, "maximum new tokens per reply")->check(CLI::Range(1, 1 << 20));
  add_sampling_options(sub, a->sampling);
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
