// Chat template engine: Jinja2 semantics against jinja2 3.1.6 configured as HF transformers does
// (fixtures in tests/data/template, generated with that reference), and real templates against HF goldens.
#include <gtest/gtest.h>

#include <chrono>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "template/chat_template.h"

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using tritium::ChatTemplate;

namespace {

ordered_json read_json(const fs::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << p;
  return ordered_json::parse(in);
}

const fs::path kData = TRITIUM_TESTS_DATA_DIR;

// The conversation the tokenizer goldens were rendered with (tests/data/golden/tokenizer-golden.json).
ordered_json golden_messages() {
  return ordered_json::parse(R"([{"role":"system","content":"You are terse."},
    {"role":"user","content":"  What is 2+2?  "},{"role":"assistant","content":"4"},
    {"role":"user","content":"And 3+3?"}])");
}

std::string golden_chat(const char* key) {
  return read_json(kData / "golden" / "tokenizer-golden.json")[key]["chat"].get<std::string>();
}

const char* shared_data() { return std::getenv("TRITIUM_TEST_DATA"); }

std::string render(const std::string& src, const ordered_json& ctx = ordered_json::object()) {
  return ChatTemplate::from_string(src).render(ctx);
}

std::string error_of(const std::string& src, const ordered_json& ctx = ordered_json::object()) {
  try {
    render(src, ctx);
  } catch (const tritium::Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

// Every case: template + context rendered by jinja2 (HF settings); we must match byte for byte,
// or fail where jinja2 fails (with the same message for raise_exception).
TEST(ChatTemplate, MatchesJinja2ReferenceCases) {
  auto cases = read_json(kData / "template" / "jinja_cases.json");
  ASSERT_GT(cases.size(), 50u);
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    if (c.contains("expected")) {
      std::string got;
      try {
        got = render(c["template"], c["context"]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " threw: " << e.what();
        continue;
      }
      EXPECT_EQ(got, c["expected"].get<std::string>()) << name;
    } else {
      std::string err = error_of(c["template"], c["context"]);
      EXPECT_NE(err, "<no error>") << name;
      // raise_exception messages must come through verbatim; other errors only need to happen.
      const std::string ref = c["error"];
      if (ref.find("is undefined") == std::string::npos) {
        EXPECT_EQ(err, ref) << name;
      }
    }
  }
}

TEST(ChatTemplate, TinyBitnetMatchesHfGolden) {
  auto files = tritium::load_chat_template(fs::path(TRITIUM_SOURCE_DIR) / "models" / "tiny-bitnet");
  EXPECT_NE(files.origin.find("chat_template.jinja"), std::string::npos);
  EXPECT_EQ(files.bos_token, "<|begin_of_text|>");
  EXPECT_EQ(files.eos_token, "<|end_of_text|>");
  auto t = ChatTemplate::from_string(files.source);
  std::string out = tritium::apply_chat_template(t, golden_messages(), true, files.bos_token, files.eos_token);
  EXPECT_EQ(out, golden_chat("tiny"));
}

TEST(ChatTemplate, Llama3MatchesHfGoldenWithOneBos) {
  const char* d = shared_data();
  if (!d || !fs::exists(fs::path(d) / "tokenizers/llama3/tokenizer_config.json"))
    GTEST_SKIP() << "TRITIUM_TEST_DATA/tokenizers/llama3 not available";
  auto files = tritium::load_chat_template(fs::path(d) / "tokenizers/llama3");
  EXPECT_EQ(files.origin.substr(files.origin.size() - 35), "tokenizer_config.json:chat_template");
  auto t = ChatTemplate::from_string(files.source);
  std::string out = tritium::apply_chat_template(t, golden_messages(), true, files.bos_token, files.eos_token);
  EXPECT_EQ(out, golden_chat("llama3"));
  // Exactly one BOS, at the very start: the caller encodes with add_special_tokens=false.
  const std::string bos = "<|begin_of_text|>";
  ASSERT_EQ(out.rfind(bos, 0), 0u);
  EXPECT_EQ(out.find(bos, 1), std::string::npos);
}

TEST(ChatTemplate, Qwen3MatchesHfGolden) {
  const char* d = shared_data();
  if (!d || !fs::exists(fs::path(d) / "tokenizers/qwen3/tokenizer_config.json"))
    GTEST_SKIP() << "TRITIUM_TEST_DATA/tokenizers/qwen3 not available";
  auto files = tritium::load_chat_template(fs::path(d) / "tokenizers/qwen3");
  EXPECT_EQ(files.bos_token, "");  // null in the config
  EXPECT_EQ(files.eos_token, "<|im_end|>");
  auto t = ChatTemplate::from_string(files.source);
  EXPECT_EQ(tritium::apply_chat_template(t, golden_messages(), true, files.bos_token, files.eos_token),
            golden_chat("qwen3"));
}

// Qwen3's tools branch, tool_calls (dict and string arguments), tool responses, reasoning_content,
// <think> in content, enable_thinking=false: outputs of jinja2 with HF's settings.
TEST(ChatTemplate, Qwen3ToolsAndReasoningMatchReference) {
  const char* d = shared_data();
  if (!d || !fs::exists(fs::path(d) / "tokenizers/qwen3/tokenizer_config.json"))
    GTEST_SKIP() << "TRITIUM_TEST_DATA/tokenizers/qwen3 not available";
  auto files = tritium::load_chat_template(fs::path(d) / "tokenizers/qwen3");
  auto t = ChatTemplate::from_string(files.source);
  auto cases = read_json(kData / "template" / "qwen3_cases.json");
  ASSERT_EQ(cases.size(), 6u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::string out = tritium::apply_chat_template(t, c["messages"], c["add_generation_prompt"], "", files.eos_token,
                                                   c["tools"], c["extra"]);
    EXPECT_EQ(out, c["expected"].get<std::string>());
  }
  // The tools list appears as json.dumps lines (", "/": " separators, non-ASCII kept, key order kept).
  const auto& first = cases[0];
  std::string out = tritium::apply_chat_template(t, first["messages"], true, "", files.eos_token, first["tools"]);
  EXPECT_NE(out.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
                     "\"Get the current weather in a city (°C).\""),
            std::string::npos);
  EXPECT_NE(out.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich\", \"days\": 2}}\n"
                     "</tool_call>"),
            std::string::npos);
  EXPECT_NE(out.find("<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response>\n<tool_response>\n"
                     "{\"temp\": 19}\n</tool_response><|im_end|>"),
            std::string::npos);
}

TEST(ChatTemplate, ChatMessageStructBuildsMessages) {
  tritium::ChatMessage a;
  a.role = "assistant";
  a.content = "ok";
  a.reasoning_content = "why";
  a.tool_calls = ordered_json::parse(R"([{"type":"function","function":{"name":"f","arguments":{"x":1}}}])");
  tritium::ChatMessage user, tool;
  user.role = "user";
  user.content = "hi";
  tool.role = "tool";
  tool.content = "result";
  auto j = tritium::messages_to_json({user, a, tool});
  EXPECT_EQ(j.dump(), R"([{"role":"user","content":"hi"},{"role":"assistant","content":"ok","reasoning_content":"why",)"
                      R"("tool_calls":[{"type":"function","function":{"name":"f","arguments":{"x":1}}}]},)"
                      R"({"role":"tool","content":"result"}])");
  std::string out = render("{% for m in messages %}{{ m.role }}:{{ m.content }}{% if m.tool_calls %}"
                           "{{ m.tool_calls[0].function.arguments|tojson }}{% endif %};{% endfor %}",
                           {{"messages", j}});
  EXPECT_EQ(out, "user:hi;assistant:ok{\"x\": 1};tool:result;");
}

TEST(ChatTemplate, SyntaxErrorsNameLineAndColumn) {
  auto syntax = [](const std::string& src) {
    try {
      ChatTemplate::from_string(src);
    } catch (const tritium::Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(syntax("ab\n  {% if x %}\nno end"),
            "chat template syntax error at line 3, column 7: unexpected end of template, expected 'elif'");
  EXPECT_EQ(syntax("{{ 1 + }}"), "chat template syntax error at line 1, column 8: unexpected '}}'");
  EXPECT_EQ(syntax("x\n{% frobnicate %}"), "chat template syntax error at line 2, column 4: unknown or unsupported tag 'frobnicate'");
  EXPECT_EQ(syntax("{{ 'abc }}"), "chat template syntax error at line 1, column 4: unterminated string literal");
  EXPECT_EQ(syntax("{# never closed"), "chat template syntax error at line 1, column 1: unterminated comment");
  EXPECT_EQ(syntax("{{ a $ b }}"), "chat template syntax error at line 1, column 6: unexpected character '$'");
  EXPECT_EQ(syntax("{% for x in %}{% endfor %}"), "chat template syntax error at line 1, column 13: unexpected '%}'");
  EXPECT_EQ(syntax("{% if a %}{% endfor %}"), "chat template syntax error at line 1, column 14: unknown or unsupported tag 'endfor'");
}

TEST(ChatTemplate, RuntimeErrorsNamePosition) {
  EXPECT_EQ(error_of("line1\n{{ 1 + nope }}"), "chat template error at line 2, column 6: 'nope' is undefined (in +)");
  EXPECT_EQ(error_of("{{ x.foo() }}", {{"x", "s"}}), "chat template error at line 1, column 9: 'str' object has no method 'foo'");
  EXPECT_EQ(error_of("{{ 1|nofilter }}"), "chat template error at line 1, column 5: unknown filter 'nofilter'");
  EXPECT_EQ(error_of("{{ l.append(1) }}", {{"l", ordered_json::array()}}),
            "chat template error at line 1, column 12: list.append() modifies a list, which HF's immutable sandbox forbids");
  EXPECT_EQ(error_of("{% set x = 1 %}{% set x.y = 2 %}"),
            "chat template error at line 1, column 19: cannot assign attribute on non-namespace object 'x'");
}

TEST(ChatTemplate, RaiseExceptionPropagatesMessageVerbatim) {
  const std::string src =
      "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}"
      "{{ raise_exception('Conversation roles must be user/assistant, got ' + m.role) }}{% endif %}{% endfor %}";
  auto t = ChatTemplate::from_string(src);
  try {
    t.render({{"messages", ordered_json::parse(R"([{"role":"user","content":"x"},{"role":"robot","content":"y"}])")}});
    FAIL() << "expected raise_exception to throw";
  } catch (const tritium::Error& e) {
    EXPECT_STREQ(e.what(), "Conversation roles must be user/assistant, got robot");
  }
}

TEST(ChatTemplate, MacroRecursionIsBounded) {
  std::string err = error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_NE(err.find("macro 'f' nested deeper than 64 calls"), std::string::npos) << err;
  // Legitimate recursion below the bound works.
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40)|length }}"),
            "71");
}

// A hostile template cannot hang or exhaust memory: nested loops stop at the statement budget, a doubling string
// at the size bound, each with a clear error and in bounded time.
TEST(ChatTemplate, RunawayLoopsAndStringsAreBounded) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string err = error_of("{% for i in range(1000000) %}{% for j in range(1000000) %}x{% endfor %}{% endfor %}");
  EXPECT_NE(err.find("runs more than"), std::string::npos) << err;
  err = error_of("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
                 "{{ ns.s|length }}");
  EXPECT_NE(err.find("too large"), std::string::npos) << err;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 60.0);
  // A long but finite template is unaffected.
  EXPECT_EQ(render("{% for i in range(1000) %}{% for j in range(100) %}{% endfor %}{% endfor %}ok"), "ok");
}

TEST(ChatTemplate, DeepNestingIsRejectedNotCrashing) {
  std::string deep(5000, '(');
  std::string err;
  try {
    ChatTemplate::from_string("{{ " + deep + "1" + std::string(5000, ')') + " }}");
  } catch (const tritium::Error& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("nested too deeply"), std::string::npos) << err;
}

// Deliberate leniency (asked for by the engine's callers): an attribute of an undefined value is
// undefined (jinja2 raises); printing and testing it behave as for any undefined value.
TEST(ChatTemplate, AttributeOfUndefinedIsUndefined) {
  EXPECT_EQ(render("[{{ nope.attr }}][{{ nope.a.b }}]{{ nope.attr is defined }}{{ nope['k'] is undefined }}"),
            "[][]FalseTrue");
}

TEST(ChatTemplate, LoaderReadsTokenizerConfigForms) {
  auto dir = fs::temp_directory_path() / ("tritium_tmpl_loader_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name) << text; };
  write("tokenizer_config.json",
        R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
            "chat_template": [{"name": "default", "template": "D{{ bos_token }}"}, {"name": "tool_use", "template": "T"}]})");
  auto def = tritium::load_chat_template(dir);
  EXPECT_EQ(def.source, "D{{ bos_token }}");
  EXPECT_EQ(def.bos_token, "<s>");
  EXPECT_EQ(def.eos_token, "</s>");
  EXPECT_EQ(tritium::load_chat_template(dir, "tool_use").source, "T");
  EXPECT_THROW(tritium::load_chat_template(dir, "missing"), tritium::Error);
  write("chat_template.jinja", "J");
  EXPECT_EQ(tritium::load_chat_template(dir).source, "J");  // the newer file wins
  fs::remove(dir / "chat_template.jinja");
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  try {
    tritium::load_chat_template(dir);
    ADD_FAILURE() << "expected an error";
  } catch (const tritium::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no chat template in"), std::string::npos);
  }
  fs::remove_all(dir);
}

// Robustness: random mutations of the reference templates must either render or throw tritium::Error
// (never another exception type, never a crash; run under ASan/UBSan too).
TEST(ChatTemplate, MutatedTemplatesFailCleanly) {
  auto cases = read_json(kData / "template" / "jinja_cases.json");
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  auto next = [&rng]() {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
  };
  const std::string alphabet = "{}%#-+()[]'\"|.,=:~ \nabx01";
  int rendered = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const auto& c = cases[next() % cases.size()];
    std::string src = c["template"];
    int edits = 1 + static_cast<int>(next() % 3);
    for (int k = 0; k < edits && !src.empty(); ++k) {
      size_t pos = next() % src.size();
      switch (next() % 3) {
        case 0: src.erase(pos, 1 + next() % 3); break;
        case 1: src.insert(pos, 1, alphabet[next() % alphabet.size()]); break;
        default: src[pos] = alphabet[next() % alphabet.size()];
      }
    }
    try {
      ChatTemplate::from_string(src).render(c["context"]);
      ++rendered;
    } catch (const tritium::Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-tritium exception " << e.what() << " for template:\n" << src;
    }
  }
  EXPECT_GT(rendered, 100);
  EXPECT_GT(rejected, 100);
}
