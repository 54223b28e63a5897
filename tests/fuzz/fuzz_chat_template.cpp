// libFuzzer target: chat templates (template/: the Jinja subset) on arbitrary source text, parsed and rendered
// with a conversation that has a system prompt, two turns, a tool call and tools. The only acceptable failure is a
// tritium::Error (a template error, raise_exception, or a render budget); a crash, a hang or a huge allocation is
// a bug. Seeds: tests/fuzz/chat_template/.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "template/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "What is 2 + 2?"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
      {"role": "tool", "content": "4", "tool_call_id": "c1"},
      {"role": "user", "content": "Thanks"}],
    "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  try {
    const tritium::ChatTemplate t = tritium::ChatTemplate::from_string(std::string(reinterpret_cast<const char*>(data), size));
    (void)t.render(context);
  } catch (const tritium::Error&) {
  }
  return 0;
}
