// tritium server: the HTTP request / response types between the transport (http_transport, Boost.Beast) and
// the API routes (openai_server). They hold no library types, so the OpenAI code does not depend on the HTTP
// library.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tritium::server {

/// One parsed HTTP/1.1 request. Header names are lower-case; the body is complete (Content-Length or chunked,
/// decoded by the transport).
struct HttpRequest {
  std::string method;  ///< "GET", "POST", ...
  std::string target;  ///< as sent: path and query
  std::string path;    ///< target up to '?'
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  /// The first value of header `name` (lower-case), or "".
  std::string header(std::string_view name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return v;
    return {};
  }
};

/// A complete response, or the head of a streamed one (status, headers; the body then follows in chunks).
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

/// The answering side of one request. Every method may be called from any thread; calls are applied in order
/// on the connection's strand. A request is answered by exactly one respond(), or by start_stream(), any number
/// of send_chunk() and one end_stream().
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void respond(HttpResponse r) = 0;
  /// Sends the head of a chunked (Transfer-Encoding: chunked) response; the head's body is ignored.
  virtual void start_stream(HttpResponse head) = 0;
  virtual void send_chunk(std::string data) = 0;
  virtual void end_stream() = 0;
  /// Runs fn on the connection's strand (serialised with the transport's own work for this connection).
  virtual void post(std::function<void()> fn) = 0;
  /// fn runs once, on the strand, when the client goes away (EOF, reset, or a write that failed or timed
  /// out) before the response is complete. It is not called after the response has been written.
  virtual void on_disconnect(std::function<void()> fn) = 0;
  /// Keeps `state` alive until the response is complete or the connection is gone.
  virtual void hold(std::shared_ptr<void> state) = 0;
};

/// Called on a transport thread for every request; it must not block (answer now, or keep the Responder and
/// answer later from any thread).
using HttpHandler = std::function<void(HttpRequest req, std::shared_ptr<Responder> res)>;

}  // namespace tritium::server
