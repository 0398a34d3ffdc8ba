// Internal to report/: the files embedded at build time (embed.cmake), each
// returned whole. Thread-safe.
#ifndef ANVIL_REPORT_EMBEDDED_H_
#define ANVIL_REPORT_EMBEDDED_H_

#include <string>

namespace anvil::report {

std::string ReportTemplate();  // report.html
std::string ReportScript();    // report.js: the charts and tables, from the data island
std::string PlotlyJs();        // vendor/plotly.min.js
std::string StatusTemplate();  // status.html: the live status page

}  // namespace anvil::report

#endif  // ANVIL_REPORT_EMBEDDED_H_
