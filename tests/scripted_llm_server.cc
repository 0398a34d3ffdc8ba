#include "tests/scripted_llm_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace anvil::testing {
namespace {

using nlohmann::json;

bool SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads one request (headers and a Content-Length body); false on EOF.
bool ReadRequest(int fd, ScriptedRequest& r) {
  std::string buf;
  char chunk[65536];
  size_t header_end = std::string::npos;
  size_t length = 0;
  while (true) {
    if (header_end == std::string::npos) {
      header_end = buf.find("\r\n\r\n");
      if (header_end != std::string::npos) {
        std::vector<std::string> lines = absl::StrSplit(buf.substr(0, header_end), "\r\n");
        std::vector<std::string> first = absl::StrSplit(lines[0], ' ');
        r.method = first[0];
        r.path = first.size() > 1 ? first[1] : "";
        for (size_t i = 1; i < lines.size(); ++i) {
          size_t colon = lines[i].find(':');
          if (colon == std::string::npos) continue;
          r.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
              std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
        }
        if (!absl::SimpleAtoi(r.headers["content-length"], &length)) length = 0;
      }
    }
    if (header_end != std::string::npos && buf.size() >= header_end + 4 + length) {
      r.body = buf.substr(header_end + 4, length);
      return true;
    }
    ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buf.append(chunk, static_cast<size_t>(n));
  }
}

std::string StatusLine(int status) {
  const char* text = status == 200 ? "OK" : status == 429 ? "Too Many Requests" : "Status";
  return absl::StrCat("HTTP/1.1 ", status, " ", text, "\r\n");
}

}  // namespace

ScriptedReply OpenAiReply(const std::vector<std::string>& texts, int prompt_tokens,
                          int completion_tokens) {
  json choices = json::array();
  for (size_t i = 0; i < texts.size(); ++i) {
    choices.push_back({{"index", i},
                       {"message", {{"role", "assistant"}, {"content", texts[i]}}},
                       {"finish_reason", "stop"}});
  }
  ScriptedReply r;
  r.headers["Content-Type"] = "application/json";
  r.body = json{{"id", "chatcmpl-test"}, {"object", "chat.completion"}, {"choices", choices},
                {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}}}}
               .dump();
  return r;
}

ScriptedReply OpenAiStream(const std::vector<std::string>& texts) {
  ScriptedReply r;
  r.headers["Content-Type"] = "text/event-stream";
  for (size_t i = 0; i < texts.size(); ++i) {
    for (size_t at = 0; at < texts[i].size(); at += 16) {
      r.events.push_back(json{{"choices",
                               {{{"index", i}, {"delta", {{"content", texts[i].substr(at, 16)}}}}}}}
                             .dump());
    }
    r.events.push_back(
        json{{"choices", {{{"index", i}, {"delta", json::object()}, {"finish_reason", "stop"}}}}}.dump());
  }
  r.events.push_back(json{{"choices", json::array()},
                          {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 9}}}}
                         .dump());
  r.events.push_back("[DONE]");
  return r;
}

ScriptedReply ErrorReply(int status, std::map<std::string, std::string> headers) {
  ScriptedReply r;
  r.status = status;
  r.headers = std::move(headers);
  r.headers["Content-Type"] = "application/json";
  r.body = json{{"error", {{"message", absl::StrCat("scripted ", status)}, {"type", "test"}}}}.dump();
  return r;
}

ScriptedLlmServer::ScriptedLlmServer(Handler handler) : handler_(std::move(handler)) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listen_fd_, 64) != 0) {
    std::abort();  // a test machine without loopback cannot run these tests
  }
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
      }
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      absl::MutexLock lock(&mu_);
      workers_.emplace_back([this, fd] { Serve(fd); });
    }
  });
}

ScriptedLlmServer::~ScriptedLlmServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  acceptor_.join();
  std::vector<std::thread> workers;
  {
    absl::MutexLock lock(&mu_);
    workers.swap(workers_);
  }
  for (std::thread& t : workers) t.join();
  close(listen_fd_);
}

std::string ScriptedLlmServer::base_url() const {
  return absl::StrCat("http://127.0.0.1:", port_, "/v1");
}

std::vector<ScriptedRequest> ScriptedLlmServer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

int ScriptedLlmServer::request_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(requests_.size());
}

int ScriptedLlmServer::max_concurrent() const {
  absl::MutexLock lock(&mu_);
  return max_in_flight_;
}

void ScriptedLlmServer::Serve(int fd) {
  ScriptedRequest request;
  if (!ReadRequest(fd, request)) {
    close(fd);
    return;
  }
  int index = 0;
  {
    absl::MutexLock lock(&mu_);
    index = static_cast<int>(requests_.size());
    requests_.push_back(request);
    max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
  }
  ScriptedReply reply = handler_(request, index);
  // Sleeps in slices so a stopping server does not wait out a long stall.
  auto wait = [this](absl::Duration d) {
    for (absl::Time end = absl::Now() + d; absl::Now() < end;) {
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return false;
      }
      absl::SleepFor(std::min(d, absl::Milliseconds(10)));
    }
    return true;
  };
  // A request stops counting as in flight before its last byte goes out: a
  // client may send its next request as soon as it has read a whole reply, and
  // must not be seen as over its concurrency limit for it.
  bool counted = true;
  auto done = [&] {
    if (!counted) return;
    counted = false;
    absl::MutexLock lock(&mu_);
    --in_flight_;
  };
  bool ok = wait(reply.delay) && !reply.drop;
  if (ok) {
    std::string head = StatusLine(reply.status);
    for (const auto& [k, v] : reply.headers) absl::StrAppend(&head, k, ": ", v, "\r\n");
    if (reply.events.empty()) {
      absl::StrAppend(&head, "Content-Length: ", reply.body.size(), "\r\nConnection: close\r\n\r\n");
      ok = SendAll(fd, head);
      done();
      ok = ok && SendAll(fd, reply.body);
    } else {
      absl::StrAppend(&head, "Connection: close\r\n\r\n");  // the body ends when we close
      ok = SendAll(fd, head);
      for (const std::string& e : reply.events) {
        if (!ok || !wait(reply.event_delay)) break;
        ok = SendAll(fd, absl::StrCat("data: ", e, "\n\n"));
      }
    }
  }
  done();
  shutdown(fd, SHUT_RDWR);
  close(fd);
}

}  // namespace anvil::testing
