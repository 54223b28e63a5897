#include "server/http_transport.h"

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cerrno>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace tritium::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

using Parser = http::request_parser<http::string_body>;

void configure(Parser& p, const TransportConfig& c) {
  p.header_limit(static_cast<std::uint32_t>(std::min<size_t>(c.max_header_bytes, UINT32_MAX)));
  p.body_limit(static_cast<std::uint64_t>(c.max_body_bytes));
}

HttpRequest to_request(const http::request<http::string_body>& m) {
  HttpRequest r;
  r.method = std::string(m.method_string());
  r.target = std::string(m.target());
  r.path = r.target.substr(0, r.target.find('?'));
  for (const auto& f : m) {
    std::string name(f.name_string());
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    r.headers.emplace_back(std::move(name), std::string(f.value()));
  }
  r.body = m.body();
  return r;
}

/// The status answered for a failed read before the connection closes; 0 = close without answering (the
/// client left, timed out, or sent a partial message).
int status_for(const beast::error_code& ec) {
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) return 431;
  if (ec == http::error::body_limit) return 413;
  if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == http::error::short_read ||
      ec == http::error::need_more)
    return 0;
  if (ec.category() == beast::error_code(http::error::bad_method).category()) return 400;
  return 0;
}

std::string clean(std::string s) {
  std::erase_if(s, [](char c) { return c == '\r' || c == '\n'; });
  return s;
}

/// Status line and header fields (RFC 9112 section 4); reason phrases from Beast.
std::string response_head(const HttpResponse& r, bool chunked, size_t length, bool keep_alive) {
  const auto st = static_cast<http::status>(r.status);
  std::string h = fmt::format("HTTP/1.1 {} {}\r\n", r.status, std::string(http::obsolete_reason(st)));
  if (!r.content_type.empty()) h += "Content-Type: " + clean(r.content_type) + "\r\n";
  for (const auto& [k, v] : r.headers) h += clean(k) + ": " + clean(v) + "\r\n";
  h += chunked ? std::string("Transfer-Encoding: chunked\r\n") : fmt::format("Content-Length: {}\r\n", length);
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

HttpResponse plain_error(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain";
  r.body = message + "\n";
  return r;
}

class Session;

/// What the transport and its sessions share.
struct Shared {
  TransportConfig cfg;
  HttpHandler handler;
  ErrorBody error_body = plain_error;
  std::atomic<int> connections{0};
  std::atomic<int> evicting{0};  ///< connections chosen to make room for a new one and not yet gone
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::list<std::weak_ptr<Session>> sessions;  ///< open ones, for stop()
  /// Connections waiting for a request's first byte, longest waiting first (under mu): the ones a new
  /// connection may replace at the connection cap.
  std::list<std::weak_ptr<Session>> idle;

  /// At the cap: closes the connection that has waited longest for a request's first byte, so that a new one can
  /// be admitted. False when every connection has a request being read or answered.
  bool evict_longest_idle();
};

/// One connection. Every member runs on the connection's strand (the socket's executor).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket s, std::shared_ptr<Shared> sh) : stream_(std::move(s)), sh_(std::move(sh)) { ++sh_->connections; }
  ~Session() {
    --sh_->connections;
    std::lock_guard lk(sh_->mu);
    if (evicted_) --sh_->evicting;
    if (idle_it_) sh_->idle.erase(*idle_it_);
    sh_->sessions.erase(it_);
  }

  void start() {
    {
      std::lock_guard lk(sh_->mu);
      it_ = sh_->sessions.insert(sh_->sessions.end(), weak_from_this());
    }
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->wait_request(); });
  }

  /// Runs fn on the strand, keeping the session alive until then.
  void run(std::function<void(Session&)> fn) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), fn = std::move(fn)] { fn(*self); });
  }
  asio::any_io_executor executor() { return stream_.get_executor(); }

  // The Responder operations of request number `gen` (stale calls of an earlier request are ignored).
  void respond(uint64_t gen, HttpResponse r) {
    if (!current(gen) || streaming_ || complete_) return;
    out_.push_back(response_head(r, false, r.body.size(), keep_alive_) + r.body);
    complete_ = true;
    flush();
  }
  void start_stream(uint64_t gen, const HttpResponse& head) {
    if (!current(gen) || streaming_ || complete_) return;
    streaming_ = true;
    out_.push_back(response_head(head, true, 0, keep_alive_));
    flush();
  }
  void send_chunk(uint64_t gen, const std::string& d) {
    if (!current(gen) || !streaming_ || complete_ || d.empty()) return;
    out_.push_back(fmt::format("{:x}\r\n", d.size()) + d + "\r\n");  // RFC 9112 section 7.1
    flush();
  }
  void end_stream(uint64_t gen) {
    if (!current(gen) || !streaming_ || complete_) return;
    out_.push_back("0\r\n\r\n");
    complete_ = true;
    flush();
  }
  void on_disconnect(uint64_t gen, std::function<void()> fn) {
    if (lost_gen_ == gen) return fn();  // the client had already gone
    if (current(gen)) on_disconnect_ = std::move(fn);
  }
  void hold(uint64_t gen, std::shared_ptr<void> s) {
    if (current(gen)) held_ = std::move(s);
  }

  void close() {
    if (state_ == State::kClosed) return;
    leave_idle();
    state_ = State::kClosed;
    on_disconnect_ = nullptr;
    out_.clear();
    auto held = std::move(held_);  // released after the socket is closed (its destructor may abort requests)
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

 private:
  enum class State { kReading, kAnswering, kClosed };

  bool current(uint64_t gen) const { return state_ == State::kAnswering && gen == gen_; }

  void wait_request() {
    if (state_ == State::kClosed) return;
    if (sh_->stopping) return close();
    state_ = State::kReading;
    parser_.emplace();
    configure(*parser_, sh_->cfg);
    if (buf_.size() > 0) return read_header();  // a pipelined request is already here
    enter_idle();
    stream_.expires_after(sh_->cfg.keep_alive_timeout);
    stream_.async_read_some(buf_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      // A connection chosen for eviction closes even when its first byte arrived meanwhile (its slot is taken).
      if (!self->leave_idle() || ec) return self->close();
      self->buf_.commit(n);
      self->read_header();
    });
  }

  // The idle list (Shared::idle): a connection is on it from the start of its wait for a request's first byte
  // until that byte arrives or it closes. Only connections on it are ever evicted, so a request being read,
  // handled or answered is never cut off to admit another connection.
  void enter_idle() {
    std::lock_guard lk(sh_->mu);
    if (!evicted_ && !idle_it_) idle_it_ = sh_->idle.insert(sh_->idle.end(), weak_from_this());
  }
  /// Takes the connection off the idle list; false when it was evicted (it must close).
  bool leave_idle() {
    std::lock_guard lk(sh_->mu);
    if (idle_it_) sh_->idle.erase(*idle_it_);
    idle_it_.reset();
    return !evicted_;
  }

 public:
  /// Under Shared::mu: marks the connection evicted and takes it off the idle list (its close is posted by the
  /// caller).
  void mark_evicted() {
    evicted_ = true;
    idle_it_.reset();
  }

 private:

  void read_header() {
    stream_.expires_after(sh_->cfg.header_timeout);
    http::async_read_header(stream_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->fail(ec);
      const auto& len = self->parser_->content_length();
      if (len && *len > self->sh_->cfg.max_body_bytes) return self->fail(http::error::body_limit);
      if (beast::iequals(self->parser_->get()[http::field::expect], "100-continue")) {
        self->out_.push_back("HTTP/1.1 100 Continue\r\n\r\n");
        self->interim_ = true;
        return self->flush();
      }
      self->read_body();
    });
  }

  void read_body() {
    if (parser_->is_done()) return on_request();
    stream_.expires_after(sh_->cfg.body_timeout);
    http::async_read(stream_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->fail(ec);
      self->on_request();
    });
  }

  void fail(const beast::error_code& ec) {
    const int status = status_for(ec);
    if (status == 0 || state_ == State::kClosed) return close();
    state_ = State::kAnswering;
    ++gen_;
    keep_alive_ = false;
    respond(gen_, sh_->error_body(status, ec.message()));
  }

  void on_request() {
    stream_.expires_never();
    auto msg = parser_->release();
    keep_alive_ = msg.keep_alive() && !sh_->stopping;
    state_ = State::kAnswering;
    ++gen_;
    streaming_ = complete_ = false;
    watch();
    auto res = make_responder();
    try {
      sh_->handler(to_request(msg), res);
    } catch (const std::exception& e) {
      respond(gen_, sh_->error_body(500, e.what()));
    }
  }

  std::shared_ptr<Responder> make_responder();

  // While a request is answered, a readable socket means EOF / reset (the client left) or the next pipelined
  // request (left unread until this answer is written).
  void watch() {
    if (buf_.size() > 0) return;
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), g = gen_](beast::error_code ec) {
      if (ec || !self->current(g) || self->watch_done_ == g) return;
      char c;
      const ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) {
        self->watch_done_ = g;
        return;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return self->watch();
      self->lost();
    });
  }

  void lost() {
    if (state_ == State::kClosed) return;
    auto fn = std::move(on_disconnect_);
    if (state_ == State::kAnswering) lost_gen_ = gen_;
    close();
    if (fn) fn();
  }

  void flush() {
    if (writing_ || out_.empty() || state_ == State::kClosed) return;
    writing_ = true;
    wbuf_.clear();
    for (auto& s : out_) wbuf_ += s;
    out_.clear();
    stream_.expires_after(sh_->cfg.write_timeout);
    asio::async_write(stream_, asio::buffer(wbuf_), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->writing_ = false;
      if (ec) return self->lost();
      if (!self->out_.empty()) return self->flush();
      if (self->interim_) {  // "100 Continue" is out: now the body
        self->interim_ = false;
        return self->read_body();
      }
      self->stream_.expires_never();
      if (self->complete_) self->finish();
    });
  }

  void finish() {
    on_disconnect_ = nullptr;
    auto held = std::move(held_);
    streaming_ = complete_ = false;
    if (!keep_alive_ || sh_->stopping) return linger_close();
    wait_request();
  }

  // Connection: close after an answer: stop sending, then read and drop what the client still sends (up to a
  // second), so that closing with unread bytes does not reset the connection before the answer arrives.
  void linger_close() {
    state_ = State::kReading;
    ++gen_;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(1));
    drain();
  }
  void drain() {
    stream_.async_read_some(asio::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->drain();
    });
  }

  beast::tcp_stream stream_;
  std::shared_ptr<Shared> sh_;
  std::list<std::weak_ptr<Session>>::iterator it_;
  beast::flat_buffer buf_;
  std::optional<Parser> parser_;
  State state_ = State::kReading;
  uint64_t gen_ = 0;       ///< number of the request being answered
  uint64_t lost_gen_ = 0;  ///< request whose client went away before its answer was written
  uint64_t watch_done_ = 0;
  bool keep_alive_ = true, streaming_ = false, complete_ = false, writing_ = false, interim_ = false;
  std::deque<std::string> out_;
  std::string wbuf_;
  std::function<void()> on_disconnect_;
  std::shared_ptr<void> held_;
  char scratch_[4096];
  // Guarded by Shared::mu (the acceptor's thread reads them to choose a connection to evict).
  std::optional<std::list<std::weak_ptr<Session>>::iterator> idle_it_;
  bool evicted_ = false;
};

bool Shared::evict_longest_idle() {
  std::shared_ptr<Session> victim;
  {
    std::lock_guard lk(mu);
    // An entry that no longer locks belongs to a session being destroyed: its destructor erases it.
    for (auto it = idle.begin(); it != idle.end(); ++it) {
      victim = it->lock();
      if (victim) {
        idle.erase(it);
        break;
      }
    }
    if (!victim) return false;
    victim->mark_evicted();
    ++evicting;
  }
  victim->run([](Session& s) { s.close(); });
  return true;
}

/// The Responder of one request: forwards to its session's strand, tagged with the request number.
class Exchange : public Responder {
 public:
  Exchange(std::shared_ptr<Session> s, uint64_t gen) : s_(std::move(s)), gen_(gen) {}
  void respond(HttpResponse r) override {
    s_->run([g = gen_, r = std::move(r)](Session& s) mutable { s.respond(g, std::move(r)); });
  }
  void start_stream(HttpResponse head) override {
    s_->run([g = gen_, h = std::move(head)](Session& s) { s.start_stream(g, h); });
  }
  void send_chunk(std::string data) override {
    s_->run([g = gen_, d = std::move(data)](Session& s) { s.send_chunk(g, d); });
  }
  void end_stream() override {
    s_->run([g = gen_](Session& s) { s.end_stream(g); });
  }
  void post(std::function<void()> fn) override { asio::post(s_->executor(), std::move(fn)); }
  void on_disconnect(std::function<void()> fn) override {
    s_->run([g = gen_, fn = std::move(fn)](Session& s) mutable { s.on_disconnect(g, std::move(fn)); });
  }
  void hold(std::shared_ptr<void> state) override {
    s_->run([g = gen_, st = std::move(state)](Session& s) mutable { s.hold(g, std::move(st)); });
  }

 private:
  std::shared_ptr<Session> s_;
  uint64_t gen_;
};

std::shared_ptr<Responder> Session::make_responder() { return std::make_shared<Exchange>(shared_from_this(), gen_); }

}  // namespace

struct HttpTransport::Impl {
  std::shared_ptr<Shared> sh = std::make_shared<Shared>();
  asio::io_context ioc;
  // The acceptor, its retry timer and the handlers that touch them run on one strand: with several I/O threads an
  // accept completion and stop_accepting()'s close would otherwise use the acceptor concurrently (not thread-safe).
  asio::strand<asio::io_context::executor_type> accept_strand = asio::make_strand(ioc);
  tcp::acceptor acceptor{accept_strand};
  asio::steady_timer retry{accept_strand};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  bool stopped = false;

  void accept() {
    acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket s) {
      if (!acceptor.is_open() || ec == asio::error::operation_aborted) return;
      if (ec) {  // e.g. out of file descriptors: try again shortly instead of spinning
        retry.expires_after(std::chrono::milliseconds(50));
        retry.async_wait([this](beast::error_code e) {
          if (!e) accept();
        });
        return;
      }
      // At the cap a new connection replaces the one that has waited longest for a request (as nginx reuses
      // keep-alive connections); only when every connection has a request in progress is it answered 503.
      // Connections already chosen for eviction no longer count.
      const bool full = sh->connections.load() - sh->evicting.load() >= sh->cfg.max_connections;
      if (sh->stopping || (full && !sh->evict_longest_idle())) {
        reject(s);
      } else {
        std::make_shared<Session>(std::move(s), sh)->start();
      }
      accept();
    });
  }

  // Over the connection cap: a short 503 written without waiting (a fresh socket's send buffer takes it), then
  // the connection is closed.
  void reject(tcp::socket& s) {
    HttpResponse r = sh->error_body(503, "too many connections");
    r.headers.emplace_back("Retry-After", "1");
    const std::string out = response_head(r, false, r.body.size(), false) + r.body;
    beast::error_code ec;
    s.non_blocking(true, ec);
    s.write_some(asio::buffer(out), ec);
    s.shutdown(tcp::socket::shutdown_both, ec);
    s.close(ec);
  }
};

HttpTransport::HttpTransport(TransportConfig cfg, HttpHandler handler, ErrorBody error_body)
    : impl_(std::make_unique<Impl>()) {
  impl_->sh->cfg = std::move(cfg);
  impl_->sh->handler = std::move(handler);
  if (error_body) impl_->sh->error_body = std::move(error_body);
}

HttpTransport::~HttpTransport() { stop(); }

int HttpTransport::bind() {
  auto& im = *impl_;
  const auto& c = im.sh->cfg;
  beast::error_code ec;
  const auto addr = asio::ip::make_address(c.host == "localhost" ? "127.0.0.1" : c.host, ec);
  if (ec) fail("serve: '{}' is not an IP address ({})", c.host, ec.message());
  const tcp::endpoint ep(addr, static_cast<unsigned short>(c.port));
  im.acceptor.open(ep.protocol(), ec);
  if (!ec) im.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) im.acceptor.bind(ep, ec);
  if (!ec) im.acceptor.listen(4096, ec);  // capped by net.core.somaxconn
  if (ec) fail("serve: cannot bind {}:{} ({})", c.host, c.port, ec.message());
  port_ = im.acceptor.local_endpoint().port();
  return port_;
}

void HttpTransport::start() {
  auto& im = *impl_;
  im.work.emplace(im.ioc.get_executor());
  asio::post(im.accept_strand, [&im] { im.accept(); });
  const int n = std::max(1, im.sh->cfg.io_threads);
  for (int i = 0; i < n; ++i) im.threads.emplace_back([&im] { im.ioc.run(); });
}

void HttpTransport::stop_accepting() {
  auto& im = *impl_;
  asio::post(im.accept_strand, [&im] {
    beast::error_code ec;
    im.acceptor.close(ec);
    im.retry.cancel();
  });
  if (im.threads.empty()) {
    beast::error_code ec;
    im.acceptor.close(ec);
  }
}

void HttpTransport::stop() {
  auto& im = *impl_;
  if (im.stopped) return;
  im.stopped = true;
  im.sh->stopping = true;
  stop_accepting();
  std::vector<std::shared_ptr<Session>> open;
  {
    std::lock_guard lk(im.sh->mu);
    for (auto& w : im.sh->sessions)
      if (auto s = w.lock()) open.push_back(std::move(s));
  }
  for (auto& s : open) s->run([](Session& x) { x.close(); });
  open.clear();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (im.sh->connections.load() > 0 && !im.threads.empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  im.work.reset();
  im.ioc.stop();
  for (auto& t : im.threads) t.join();
  im.threads.clear();
}

int HttpTransport::connections() const { return impl_->sh->connections.load(); }

int HttpTransport::idle_connections() const {
  std::lock_guard lk(impl_->sh->mu);
  return static_cast<int>(impl_->sh->idle.size());
}

ParsedHttpRequest parse_http_request(std::string_view bytes, const TransportConfig& limits) {
  ParsedHttpRequest out;
  Parser p;
  configure(p, limits);
  p.eager(true);
  beast::error_code ec;
  size_t used = 0;
  while (!p.is_done() && used < bytes.size()) {
    const size_t n = p.put(asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec == http::error::need_more) {
      ec = {};
      if (n == 0) break;
      continue;
    }
    if (ec || n == 0) break;
  }
  if (!ec && p.is_done()) {
    const auto& len = p.content_length();
    if (len && *len > limits.max_body_bytes) ec = http::error::body_limit;
  }
  if (ec) {
    out.error_status = status_for(ec);
    if (out.error_status == 0) out.error_status = 400;
    out.error = ec.message();
    out.consumed = used;
    return out;
  }
  out.consumed = used;
  if (p.is_done()) {
    out.complete = true;
    out.request = to_request(p.get());
  }
  return out;
}

}  // namespace tritium::server
