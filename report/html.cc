// The report page: the template with the model, the chart code and plotly.js
// inlined, so the file needs nothing but a browser.
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "report/embedded.h"
#include "report/report.h"

namespace anvil::report {

std::string ScriptSafeJson(const nlohmann::json& value) {
  // Inside <script>, "</" could end the element and "<!--" open a comment;
  // JSON allows "\/" and "\u003c" in strings, and they occur only in strings.
  return absl::StrReplaceAll(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                             {{"</", "<\\/"}, {"<!--", "\\u003c!--"}});
}

// Script text safe inside an HTML document: control characters are parse
// errors in HTML (plotly.min.js has two, inside string literals, where the
// JavaScript escape \xHH means the same character).
namespace {

std::string HtmlSafeScript(const std::string& js) {
  std::string out;
  out.reserve(js.size());
  for (char c : js) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f') || u == 0x7f) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", u));
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string RenderReportHtml(const nlohmann::json& model) {
  std::string page = ReportTemplate();
  // Replaced one at a time, data last: no inlined text is scanned for markers again.
  page = absl::StrReplaceAll(page, {{"<!--ANVIL:PLOTLY-->", absl::StrCat("<script>", HtmlSafeScript(PlotlyJs()), "</script>")}});
  page = absl::StrReplaceAll(page, {{"<!--ANVIL:SCRIPT-->", absl::StrCat("<script>", ReportScript(), "</script>")}});
  page = absl::StrReplaceAll(
      page, {{"<!--ANVIL:DATA-->",
              absl::StrCat("<script type=\"application/json\" id=\"anvil-data\">",
                           ScriptSafeJson(model), "</script>")}});
  return page;
}

absl::Status WriteReport(Store& store, const ReportOptions& options, const std::string& path) {
  absl::StatusOr<nlohmann::json> model = BuildReportModel(store, options);
  if (!model.ok()) return model.status();
  const std::string html = RenderReportHtml(*model);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", tmp));
    out.write(html.data(), static_cast<std::streamsize>(html.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return absl::ResourceExhaustedError(absl::StrCat("cannot write the report to ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(absl::StrCat("cannot move the report to ", path));
  }
  return absl::OkStatus();
}

}  // namespace anvil::report
