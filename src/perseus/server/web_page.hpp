// The server's status page: one self-contained HTML document (inline CSS, JS and SVG, no
// network beyond polling this server's /api/jobs) showing every job, its frontier with the
// current point, the current plan's per-stage timeline and its stragglers.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace perseus::server {

// The page with `initial` (the /api/jobs answer) embedded, so it draws without a fetch.
std::string web_page_html(const nlohmann::json& initial);

}  // namespace perseus::server
