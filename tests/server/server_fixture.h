// The server in-process on 127.0.0.1 (ephemeral port) over the bundled tiny BitNet model on one CPU thread, with
// the model's chat template or the one given.
#pragma once

#include <httplib.h>

#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "core/parallel.h"
#include "model/loader.h"
#include "server/openai_server.h"
#include "test_util.h"

namespace tritium::test {

struct Fixture {
  std::unique_ptr<Transformer> model;
  std::shared_ptr<Backend> be;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<server::OpenAIServer> srv;
  int saved_threads = num_threads();

  explicit Fixture(const std::string& api_key = "", const std::function<void(server::ServerConfig&)>& tweak = {},
                   std::optional<ChatTemplateFiles> chat = std::nullopt) {
    std::signal(SIGPIPE, SIG_IGN);
    set_num_threads(1);
    model = load_transformer(test::bundled_model());
    be = std::make_shared<CpuBackend>(*model);
    tok = Tokenizer::from_file(test::bundled_model() + "/tokenizer.json");
    EngineConfig ec;
    ec.num_blocks = 512;
    ec.max_num_seqs = 32;
    engine = std::make_unique<Engine>(*be, *tok, ec);
    engine->start();
    server::ServerConfig sc;
    sc.http.port = 0;
    sc.api_key = api_key;
    sc.model_name = "tiny-bitnet";
    sc.http.max_body_bytes = 64 * 1024;
    if (tweak) tweak(sc);
    if (!chat) chat = load_chat_template(test::bundled_model());
    srv = std::make_unique<server::OpenAIServer>(*engine, *tok, std::move(chat), sc);
    srv->start();
  }
  ~Fixture() {
    srv->shutdown(std::chrono::seconds(5));
    srv.reset();
    engine->stop();
    set_num_threads(saved_threads);
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", srv->port());
    c.set_read_timeout(60);
    return c;
  }
};

}  // namespace tritium::test
