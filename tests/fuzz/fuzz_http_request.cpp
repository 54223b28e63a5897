// libFuzzer target: the HTTP/1.1 request parser of the transport (server/http_transport.h parse_http_request,
// Boost.Beast's parser with the server's header and body limits) on arbitrary bytes, then every pipelined
// request after the first. Checks the parser's own contract: an error always carries a status the server
// answers, a complete request consumed at least one byte and no more than given, and a body within the limit.
// Seeds: tests/fuzz/http_request/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/http_transport.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tritium::server::TransportConfig lim;
  lim.max_header_bytes = 4096;
  lim.max_body_bytes = 8192;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int i = 0; i < 16 && !rest.empty(); ++i) {
    const auto p = tritium::server::parse_http_request(rest, lim);
    if (p.error_status != 0) {
      if (p.error_status != 400 && p.error_status != 413 && p.error_status != 431) std::abort();
      break;
    }
    if (!p.complete) break;
    if (p.consumed == 0 || p.consumed > rest.size()) std::abort();
    if (p.request.body.size() > lim.max_body_bytes) std::abort();
    (void)p.request.header("content-type");
    rest.remove_prefix(p.consumed);
  }
  return 0;
}
