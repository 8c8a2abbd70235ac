// report.html: one self-contained page (inline CSS and JS, figures as data: URIs, nothing
// fetched) per results folder or set of folders — the summary table (sortable; each ratio to
// the baseline coloured by Welch's test as `compare` runs it), the figures of figures/*.png,
// the manifest, and for several runs the comparison of every later run with the first.
#pragma once
#include <string>
#include <vector>

namespace inferlab {

// The page for `runs` (each a results folder with metrics.csv). `figures_note` is shown for a
// run without figures/ (e.g. why none could be drawn). Throws Error for a folder that is not one.
std::string html_report(const std::vector<std::string>& runs, const std::string& figures_note);

// Standard base64 (RFC 4648, padded).
std::string base64(const std::string& bytes);

}  // namespace inferlab
