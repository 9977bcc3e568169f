# pstrain_web_assets: the dashboard's static files and the vendored uPlot,
# turned into byte arrays in a generated .cc at build time (see
# embed_assets.cmake), so every binary serves them without network or
# files next to it. Included from server/coordinator/CMakeLists.txt.
set(_web_assets
  ${CMAKE_SOURCE_DIR}/third_party/uplot/uPlot.iife.min.js
  ${CMAKE_SOURCE_DIR}/third_party/uplot/uPlot.min.css
  ${CMAKE_CURRENT_LIST_DIR}/assets/dashboard.html
  ${CMAKE_CURRENT_LIST_DIR}/assets/dashboard.js
  ${CMAKE_CURRENT_LIST_DIR}/assets/dashboard.css
  ${CMAKE_CURRENT_LIST_DIR}/assets/charts.js
  ${CMAKE_CURRENT_LIST_DIR}/assets/plot.html
  ${CMAKE_CURRENT_LIST_DIR}/assets/plot.js)
set(_web_assets_cc ${CMAKE_CURRENT_BINARY_DIR}/web_assets_data.cc)
string(REPLACE ";" "|" _web_assets_arg "${_web_assets}")
add_custom_command(
  OUTPUT ${_web_assets_cc}
  COMMAND ${CMAKE_COMMAND} "-DINPUTS=${_web_assets_arg}" -DOUTPUT=${_web_assets_cc}
          -P ${CMAKE_CURRENT_LIST_DIR}/embed_assets.cmake
  DEPENDS ${_web_assets} ${CMAKE_CURRENT_LIST_DIR}/embed_assets.cmake
  COMMENT "Embedding the dashboard's web assets"
  VERBATIM)
add_library(pstrain_web_assets STATIC ${_web_assets_cc})
