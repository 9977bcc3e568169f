#include "launcher/plan_memory.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/optim/optimizer.h"
#include "common/status.h"
#include "server/ps/kv_store.h"
#include "server/ps/tables/row_footprint.h"

namespace pstrain::launcher {
namespace {

constexpr double kKiB = 1024.0;

// "1.40 GiB", "610.4 MiB", "512 B".
std::string Bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= kKiB && u < 5) {
    b /= kKiB;
    ++u;
  }
  if (u == 0) return absl::StrFormat("%.0f B", b);
  return absl::StrFormat(b >= 100 ? "%.0f %s" : b >= 10 ? "%.1f %s" : "%.2f %s", b, units[u]);
}

// "10,000,000".
std::string Count(uint64_t n) {
  std::string digits = absl::StrCat(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The field part of a sparse table's name: "carrier" of "emb.carrier",
// "C3" of "emb.C3" (worker::SparseFieldName).
std::string FieldOf(const std::string& name) {
  const size_t dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

}  // namespace

absl::StatusOr<uint64_t> ParseRowCount(const std::string& flag, const std::string& text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  double scale = 1;
  if (!t.empty()) {
    const std::string suffixes = "kmgt";
    if (size_t p = suffixes.find(t.back()); p != std::string::npos) {
      scale = std::pow(1000.0, static_cast<double>(p + 1));
      t.pop_back();
    }
  }
  double v = 0;
  if (!absl::SimpleAtod(t, &v) || !(v >= 1) || v * scale >= 9e18) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, "=", text, ": expected a count of rows like 50000000, 50M or 5e7"));
  }
  return static_cast<uint64_t>(std::llround(v * scale));
}

absl::StatusOr<TableRows> RowsOfTable(const TableSpec& table,
                                      const std::map<std::string, uint64_t>& field_buckets,
                                      uint64_t expected) {
  TableRows r;
  if (auto it = field_buckets.find(FieldOf(table.name)); it != field_buckets.end() && it->second > 0) {
    r = {it->second, "hash_buckets"};
  }
  const uint64_t max_rows = table.eviction.max_rows;
  if (max_rows > 0 && (r.rows == 0 || max_rows < r.rows)) r = {max_rows, "max_rows"};
  if (expected > 0 && (r.rows == 0 || expected < r.rows)) r = {expected, "--rows"};
  if (r.rows == 0) {
    return absl::NotFoundError(absl::StrCat(
        "table ", table.name, " has unbounded ids (no --hash_buckets, no --max_rows): give "
        "--rows=N, the distinct ids you expect in each such table"));
  }
  return r;
}

absl::StatusOr<MemoryPlan> PlanServerMemory(const std::vector<TableSpec>& tables,
                                            const std::vector<TableRows>& rows,
                                            double server_memory, double headroom) {
  if (!(server_memory > 0) || !(headroom >= 0 && headroom < 1)) {
    return absl::InvalidArgumentError("--server_memory must be > 0 and --server_headroom in [0, 1)");
  }
  MemoryPlan plan;
  plan.server_memory = server_memory;
  plan.headroom = headroom;
  plan.fixed_per_server = static_cast<double>(server::KvStore::kProcessBytes);
  std::vector<TableSizing> dense;
  for (size_t i = 0; i < tables.size(); ++i) {
    const TableSpec& t = tables[i];
    TableSizing s;
    s.name = t.name;
    s.optimizer = optim::OptimizerKindName(t.optimizer.kind);
    if (t.kind == TableKind::kSparse) {
      if (i >= rows.size() || rows[i].rows == 0) {
        return absl::InvalidArgumentError(absl::StrCat("no rows for table ", t.name));
      }
      const bool tiered = t.eviction.enabled();
      PS_ASSIGN_OR_RETURN(server::RowFootprint f, server::RowFootprintOf(t, tiered));
      const double n = static_cast<double>(rows[i].rows);
      s.rows = rows[i].rows;
      s.rows_from = rows[i].from;
      s.width = t.dim;
      s.dtype = RowDtypeName(t.dtype);
      s.value_bytes = n * f.value_bytes;
      s.state_bytes = n * f.state_bytes;
      s.overhead_bytes = n * (f.meta_bytes + f.slack_bytes + f.index_bytes);
      plan.fixed_per_server += server::kShardFixedBytes;
      plan.tables.push_back(std::move(s));
    } else {
      if (t.on_workers) continue;  // allreduce mode: not on the servers
      PS_ASSIGN_OR_RETURN(std::unique_ptr<optim::Optimizer> opt,
                          optim::Optimizer::Create(t.optimizer));
      s.sparse = false;
      s.rows = 1;
      s.width = t.size;
      s.dtype = "fp32";
      s.value_bytes = 4.0 * static_cast<double>(t.size);
      s.state_bytes = 4.0 * static_cast<double>(opt->StateFloats(t.size));
      dense.push_back(std::move(s));
    }
  }
  plan.tables.insert(plan.tables.end(), dense.begin(), dense.end());
  for (const TableSizing& s : plan.tables) {
    plan.value_bytes += s.value_bytes;
    plan.state_bytes += s.state_bytes;
    plan.overhead_bytes += s.overhead_bytes;
  }
  const double usable = (1 - headroom) * server_memory;
  if (usable <= plan.fixed_per_server) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--server_memory=", Bytes(server_memory), " less ", std::lround(headroom * 100),
        " % headroom leaves ", Bytes(usable), ", not more than what a server holds beside its "
        "share of the tables (", Bytes(plan.fixed_per_server), ": the process and ",
        Bytes(server::kShardFixedBytes), " for each sparse table)"));
  }
  plan.servers = std::max(1, static_cast<int>(std::ceil(plan.total() / (usable - plan.fixed_per_server))));
  plan.per_server = plan.total() / plan.servers + plan.fixed_per_server;
  return plan;
}

std::string MemoryPlanText(const MemoryPlan& plan, const std::string& model) {
  std::string out = absl::StrFormat(
      "Server memory of %s:\n%-14s %14s %-12s %6s %-5s %-15s %8s | %10s %10s %10s | %10s\n",
      model, "table", "rows", "rows from", "dim", "dtype", "optimizer", "B/row", "values",
      "opt state", "overhead", "total");
  TableSizing dense;
  int dense_tables = 0;
  for (const TableSizing& s : plan.tables) {
    if (!s.sparse) {
      ++dense_tables;
      dense.width += s.width;
      dense.value_bytes += s.value_bytes;
      dense.state_bytes += s.state_bytes;
      dense.optimizer = s.optimizer;
      continue;
    }
    absl::StrAppendFormat(&out, "%-14s %14s %-12s %6d %-5s %-15s %8.1f | %10s %10s %10s | %10s\n",
                          s.name, Count(s.rows), s.rows_from, s.width, s.dtype, s.optimizer,
                          s.bytes_per_row(), Bytes(s.value_bytes), Bytes(s.state_bytes),
                          Bytes(s.overhead_bytes), Bytes(s.total()));
  }
  if (dense_tables > 0) {
    absl::StrAppendFormat(&out, "%-14s %14s %-12s %6s %-5s %-15s %8s | %10s %10s %10s | %10s\n",
                          absl::StrCat("dense (", dense_tables, ")"), Count(dense.width) + " floats",
                          "", "", "fp32", dense.optimizer, "", Bytes(dense.value_bytes),
                          Bytes(dense.state_bytes), "", Bytes(dense.total()));
  }
  absl::StrAppendFormat(&out, "%-14s %14s %-12s %6s %-5s %-15s %8s | %10s %10s %10s | %10s\n",
                        "total", "", "", "", "", "", "", Bytes(plan.value_bytes),
                        Bytes(plan.state_bytes), Bytes(plan.overhead_bytes), Bytes(plan.total()));
  absl::StrAppendFormat(
      &out,
      "\nservers of %s, %.0f %% kept free (%s usable): %d, each holding %s of tables (1/%d) + "
      "%s (the process %s, %s a sparse table's shard) = %s\n",
      Bytes(plan.server_memory), plan.headroom * 100,
      Bytes((1 - plan.headroom) * plan.server_memory), plan.servers,
      Bytes(plan.total() / plan.servers), plan.servers, Bytes(plan.fixed_per_server),
      Bytes(static_cast<double>(server::KvStore::kProcessBytes)), Bytes(server::kShardFixedBytes),
      Bytes(plan.per_server));
  absl::StrAppend(
      &out,
      "B/row: a row's values + optimizer state + overhead (its index slot at the index's lowest "
      "load, 22.5 B; the 2 MiB chunks' slack; eviction's clock and count), as a table lays it "
      "out (server/ps/tables/row_footprint.h). The headroom (--server_headroom) is for an index "
      "growing (15 B a row of the table while its old array lives), requests in flight and the "
      "allocator. The model: launcher/plan_memory.h.\n");
  return out;
}

std::string MemoryPlanJson(const MemoryPlan& plan, const std::string& model) {
  nlohmann::json tables = nlohmann::json::array();
  for (const TableSizing& s : plan.tables) {
    nlohmann::json t = {{"name", s.name},           {"kind", s.sparse ? "sparse" : "dense"},
                        {"optimizer", s.optimizer}, {"dtype", s.dtype},
                        {"value_bytes", s.value_bytes}, {"state_bytes", s.state_bytes},
                        {"overhead_bytes", s.overhead_bytes}, {"total_bytes", s.total()}};
    if (s.sparse) {
      t["rows"] = s.rows;
      t["rows_from"] = s.rows_from;
      t["dim"] = s.width;
      t["bytes_per_row"] = s.bytes_per_row();
    } else {
      t["floats"] = s.width;
    }
    tables.push_back(std::move(t));
  }
  nlohmann::json j = {{"plan", "memory"},
                      {"model", model},
                      {"tables", std::move(tables)},
                      {"value_bytes", plan.value_bytes},
                      {"state_bytes", plan.state_bytes},
                      {"overhead_bytes", plan.overhead_bytes},
                      {"total_bytes", plan.total()},
                      {"server_memory_bytes", plan.server_memory},
                      {"headroom", plan.headroom},
                      {"fixed_bytes_per_server", plan.fixed_per_server},
                      {"servers", plan.servers},
                      {"bytes_per_server", plan.per_server}};
  return j.dump();
}

}  // namespace pstrain::launcher
