#include "examples/server/http_session.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "examples/server/access_log.h"
#include "examples/server/api_error.h"

namespace pagoda::server {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = beast::error_code;

// How long a connection being closed waits for its client's side to end, so the client reads
// the last answer instead of a reset.
constexpr std::chrono::seconds kLingerTimeout(2);

HttpResponse error_response(const ApiError& e) {
  HttpResponse r = HttpResponse::json(e.status(), e.body().dump());
  r.close = true;
  return r;
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, ConnectionSlot slot, std::shared_ptr<HttpShared> shared)
      : stream_(std::move(socket)), slot_(std::move(slot)), shared_(std::move(shared)) {
    error_code ec;
    const tcp::endpoint peer = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = peer.address().to_string();
  }

  void start() {
    if (!slot_) {
      request_ = HttpRequest{.method = "-", .path = "-", .remote_addr = remote_};  // unread: the log says so
      ++shared_->in_flight;
      return send(error_response(ApiError(503,
                                          "too many connections: the server is at --max-connections or "
                                          "--max-connections-per-ip",
                                          "server_error", "service_unavailable")));
    }
    read_request(true);
  }

 private:
  friend class ChunkedStream;

  const HttpLimits& limits() const { return shared_->limits; }

  void read_request(bool first) {
    head_only_ = false;
    parser_.emplace();
    parser_->header_limit(uint32_t(limits().max_header));
    parser_->body_limit(limits().max_body);
    if (first || buffer_.size() > 0) return read_header();
    // Kept alive: the idle timeout runs until the next request's first byte, then its head's.
    stream_.expires_after(limits().idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  void read_header() {
    stream_.expires_after(limits().header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(error_code ec) {
    if (ec) return refuse_unread(ec);
    const auto& head = parser_->get();
    if (const auto length = parser_->content_length(); length && *length > limits().max_body) {
      return refuse_unread(http::error::body_limit);
    }
    if (beast::iequals(head[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(limits().body_timeout);
      return net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](error_code ec, size_t) {
        if (ec) return self->close();
        self->read_body(false);
      });
    }
    read_body(true);
  }

  void read_body(bool set_deadline) {
    if (set_deadline) stream_.expires_after(limits().body_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->refuse_unread(ec);
      self->dispatch();
    });
  }

  // A request that could not be read whole: answered when the client may still listen, else
  // the connection just closes (a deadline passed: the stream is already closed).
  void refuse_unread(error_code ec) {
    if (ec == http::error::end_of_stream || ec == http::error::partial_message || ec == net::error::eof ||
        ec == beast::error::timeout || ec == net::error::connection_reset || ec == net::error::operation_aborted) {
      return close();
    }
    request_ = HttpRequest{.method = "-", .path = "-", .remote_addr = remote_};
    if (parser_->is_header_done()) {
      request_->method = std::string(parser_->get().method_string());
      request_->path = std::string(parser_->get().target());
    }
    ++shared_->in_flight;
    if (ec == http::error::body_limit) {
      return send(error_response(ApiError(
          413, "the request body is larger than --max-body (" + std::to_string(limits().max_body) + " bytes)")));
    }
    if (ec == http::error::header_limit) return send(error_response(ApiError(431, "the request head is too large")));
    send(error_response(ApiError(400, "malformed HTTP request: " + ec.message())));
  }

  void dispatch() {
    stream_.expires_never();
    auto& msg = parser_->get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    // HEAD is answered as GET without the body (load balancers' and curl -I's probes).
    head_only_ = msg.method() == http::verb::head;
    if (head_only_) req.method = "GET";
    const std::string_view target(msg.target().data(), msg.target().size());
    req.path = std::string(target.substr(0, target.find('?')));
    req.remote_addr = remote_;
    for (const auto& field : msg)
      req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    req.body = std::move(msg.body());
    keep_alive_ = msg.keep_alive();
    request_ = std::move(req);
    ++shared_->in_flight;
    if (!shared_->blocks(*request_)) return send(call_handler());
    request_->client_gone = [this] { return gone_.load(); };  // the worker holds the session
    if (!shared_->pool.enqueue([self = shared_from_this()] { self->on_worker(); })) {
      return send(
          error_response(ApiError(503, "no worker thread could be started", "server_error", "service_unavailable")));
    }
    watch_for_hangup();
  }

  HttpResponse call_handler() {
    try {
      return shared_->handler(*request_);
    } catch (const std::exception& e) {
      return error_response(ApiError(500, e.what(), "server_error"));
    }
  }

  // Notices a client that closes its side while its request runs: a readable socket with
  // nothing to read. Bytes instead (a pipelined request) end the watch; they wait in the socket.
  void watch_for_hangup() {
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      if (ec) return;
      char byte;
      const ssize_t n = ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        self->gone_.store(true);
      } else if (n < 0) {
        self->watch_for_hangup();
      }
    });
  }

  void on_worker();

  // Writes `bytes` from a worker thread and waits for it, up to the write deadline.
  bool write_from_worker(std::string bytes) {
    if (gone_.load()) return false;
    auto done = std::make_shared<std::promise<bool>>();
    std::future<bool> written = done->get_future();
    auto data = std::make_shared<std::string>(std::move(bytes));
    net::post(stream_.get_executor(), [self = shared_from_this(), data, done] {
      self->stream_.expires_after(self->limits().write_timeout);
      net::async_write(self->stream_, net::buffer(*data), [self, data, done](error_code ec, size_t) {
        if (ec) self->gone_.store(true);
        done->set_value(!ec);
      });
    });
    // The write deadline closes the stream, which ends the write; the margin covers an io
    // thread that is stopped and will never run it.
    if (written.wait_for(limits().write_timeout + std::chrono::seconds(2)) != std::future_status::ready) {
      gone_.store(true);
      return false;
    }
    try {
      return written.get();
    } catch (const std::future_error&) {  // the io context was stopped with the write queued
      gone_.store(true);
      return false;
    }
  }

  bool keep_alive(const HttpResponse& res) const { return keep_alive_ && !res.close && !shared_->draining.load(); }

  template <class Message>
  void set_headers(Message& msg, const HttpResponse& res, bool keep) const {
    msg.result(unsigned(res.status));
    msg.set(http::field::server, "pagoda-server");
    msg.set(http::field::content_type, res.content_type);
    for (const auto& [name, value] : res.headers) msg.set(name, value);
    msg.keep_alive(keep);
  }

  // Answers with a whole body (on the session's strand).
  void send(HttpResponse res) {
    const bool keep = keep_alive(res);
    auto msg = std::make_shared<http::response<http::string_body>>();
    msg->version(11);
    set_headers(*msg, res, keep);
    msg->body() = std::move(res.body);
    msg->prepare_payload();
    stream_.expires_after(limits().write_timeout);
    if (head_only_) {  // the GET's head, its Content-Length included, without the body
      auto head = std::make_shared<http::response_serializer<http::string_body>>(*msg);
      return http::async_write_header(stream_, *head,
                                      [self = shared_from_this(), msg, head, keep](error_code ec, size_t) {
                                        self->finish(msg->result_int(), 0, keep && !ec);
                                      });
    }
    http::async_write(stream_, *msg, [self = shared_from_this(), msg, keep](error_code ec, size_t) {
      self->finish(msg->result_int(), msg->body().size(), keep && !ec);
    });
  }

  void finish(unsigned status, size_t bytes, bool keep) {
    if (head_only_) request_->method = "HEAD";  // as the client sent it, for the log
    log_access(*request_, int(status), bytes);
    request_.reset();
    --shared_->in_flight;
    error_code ignored;
    stream_.socket().cancel(ignored);  // the hang-up watch, if any
    if (keep) return read_request(false);
    close();
  }

  // Half-closes and reads until the client closes too (or the linger timeout), so it reads
  // the last answer rather than a reset from unread bytes.
  void close() {
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTimeout);
    linger();
  }

  void linger() {
    stream_.async_read_some(linger_buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t) {
      self->linger_buffer_.clear();
      if (!ec) self->linger();
    });
  }

  beast::tcp_stream stream_;
  ConnectionSlot slot_;
  std::shared_ptr<HttpShared> shared_;
  std::string remote_;
  beast::flat_buffer buffer_;
  beast::flat_buffer linger_buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<HttpRequest> request_;  // the one being answered
  bool keep_alive_ = false;
  bool head_only_ = false;         // the request being answered is a HEAD
  std::atomic<bool> gone_{false};  // the client hung up, or a write to it failed
};

// A streamed body in HTTP/1.1 chunks, written from the worker that runs the stream.
class ChunkedStream : public ResponseStream {
 public:
  explicit ChunkedStream(Session& session) : session_(session) {}
  bool write(std::string_view bytes) override {
    if (bytes.empty()) return !client_gone();
    char size[32];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
    std::string chunk;
    chunk.reserve(size_t(n) + bytes.size() + 2);
    chunk.append(size, size_t(n)).append(bytes).append("\r\n");
    sent_ += bytes.size();
    return session_.write_from_worker(std::move(chunk));
  }
  bool client_gone() const override { return session_.gone_.load(); }
  size_t sent() const { return sent_; }

 private:
  Session& session_;
  size_t sent_ = 0;
};

void Session::on_worker() {
  if (gone_.load()) {  // hung up while waiting for a worker: nothing to compute, no one to answer
    return net::post(stream_.get_executor(), [self = shared_from_this()] { self->finish(499, 0, false); });
  }
  HttpResponse res = call_handler();
  if (!res.stream) {
    return net::post(stream_.get_executor(),
                     [self = shared_from_this(), res = std::move(res)]() mutable { self->send(std::move(res)); });
  }
  const bool keep = keep_alive(res);
  http::response<http::empty_body> head;
  head.version(11);
  set_headers(head, res, keep);
  head.chunked(true);
  std::ostringstream out;
  out << head.base();
  ChunkedStream body(*this);
  bool ok = write_from_worker(out.str());
  try {
    res.stream(body);  // with the client gone, it sees so at once and cancels its work
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pagoda-server: a stream to %s failed: %s\n", remote_.c_str(), e.what());
    ok = false;  // no last chunk: the client sees the stream cut, not ended
  }
  ok = ok && !gone_.load() && write_from_worker("0\r\n\r\n");
  net::post(stream_.get_executor(), [self = shared_from_this(), status = res.status, bytes = body.sent(),
                                     keep = keep && ok] { self->finish(unsigned(status), bytes, keep); });
}

}  // namespace

void serve_connection(tcp::socket socket, ConnectionSlot slot, std::shared_ptr<HttpShared> shared) {
  std::make_shared<Session>(std::move(socket), std::move(slot), std::move(shared))->start();
}

}  // namespace pagoda::server
