// --set overrides of an experiment file (internal to experiment.cpp).
#pragma once
#include <string>

#include "inferlab/experiment/tomlpp.h"

namespace inferlab {

// The source path given to values parsed from a --set: Ctx::at reports them as "(--set)".
inline constexpr const char* kOverrideSource = "(--set)";

// Parses "a.b.c=value" (parts may be quoted: sweep."kv.block_size"=[1,2]) and stores it into
// root, creating tables on the way. A string plugin choice on the path (scheduler = "static")
// becomes { name = "static" } so that baseline.scheduler.max_batch=4 works. An index into an
// array of tables (variant.0.attention) must name an existing entry.
void apply_override(toml::table& root, const std::string& text);

}  // namespace inferlab
