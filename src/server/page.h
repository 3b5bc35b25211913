// The page `klspec serve` answers GET / with: a prompt, the per-request judge knobs, and the streamed
// text with every token coloured by where it came from (accepted draft, relaxed by the judge, target).
// Static HTML and JavaScript compiled into the binary; no build step.
#pragma once

#include <string>
#include <string_view>

namespace klspec::server {

// The page, its judge list taken from judge_rules() and `default_rule` named as the server's default.
// Query parameters fill the form (prompt, judge, judge_threshold, ...); `run=1` submits it on load.
std::string page_html(std::string_view default_rule);

}  // namespace klspec::server
