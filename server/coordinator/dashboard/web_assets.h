// Static files of the dashboard and of `pstrain plot`, embedded in the
// binary at build time (server/coordinator/dashboard/web_assets.cmake), so that pages
// work with no network: the page itself, its script and style, and the
// vendored uPlot chart library (third_party/uplot, MIT license).
#pragma once

#include <string_view>

namespace pstrain::web {

// The file `name` (e.g. "uPlot.iife.min.js", "dashboard.js"), or an empty
// view when there is none.
std::string_view Asset(std::string_view name);

}  // namespace pstrain::web
