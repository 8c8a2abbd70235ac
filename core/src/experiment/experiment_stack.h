// The strategy stack of [baseline], a [[variant]] and a [sweep] point (internal to
// core/src/experiment*.cpp): plugin choices with their parameters, the [kv] table, and the
// variants a [sweep] grid expands to.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "inferlab/experiment/tomlpp.h"

#include "experiment/experiment_parse.h"
#include "inferlab/experiment/experiment.h"

namespace inferlab {

// `key` (attention, quantization, scheduler, decoding or kv) of a stack table set to `v`:
// a plugin choice (`"flash"` or `{ name = "flash", tile = 32 }`; a quantization's rules too)
// or the [kv] table. Throws Error at the value's file:line.
void apply_stack_key(const experiment_parse::Ctx& c, Stack& s, const std::string& key, const toml::node& v);

// The [sweep] table `sweep`: one variant per point of the grid of its axes (at most
// kMaxSweepPoints), each `base` with the point's values applied and named "key=value,...",
// appended to `variants`. Throws Error for an empty axis, a bad key or value, a grid too large
// or a name already in `names` (which gains the new ones).
void add_sweep_variants(const experiment_parse::Ctx& c, const toml::node& sweep, const Stack& base,
                        std::set<std::string>& names, std::vector<Variant>& variants);

}  // namespace inferlab
