// ScriptedLlmServer: a test double for LLM endpoints. A real HTTP/1.1 server
// on a loopback port that answers each POST with what the test's script
// says: a status, headers and body, a server-sent event stream, a stall, or
// a dropped connection. It records every request for assertions.
// Thread-safe; each connection is served on its own thread.
#ifndef ANVIL_TESTS_SCRIPTED_LLM_SERVER_H_
#define ANVIL_TESTS_SCRIPTED_LLM_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace anvil::testing {

struct ScriptedRequest {
  std::string method, path;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

struct ScriptedReply {
  int status = 200;
  std::map<std::string, std::string> headers;
  std::string body;                  // sent whole (Content-Length)...
  std::vector<std::string> events;   // ...or, when non-empty, as SSE "data: <e>\n\n" events
  absl::Duration delay = absl::ZeroDuration();        // before the status line
  absl::Duration event_delay = absl::ZeroDuration();  // between events
  bool drop = false;                 // close the connection without answering
};

// Builders for common replies.
// An OpenAI chat.completion with one choice per text, usage as given.
ScriptedReply OpenAiReply(const std::vector<std::string>& texts, int prompt_tokens = 10,
                          int completion_tokens = 20);
// The same as a chunked SSE stream (one chunk per ~16 characters, then usage, [DONE]).
ScriptedReply OpenAiStream(const std::vector<std::string>& texts);
// An error status with an OpenAI-style error body and extra headers.
ScriptedReply ErrorReply(int status, std::map<std::string, std::string> headers = {});

class ScriptedLlmServer {
 public:
  using Handler = std::function<ScriptedReply(const ScriptedRequest&, int index)>;
  // Starts listening on 127.0.0.1 at a free port. `handler` answers the
  // index-th request (0-based, in arrival order).
  explicit ScriptedLlmServer(Handler handler);
  ~ScriptedLlmServer();

  int port() const { return port_; }
  std::string base_url() const;  // "http://127.0.0.1:<port>/v1"
  std::vector<ScriptedRequest> requests() const;
  int request_count() const;
  int max_concurrent() const;  // most requests in flight at once

 private:
  void Serve(int fd);
  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  mutable absl::Mutex mu_;
  std::vector<ScriptedRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace anvil::testing

#endif  // ANVIL_TESTS_SCRIPTED_LLM_SERVER_H_
