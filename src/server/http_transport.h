// tritium server: the HTTP/1.1 transport, event-driven on Boost.Asio with Boost.Beast's parser.
//
// A few I/O threads serve every connection: no thread waits on a client, so slow or idle clients cost a socket,
// not a thread, and /health is never queued behind generation. Per connection:
//   - idle keep-alive wait (keep_alive_timeout), then the whole header within header_timeout, then the body
//     within body_timeout; a timeout closes the connection (slow-header clients cannot hold the server);
//   - requests are answered one after the other in arrival order (HTTP/1.1 pipelining);
//   - headers over max_header_bytes get 431, bodies over max_body_bytes 413, unparsable requests 400, each
//     followed by a close;
//   - while a request is being answered the socket is watched for EOF / reset, so a client that goes away is
//     reported to the handler (Responder::on_disconnect) whether or not it streams;
//   - a write that makes no progress for write_timeout closes the connection.
// Admission at max_connections: a new connection replaces the open one that has waited longest for a request's
// first byte (fresh or keep-alive; never one whose request is being read, handled or answered), which is closed;
// only when no connection is waiting does the new one get 503 and close at once. An idle-connection flood
// therefore cannot lock out new clients or /health. Boost.Beast 1.74 (header-only, Debian's
// libboost-dev); RFC 9112 for the message syntax and chunked encoding.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "server/http_message.h"

namespace tritium::server {

struct TransportConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                 ///< 0 = an ephemeral port (tests)
  int io_threads = 4;              ///< threads running the event loop (handlers run on them; they must not block)
  int max_connections = 1000;      ///< open connections at most (see the admission rule above)
  std::chrono::milliseconds keep_alive_timeout{5000};  ///< idle time before a request's first byte
  std::chrono::milliseconds header_timeout{10000};     ///< first byte to the end of the header
  std::chrono::milliseconds body_timeout{30000};       ///< end of the header to the end of the body
  std::chrono::milliseconds write_timeout{30000};      ///< one write (a response or a chunk) at most
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 4u << 20;
};

/// The body of an answer the transport gives itself (400, 413, 431, 503 over the connection cap).
using ErrorBody = std::function<HttpResponse(int status, const std::string& message)>;

class HttpTransport {
 public:
  /// error_body: how the transport's own answers look (default: text/plain with the message).
  HttpTransport(TransportConfig cfg, HttpHandler handler, ErrorBody error_body = {});
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  /// Binds and listens (backlog 4096); returns the bound port. Throws tritium::Error when the address is taken.
  int bind();
  /// Starts accepting on the I/O threads (call bind() first).
  void start();
  /// Closes the listening socket: new connections are refused, open ones go on.
  void stop_accepting();
  /// Closes every connection and joins the I/O threads. Idempotent.
  void stop();
  int port() const { return port_; }
  /// Connections open now.
  int connections() const;
  /// Open connections waiting for a request's first byte (the ones admission may replace at the cap).
  int idle_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

/// The outcome of parsing one request from bytes with the transport's parser and limits (tests, fuzzing).
struct ParsedHttpRequest {
  bool complete = false;  ///< a whole request was read
  int error_status = 0;   ///< 0, or the status the transport answers before closing (400, 413, 431)
  std::string error;      ///< the parser's message when error_status != 0
  HttpRequest request;
  size_t consumed = 0;    ///< bytes of `bytes` the request took (pipelined requests follow)
};
ParsedHttpRequest parse_http_request(std::string_view bytes, const TransportConfig& limits);

}  // namespace tritium::server
