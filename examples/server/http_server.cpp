#include "examples/server/http_server.h"

#include <chrono>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "examples/server/http_session.h"
#include "examples/server/http_shared.h"
#include "pagoda/error.h"

namespace pagoda::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpServer::Impl {
  Impl(std::shared_ptr<HttpShared> s, size_t threads) : shared(std::move(s)), io_threads(threads) {}

  void accept() {
    acceptor.async_accept(net::make_strand(io), [this](boost::system::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) {
        // Out of descriptors or memory: the pending connection waits in the backlog meanwhile.
        retry.expires_after(std::chrono::milliseconds(100));
        return retry.async_wait([this](boost::system::error_code e) {
          if (!e) accept();
        });
      }
      boost::system::error_code peer_ec;
      const tcp::endpoint peer = socket.remote_endpoint(peer_ec);
      ConnectionSlot slot = shared->caps.admit(peer_ec ? std::string() : peer.address().to_string());
      serve_connection(std::move(socket), std::move(slot), shared);
      accept();
    });
  }

  std::shared_ptr<HttpShared> shared;
  size_t io_threads;
  net::io_context io{int(io_threads)};
  tcp::acceptor acceptor{io};
  net::steady_timer retry{io};
  std::vector<std::thread> threads;
};

HttpServer::HttpServer(HttpLimits limits, Handler handler, Blocks blocks, size_t max_workers, size_t io_threads)
    : impl_(std::make_unique<Impl>(
          std::make_shared<HttpShared>(limits, std::move(handler), std::move(blocks), max_workers),
          io_threads == 0 ? 1 : io_threads)) {}

HttpServer::~HttpServer() { stop(false); }

int HttpServer::listen(const std::string& host, int port) {
  boost::system::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) throw Error("--host " + host + " is not an IP address");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  tcp::acceptor& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  // Bursts of connections (256 streams at once) wait in the backlog rather than being reset.
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw Error("cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  return a.local_endpoint().port();
}

void HttpServer::start() {
  impl_->accept();
  for (size_t i = 0; i < impl_->io_threads; ++i) impl_->threads.emplace_back([this] { impl_->io.run(); });
}

void HttpServer::begin_drain() { impl_->shared->draining.store(true); }

size_t HttpServer::in_flight() const { return impl_->shared->in_flight.load(); }

void HttpServer::stop(bool wait_workers) {
  if (impl_->threads.empty() && !impl_->acceptor.is_open()) return;
  impl_->io.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
  // No io thread runs now: the listener can be closed from here.
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  if (wait_workers) impl_->shared->pool.shutdown();
}

}  // namespace pagoda::server
