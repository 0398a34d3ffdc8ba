#include "llm/http.h"

#include <curl/curl.h>

#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace anvil::llm {
namespace {

struct Transfer {
  HttpResponse* response;
  const std::function<bool(const char*, size_t)>* on_data;
  const std::function<bool()>* cancelled;
};

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  // Error bodies are kept whole: they explain the status.
  if (*t->on_data && t->response->status < 300) return (*t->on_data)(data, n) ? n : 0;
  t->response->body.append(data, n);
  return n;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  absl::string_view line(data, size * count);
  if (absl::StartsWith(line, "HTTP/")) {
    t->response->headers.clear();  // a new response (after 100 Continue or a redirect)
    long status = 0;
    absl::string_view rest = line.substr(line.find(' ') + 1);
    for (char c : rest.substr(0, 3)) status = status * 10 + (c - '0');
    t->response->status = status;
    return size * count;
  }
  size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    t->response->headers[name] = std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * count;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (*t->cancelled && (*t->cancelled)()) {
    t->response->cancelled = true;
    return 1;
  }
  return 0;
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

long Millis(absl::Duration d) { return static_cast<long>(absl::ToInt64Milliseconds(d)); }

}  // namespace

HttpResponse HttpPost(const std::string& url, const std::vector<std::string>& headers,
                      const std::string& body, const HttpLimits& limits,
                      const std::function<bool(const char*, size_t)>& on_data,
                      const std::function<bool()>& cancelled) {
  GlobalInit();
  HttpResponse response;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    response.transport_error = "curl_easy_init failed";
    return response;
  }
  curl_slist* list = nullptr;
  for (const std::string& h : headers) list = curl_slist_append(list, h.c_str());
  Transfer t{&response, &on_data, &cancelled};
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, Millis(limits.connect_timeout));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, Millis(limits.total_timeout));
  if (limits.idle_timeout > absl::ZeroDuration()) {
    // Fewer than 1 byte/s over the idle window aborts: a stream gone silent.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
                     std::max(1L, static_cast<long>(absl::ToInt64Seconds(limits.idle_timeout))));
  }
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");  // whatever curl can decode
  CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) {
    response.timed_out = rc == CURLE_OPERATION_TIMEDOUT;
    response.transport_error =
        absl::StrCat(curl_easy_strerror(rc), error[0] != 0 ? absl::StrCat(": ", error) : "");
    if (rc == CURLE_WRITE_ERROR && !response.cancelled) response.transport_error = "stream aborted";
  }
  curl_slist_free_all(list);
  curl_easy_cleanup(curl);
  return response;
}

}  // namespace anvil::llm
