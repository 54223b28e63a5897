// The event-driven HTTP transport under clients that misbehave: pipelining, slow and idle connections, the
// connection cap, disconnects of non-streaming requests, /health under load, and shutdown with idle and slow
// connections open. Raw sockets, so that the client does exactly what the test says.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "server/http_transport.h"
#include "server/server_fixture.h"

using namespace tritium;
using nlohmann::json;
using tritium::test::Fixture;
using Clock = std::chrono::steady_clock;

namespace {

/// A blocking TCP client socket on 127.0.0.1.
class Conn {
 public:
  explicit Conn(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Conn() {
    if (fd_ >= 0) ::close(fd_);
  }
  Conn(const Conn&) = delete;
  bool ok() const { return ok_; }
  bool send(const std::string& s) { return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()); }
  /// Reads until `done(received)` or EOF or the timeout; returns what arrived.
  std::string read_until(const std::function<bool(const std::string&)>& done, std::chrono::milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    char buf[8192];
    while (!done(got_) && Clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      const int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
      if (::poll(&p, 1, std::max(ms, 1)) <= 0) continue;
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        eof_ = true;
        break;
      }
      got_.append(buf, static_cast<size_t>(n));
    }
    return got_;
  }
  /// True when the server closed the connection within the timeout.
  bool closed_by_server(std::chrono::milliseconds timeout) {
    read_until([](const std::string&) { return false; }, timeout);
    return eof_;
  }
  const std::string& received() const { return got_; }

 private:
  int fd_ = -1;
  bool ok_ = false, eof_ = false;
  std::string got_;
};

std::string post(const std::string& path, const std::string& body, bool close = false) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + (close ? "\r\nConnection: close" : "") + "\r\n\r\n" + body;
}
const std::string kHealth = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

/// Milliseconds a fresh connection takes to get its /health answer.
double health_ms(int port) {
  const auto t0 = Clock::now();
  Conn c(port);
  if (!c.ok() || !c.send(kHealth)) return 1e9;
  const std::string r = c.read_until([](const std::string& s) { return s.find("\r\n\r\n") != std::string::npos; },
                                     std::chrono::seconds(30));
  if (r.rfind("HTTP/1.1 200", 0) != 0) return 1e9;
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The slowest /health answer allowed (a sanitizer build runs several times slower).
double health_budget_ms() { return test::under_sanitizer() ? 500 : 100; }

}  // namespace

TEST(HttpParser, RequestsLimitsAndPipelining) {
  server::TransportConfig lim;
  lim.max_header_bytes = 256;
  lim.max_body_bytes = 16;
  auto p = server::parse_http_request(post("/v1/completions", "{\"a\":1}") + kHealth, lim);
  ASSERT_TRUE(p.complete);
  EXPECT_EQ(p.request.method, "POST");
  EXPECT_EQ(p.request.path, "/v1/completions");
  EXPECT_EQ(p.request.header("content-type"), "application/json");
  EXPECT_EQ(p.request.body, "{\"a\":1}");
  EXPECT_EQ(p.consumed, post("/v1/completions", "{\"a\":1}").size());  // the pipelined GET is left
  // Chunked body, query string.
  p = server::parse_http_request("POST /tokenize?x=1 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", lim);
  ASSERT_TRUE(p.complete);
  EXPECT_EQ(p.request.path, "/tokenize");
  EXPECT_EQ(p.request.target, "/tokenize?x=1");
  EXPECT_EQ(p.request.body, "abcde");
  // Incomplete: neither complete nor an error.
  p = server::parse_http_request("GET /health HTTP/1.1\r\nHost: x\r\n", lim);
  EXPECT_FALSE(p.complete);
  EXPECT_EQ(p.error_status, 0);
  // Limits and garbage.
  EXPECT_EQ(server::parse_http_request(post("/x", std::string(17, 'a')), lim).error_status, 413);
  EXPECT_EQ(server::parse_http_request("GET / HTTP/1.1\r\nX: " + std::string(300, 'a') + "\r\n\r\n", lim).error_status, 431);
  EXPECT_EQ(server::parse_http_request("GET / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", lim).error_status, 400);
  EXPECT_EQ(server::parse_http_request("\x01\x02 / HTTP/1.1\r\n\r\n", lim).error_status, 400);
}

// Several requests in one write are all answered, in order, on the same connection.
TEST(HttpTransport, PipelinedRequestsAreAnsweredInOrder) {
  Fixture f;
  Conn c(f.srv->port());
  ASSERT_TRUE(c.ok());
  const std::string gen = json{{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}}.dump();
  ASSERT_TRUE(c.send(post("/v1/completions", gen) + kHealth + post("/tokenize", R"({"prompt":"hi"})") +
                     "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string r = c.read_until([](const std::string& s) { return s.find("\"object\":\"list\"") != std::string::npos; },
                                     std::chrono::seconds(60));
  EXPECT_EQ(count(r, "HTTP/1.1 200 OK"), 4u) << r;
  const size_t a = r.find("text_completion"), b = r.find("\"tokens\""), d = r.find("\"object\":\"list\"");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  EXPECT_LT(a, b);
  EXPECT_LT(b, d);
}

// Clients that trickle their headers (or send none) hold no thread: other requests and /health go on at once,
// and the header timeout closes the slow ones.
TEST(HttpTransport, SlowHeaderClientsBlockNobody) {
  Fixture f("sk-test", [](server::ServerConfig& sc) { sc.http.header_timeout = std::chrono::milliseconds(1500); });
  std::vector<std::unique_ptr<Conn>> slow;
  for (int i = 0; i < 150; ++i) {
    slow.push_back(std::make_unique<Conn>(f.srv->port()));
    ASSERT_TRUE(slow.back()->ok());
    ASSERT_TRUE(slow.back()->send("POST /v1/completions HTTP/1.1\r\nHost: 1"));  // never finished
  }
  for (int i = 0; i < 10; ++i) EXPECT_LT(health_ms(f.srv->port()), health_budget_ms());
  httplib::Client c("127.0.0.1", f.srv->port());
  auto r = c.Post("/v1/completions", {{"Authorization", "Bearer sk-test"}},
                  json{{"prompt", "Hello"}, {"max_tokens", 4}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Past the header timeout every slow connection has been closed.
  for (auto& s : slow) EXPECT_TRUE(s->closed_by_server(std::chrono::seconds(5)));
}

// /health answers fast while many streams are open and generating. The streams ask for more tokens than they can
// generate while the probes run, so every probe runs beside them; the disconnects at the end abort them.
TEST(HttpTransport, HealthAnswersWhileStreamsRun) {
  Fixture f;
  const int streams = test::under_sanitizer() ? 16 : 160;
  std::vector<std::unique_ptr<Conn>> open;
  const int64_t max_tokens = std::min<int64_t>(1000, f.engine->max_model_len() - 16);
  const std::string body =
      json{{"prompt", "A long tale"}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"stream", true}}.dump();
  for (int i = 0; i < streams; ++i) {
    open.push_back(std::make_unique<Conn>(f.srv->port()));
    ASSERT_TRUE(open.back()->send(post("/v1/completions", body)));
  }
  // The running count is published at the end of a step, and the first steps (the prompts, on one thread) can take
  // a second under a sanitizer on a busy machine.
  for (int i = 0; i < 4000 && f.engine->metrics().num_requests_running == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_GT(f.engine->metrics().num_requests_running, 0) << "no stream started within 20 s";
  std::vector<double> ms;
  int beside_streams = 0;  // probes answered while streams were generating
  for (int i = 0; i < 20; ++i) {
    ms.push_back(health_ms(f.srv->port()));
    if (f.engine->metrics().num_requests_running > 0) ++beside_streams;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(beside_streams, 20);
  for (double m : ms) EXPECT_LT(m, health_budget_ms());
  open.clear();  // disconnects abort the streams
  for (int i = 0; i < 500 && f.engine->num_unfinished() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(f.engine->num_unfinished(), 0);
}

// A non-streaming client that goes away aborts its request at once: its blocks are freed long before the
// request would have finished.
TEST(HttpTransport, NonStreamingDisconnectAbortsTheRequest) {
  Fixture f;
  {
    Conn c(f.srv->port());
    ASSERT_TRUE(c.send(post("/v1/completions",
                            json{{"prompt", "Story"}, {"max_tokens", f.engine->max_model_len() - 8}, {"ignore_eos", true}}.dump())));
    for (int i = 0; i < 500 && f.engine->metrics().num_requests_running == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(f.engine->metrics().num_requests_running, 1);
  }
  for (int i = 0; i < 500 && f.engine->num_unfinished() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(f.engine->num_unfinished(), 0);
  EXPECT_EQ(f.engine->metrics().kv_cache_usage_perc, 0.0);
  const auto m = f.engine->metrics();
  EXPECT_EQ(m.request_success_total.count("abort") ? m.request_success_total.at("abort") : 0, 1);
}

// Past --max-connections, with every connection busy with a request (here: headers still arriving), a new
// connection gets 503 at once; an idle keep-alive connection is closed after the keep-alive timeout.
TEST(HttpTransport, ConnectionCapAndKeepAliveTimeout) {
  Fixture f("", [](server::ServerConfig& sc) {
    sc.http.max_connections = 8;
    sc.http.keep_alive_timeout = std::chrono::milliseconds(800);
  });
  std::vector<std::unique_ptr<Conn>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::make_unique<Conn>(f.srv->port()));
    ASSERT_TRUE(held.back()->send("GET /health HTTP/1.1\r\nHo"));  // a request being read: not idle
  }
  for (int i = 0; i < 200 && f.srv->connections() < 8; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the partial headers have been read
  Conn extra(f.srv->port());
  const std::string r = extra.read_until([](const std::string& s) { return s.find("}}") != std::string::npos; },
                                         std::chrono::seconds(5));
  EXPECT_EQ(r.rfind("HTTP/1.1 503", 0), 0u) << r;
  EXPECT_NE(r.find("too many connections"), std::string::npos);
  EXPECT_TRUE(extra.closed_by_server(std::chrono::seconds(2)));
  for (auto& c : held) EXPECT_FALSE(c->closed_by_server(std::chrono::milliseconds(10)));  // none was evicted
  held.clear();
  for (int i = 0; i < 200 && f.srv->connections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::vector<std::unique_ptr<Conn>> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(std::make_unique<Conn>(f.srv->port()));
  for (auto& c : idle) EXPECT_TRUE(c->closed_by_server(std::chrono::seconds(5)));  // idle past 800 ms
  EXPECT_LT(health_ms(f.srv->port()), health_budget_ms());
}

namespace {

/// Opens `n` connections that send nothing, and waits until the server holds `total` connections.
std::vector<std::unique_ptr<Conn>> open_idle(const Fixture& f, int n, int total) {
  std::vector<std::unique_ptr<Conn>> v;
  for (int i = 0; i < n; ++i) {
    v.push_back(std::make_unique<Conn>(f.srv->port()));
    EXPECT_TRUE(v.back()->ok());
  }
  for (int i = 0; i < 1000 && f.srv->connections() < total; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(f.srv->connections(), total);
  return v;
}

}  // namespace

// An idle-connection flood at the cap does not lock anyone out: each new connection replaces the one idle longest,
// so /health and requests keep getting 200 at once, and the flood's oldest connections are the ones closed.
TEST(HttpTransport, IdleFloodAtTheCapReplacesTheLongestIdle) {
  for (const int cap : {64, 400}) {
    Fixture f("", [cap](server::ServerConfig& sc) {
      sc.http.max_connections = cap;
      sc.http.keep_alive_timeout = std::chrono::seconds(600);  // the flood would hold its slots for 10 minutes
    });
    std::vector<std::unique_ptr<Conn>> flood = open_idle(f, cap, cap);
    // Probes on fresh connections that stay open after their answer (idle in turn), so each one needs a slot.
    const int probes = 10;
    std::vector<std::unique_ptr<Conn>> kept;
    auto probe = [&](const std::string& req, const std::string& until) {
      const auto t0 = Clock::now();
      kept.push_back(std::make_unique<Conn>(f.srv->port()));
      if (!kept.back()->ok() || !kept.back()->send(req)) return 1e9;
      const std::string r = kept.back()->read_until(
          [&](const std::string& s) { return s.find(until) != std::string::npos; }, std::chrono::seconds(30));
      if (r.rfind("HTTP/1.1 200", 0) != 0) return 1e9;
      return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    };
    for (int i = 0; i < probes; ++i) {
      EXPECT_LT(probe(kHealth, "\r\n\r\n"), health_budget_ms()) << "cap " << cap;
      EXPECT_LT(probe(post("/tokenize", R"({"prompt":"hello"})"), "\"tokens\""), health_budget_ms()) << "cap " << cap;
    }
    // 2 * probes connections were admitted; the oldest of the flood made room for them (connections accepted
    // within the same instant may enter the idle order a few places apart).
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    int closed = 0, last_closed = -1;
    for (size_t i = 0; i < flood.size(); ++i)
      if (flood[i]->closed_by_server(std::chrono::milliseconds(1))) {
        ++closed;
        last_closed = static_cast<int>(i);
      }
    EXPECT_EQ(closed, 2 * probes) << "cap " << cap;
    EXPECT_LT(last_closed, 2 * probes + 8) << "cap " << cap << ": a recent connection was closed";
    for (auto& k : kept) EXPECT_FALSE(k->closed_by_server(std::chrono::milliseconds(1)));
    EXPECT_EQ(f.srv->connections(), cap);
  }
}

// Connections with a request in progress are never the ones closed to admit another: a request whose body is still
// arriving and a stream being answered survive a stream of new connections; with no idle connection left, a new
// one gets 503.
TEST(HttpTransport, AdmissionNeverClosesRequestsInProgress) {
  Fixture f("", [](server::ServerConfig& sc) {
    sc.http.max_connections = 6;
    sc.http.keep_alive_timeout = std::chrono::seconds(600);
  });
  const int port = f.srv->port();
  // Two requests whose bodies are still arriving.
  const std::string body = json{{"prompt", "hi"}}.dump();
  const std::string head = "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n";
  std::vector<std::unique_ptr<Conn>> reading;
  for (int i = 0; i < 2; ++i) {
    reading.push_back(std::make_unique<Conn>(port));
    ASSERT_TRUE(reading.back()->send(head + body.substr(0, 3)));
  }
  // Two streams being answered (far more tokens than the test takes).
  const std::string gen = json{{"prompt", "A long tale"}, {"max_tokens", f.engine->max_model_len() - 16},
                               {"ignore_eos", true}, {"stream", true}}.dump();
  std::vector<std::unique_ptr<Conn>> streams;
  for (int i = 0; i < 2; ++i) {
    streams.push_back(std::make_unique<Conn>(port));
    ASSERT_TRUE(streams.back()->send(post("/v1/completions", gen)));
    streams.back()->read_until([](const std::string& s) { return s.find("data: ") != std::string::npos; },
                               std::chrono::seconds(30));
    ASSERT_NE(streams.back()->received().find("data: "), std::string::npos);
  }
  // Two idle ones fill the cap.
  std::vector<std::unique_ptr<Conn>> idle = open_idle(f, 2, 6);
  // New connections, each kept open after its answer (so it is idle in turn): they replace idle ones only.
  std::vector<std::unique_ptr<Conn>> fresh;
  for (int i = 0; i < 6; ++i) {
    fresh.push_back(std::make_unique<Conn>(port));
    ASSERT_TRUE(fresh.back()->send(kHealth));
    const std::string r = fresh.back()->read_until(
        [](const std::string& s) { return s.find("\r\n\r\n") != std::string::npos; }, std::chrono::seconds(5));
    EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << i << ": " << r;
    // The client reads the answer a moment before the server puts the connection back on the idle list; the next
    // connection needs an idle one to replace.
    for (int k = 0; k < 1000 && f.srv->idle_connections() < 2; ++k)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(f.srv->idle_connections(), 2) << i;
  }
  for (auto& c : idle) EXPECT_TRUE(c->closed_by_server(std::chrono::seconds(2)));
  for (auto& c : reading) EXPECT_FALSE(c->closed_by_server(std::chrono::milliseconds(10)));
  for (auto& c : streams) {
    const size_t before = c->received().size();
    c->read_until([before](const std::string& s) { return s.size() > before; }, std::chrono::seconds(10));
    EXPECT_GT(c->received().size(), before) << "the stream stopped";
  }
  // The requests being read complete normally.
  for (auto& c : reading) {
    ASSERT_TRUE(c->send(body.substr(3)));
    const std::string r = c->read_until([](const std::string& s) { return s.find("\"tokens\"") != std::string::npos; },
                                        std::chrono::seconds(10));
    EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << r;
  }
  // Every connection busy (the two just answered are idle again: give them requests in progress too): 503.
  for (auto& c : reading) ASSERT_TRUE(c->send(head));
  for (auto& c : fresh) c->send("GET /health HTTP/1.1\r\nHo");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Conn extra(port);
  const std::string r = extra.read_until([](const std::string& s) { return s.find("}}") != std::string::npos; },
                                         std::chrono::seconds(5));
  EXPECT_EQ(r.rfind("HTTP/1.1 503", 0), 0u) << r;
  for (auto& c : streams) EXPECT_FALSE(c->closed_by_server(std::chrono::milliseconds(10)));
}

// Shutdown with idle keep-alive and slow-header connections open: the in-flight request finishes, new
// requests on open connections get 503, and shutdown returns promptly, closing everything.
TEST(HttpTransport, ShutdownWithIdleAndSlowConnections) {
  Fixture f("", [](server::ServerConfig& sc) {
    sc.http.keep_alive_timeout = std::chrono::seconds(600);
    sc.http.header_timeout = std::chrono::seconds(600);
  });
  std::vector<std::unique_ptr<Conn>> idle, slow;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(std::make_unique<Conn>(f.srv->port()));
    ASSERT_TRUE(idle.back()->send(kHealth));  // one request, then kept open
    idle.back()->read_until([](const std::string& s) { return s.find("\r\n\r\n") != std::string::npos; },
                            std::chrono::seconds(10));
  }
  for (int i = 0; i < 50; ++i) {
    slow.push_back(std::make_unique<Conn>(f.srv->port()));
    ASSERT_TRUE(slow.back()->send("GET /health HTTP/1.1\r\nHo"));
  }
  Conn running(f.srv->port());
  ASSERT_TRUE(running.send(post("/v1/completions",
                                json{{"prompt", "Long story"}, {"max_tokens", 64}, {"ignore_eos", true}}.dump())));
  for (int i = 0; i < 500 && f.engine->metrics().num_requests_running == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const auto t0 = Clock::now();
  std::thread stopper([&] { f.srv->shutdown(std::chrono::seconds(20)); });
  for (int i = 0; i < 200 && !f.srv->draining(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(idle[0]->send(post("/v1/completions", json{{"prompt", "x"}}.dump())));
  stopper.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(secs, 10.0);
  const std::string r = running.read_until([](const std::string&) { return false; }, std::chrono::seconds(2));
  EXPECT_NE(r.find("\"finish_reason\":\"length\""), std::string::npos) << r;
  for (auto& c : idle) EXPECT_TRUE(c->closed_by_server(std::chrono::seconds(2)));
  EXPECT_NE(idle[0]->received().find("HTTP/1.1 503"), std::string::npos) << idle[0]->received();
  for (auto& c : slow) EXPECT_TRUE(c->closed_by_server(std::chrono::seconds(2)));
}
