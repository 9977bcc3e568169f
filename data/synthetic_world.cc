#include "data/synthetic_world.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status.h"
#include "data/delimited_parser.h"

namespace pstrain::worker {
namespace {

constexpr int kPilotRows = 20000;
constexpr int64_t kPilotFirstRow = int64_t{1} << 62;  // far from any real row
constexpr int64_t kMaxDenseValue = 1000000000000LL;
constexpr char kHex[] = "0123456789abcdef";

// Counter-based random stream of one row.
struct RowRng {
  uint64_t state;
  uint64_t Next() { return Mix64(state += 0x9e3779b97f4a7c15ULL); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
};

// Fixed shape numbers of field/feature `i` (independent of the seed).
double ShapeUniform(uint64_t tag, int i, int k) {
  return UnitFloat(Mix64(Mix64(tag + static_cast<uint64_t>(i)) + static_cast<uint64_t>(k)));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

absl::Status ValidateSyntheticOptions(const SyntheticOptions& o) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic options: ", parts...));
  };
  if (o.rows < 0) return bad("rows ", o.rows, " < 0");
  if (o.first_row < 0) return bad("first_row ", o.first_row, " < 0");
  if (o.num_dense < 0 || o.num_dense > 4096 || o.num_sparse < 0 || o.num_sparse > 4096) {
    return bad("num_dense/num_sparse outside [0, 4096]");
  }
  if (!(o.zipf > 0 && o.zipf < 10)) return bad("zipf ", o.zipf, " outside (0, 10)");
  if (o.min_vocab < 1 || o.min_vocab > o.max_vocab) {
    return bad("need 1 <= min_vocab <= max_vocab, got ", o.min_vocab, ", ", o.max_vocab);
  }
  if (!(o.missing_token_rate >= 0 && o.missing_token_rate <= 0.45) ||
      !(o.missing_dense_rate >= 0 && o.missing_dense_rate <= 0.45)) {
    return bad("missing rates must lie in [0, 0.45]");
  }
  if (!(o.drift >= 0 && o.drift <= 1)) return bad("drift ", o.drift, " outside [0, 1]");
  if (o.era < 0) return bad("era ", o.era, " < 0");
  if (!(o.new_id_rate >= 0 && o.new_id_rate <= 1)) {
    return bad("new_id_rate ", o.new_id_rate, " outside [0, 1]");
  }
  if (!(o.target_positive_rate > 0 && o.target_positive_rate < 1)) {
    return bad("target_positive_rate ", o.target_positive_rate, " outside (0, 1)");
  }
  const TeacherOptions& t = o.teacher;
  if (!(t.signal_std >= 0 && t.signal_std <= 20)) return bad("signal_std outside [0, 20]");
  if (t.latent_pairs < 0 || t.conjunction_pairs < 0 || t.dense_cat_pairs < 0 ||
      t.dense_units < 0 || t.latent_dim < 1 || t.latent_pairs > 1000 ||
      t.conjunction_pairs > 1000 || t.dense_cat_pairs > 1000 || t.dense_units > 1000 ||
      t.latent_dim > 256) {
    return bad("teacher part counts outside their ranges");
  }
  if (t.main_share < 0 || t.dense_share < 0 || t.latent_share < 0 || t.conjunction_share < 0 ||
      t.dense_cat_share < 0) {
    return bad("negative teacher share");
  }
  return absl::OkStatus();
}

SyntheticWorld::SyntheticWorld(const SyntheticOptions& options) : options_(options) {
  const int ns = options.num_sparse;
  // Vocabulary sizes spread log-uniformly over [min_vocab, max_vocab], in a
  // fixed scrambled field order.
  std::vector<int> order(ns);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [](int a, int b) {
    return Mix64(0x564f434142ULL + a) < Mix64(0x564f434142ULL + b);
  });
  fields_.resize(ns);
  const double log_min = std::log(static_cast<double>(options.min_vocab));
  const double log_max = std::log(static_cast<double>(options.max_vocab));
  for (int rank = 0; rank < ns; ++rank) {
    const int f = order[rank];
    const double t = ns > 1 ? static_cast<double>(rank) / (ns - 1) : 0.5;
    FieldShape& shape = fields_[f];
    shape.vocab = static_cast<uint32_t>(std::llround(std::exp(log_min + t * (log_max - log_min))));
    shape.vocab = std::clamp(shape.vocab, options.min_vocab, options.max_vocab);
    shape.missing_rate = options.missing_token_rate * 2.0 * ShapeUniform(0x4d495353ULL, f, 0);
    shape.zipf = ZipfSampler(shape.vocab, options.zipf);
  }
  dense_.resize(options.num_dense);
  for (int j = 0; j < options.num_dense; ++j) {
    DenseShape& d = dense_[j];
    d.missing_rate = options.missing_dense_rate * 2.0 * ShapeUniform(0x44454e53ULL, j, 0);
    d.alpha = 1.1 + 2.0 * ShapeUniform(0x44454e53ULL, j, 1);
    d.scale = std::exp(5.0 * ShapeUniform(0x44454e53ULL, j, 2));
    d.negative_rate = j % 6 == 1 ? 0.03 : 0.0;
  }
}

absl::StatusOr<std::unique_ptr<SyntheticWorld>> SyntheticWorld::Create(
    const SyntheticOptions& options) {
  PS_RETURN_IF_ERROR(ValidateSyntheticOptions(options));
  std::unique_ptr<SyntheticWorld> world(new SyntheticWorld(options));
  std::vector<SyntheticRow> pilot(kPilotRows);
  for (int i = 0; i < kPilotRows; ++i) {
    RowRng rng{Mix64(options.seed ^ Mix64(static_cast<uint64_t>(kPilotFirstRow + i)))};
    world->SampleFeatures(&rng.state, &pilot[i]);
  }
  std::vector<uint32_t> vocab(options.num_sparse);
  for (int f = 0; f < options.num_sparse; ++f) vocab[f] = world->fields_[f].vocab;
  world->teacher_ = std::make_unique<Teacher>(options.teacher, options.seed, options.num_dense,
                                              vocab, pilot, options.target_positive_rate);
  return world;
}

void SyntheticWorld::SampleFeatures(uint64_t* rng_state, SyntheticRow* row) const {
  RowRng rng{*rng_state};
  const uint64_t token_seed = Mix64(options_.seed ^ 0x544f4b454e53ULL);
  row->dense.resize(dense_.size());
  row->dense_empty.resize(dense_.size());
  for (size_t j = 0; j < dense_.size(); ++j) {
    const DenseShape& d = dense_[j];
    row->dense_empty[j] = rng.Uniform() < d.missing_rate;
    if (row->dense_empty[j]) {
      row->dense[j] = 0;
    } else if (d.negative_rate > 0 && rng.Uniform() < d.negative_rate) {
      row->dense[j] = -1 - static_cast<int64_t>(rng.Next() % 3);
    } else {
      // Lomax (Pareto II): heavy-tailed counts.
      double w = 1.0 - rng.Uniform();
      double v = d.scale * (std::pow(w, -1.0 / d.alpha) - 1.0);
      row->dense[j] = v >= static_cast<double>(kMaxDenseValue) ? kMaxDenseValue
                                                                : static_cast<int64_t>(v);
    }
  }
  row->tokens.resize(fields_.size());
  row->token_empty.resize(fields_.size());
  for (size_t f = 0; f < fields_.size(); ++f) {
    const FieldShape& shape = fields_[f];
    row->token_empty[f] = rng.Uniform() < shape.missing_rate;
    if (row->token_empty[f]) {
      row->tokens[f] = 0;
      continue;
    }
    uint64_t rank = shape.zipf.Sample([&rng] { return rng.Uniform(); });
    uint64_t token = Mix64(Mix64(token_seed + f) ^ rank);
    if (options_.drift > 0 && options_.era > 0) {
      const double u = static_cast<double>(Mix64(token ^ 0x4452494654ULL) >> 11) * 0x1.0p-53;
      const auto generation =
          static_cast<uint64_t>(static_cast<double>(options_.era) * options_.drift + u);
      if (generation > 0) token = Mix64(token ^ Mix64(generation * 0x9e3779b97f4a7c15ULL));
    }
    row->tokens[f] = static_cast<uint32_t>(token);
    // Drawn only with the option on, so rows without it stay as they were.
    if (options_.new_id_rate > 0 && rng.Uniform() < options_.new_id_rate) {
      row->tokens[f] = static_cast<uint32_t>(Mix64(rng.Next() ^ token_seed));
    }
  }
  *rng_state = rng.state;
}

void SyntheticWorld::SampleRow(int64_t r, SyntheticRow* row) const {
  RowRng rng{Mix64(options_.seed ^ Mix64(static_cast<uint64_t>(r)))};
  SampleFeatures(&rng.state, row);
  row->probability = teacher_->Probability(*row);
  row->label = rng.Uniform() < row->probability ? 1.0f : 0.0f;
}

void SyntheticWorld::FormatRow(const SyntheticRow& row, std::string* out) const {
  char buf[32];
  out->push_back(row.label > 0.5f ? '1' : '0');
  for (size_t j = 0; j < row.dense.size(); ++j) {
    out->push_back('\t');
    if (row.dense_empty[j]) continue;
    char* end = std::to_chars(buf, buf + sizeof(buf), row.dense[j]).ptr;
    out->append(buf, end);
  }
  for (size_t f = 0; f < row.tokens.size(); ++f) {
    out->push_back('\t');
    if (row.token_empty[f]) continue;
    const uint32_t v = row.tokens[f];
    for (int i = 0; i < 8; ++i) buf[i] = kHex[(v >> (28 - 4 * i)) & 0xf];
    out->append(buf, 8);
  }
  out->push_back('\n');
}

absl::Status SyntheticWorld::ParseRow(std::string_view line, SyntheticRow* row) const {
  const size_t nd = dense_.size(), ns = fields_.size();
  std::vector<std::string_view> cols;
  for (size_t start = 0;;) {
    size_t tab = line.find('\t', start);
    cols.push_back(line.substr(start, tab == std::string_view::npos ? tab : tab - start));
    if (tab == std::string_view::npos) break;
    start = tab + 1;
  }
  if (cols.size() != 1 + nd + ns) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic row: ", cols.size(), " columns, want ", 1 + nd + ns));
  }
  if (cols[0] != "0" && cols[0] != "1") return absl::InvalidArgumentError("synthetic row: label");
  row->label = cols[0] == "1" ? 1.0f : 0.0f;
  row->dense.resize(nd);
  row->dense_empty.resize(nd);
  for (size_t j = 0; j < nd; ++j) {
    row->dense_empty[j] = cols[1 + j].empty();
    if (!ParseInt64(cols[1 + j], &row->dense[j])) {
      return absl::InvalidArgumentError(absl::StrCat("synthetic row: I", j + 1));
    }
  }
  row->tokens.resize(ns);
  row->token_empty.resize(ns);
  for (size_t f = 0; f < ns; ++f) {
    std::string_view t = cols[1 + nd + f];
    row->token_empty[f] = t.empty();
    uint32_t v = 0;
    if (!t.empty() && t.size() != 8) {
      return absl::InvalidArgumentError(absl::StrCat("synthetic row: C", f + 1));
    }
    for (char c : t) {
      int h = HexValue(c);
      if (h < 0) return absl::InvalidArgumentError(absl::StrCat("synthetic row: C", f + 1));
      v = (v << 4) | static_cast<uint32_t>(h);
    }
    row->tokens[f] = v;
  }
  row->probability = teacher_->Probability(*row);
  return absl::OkStatus();
}

void SyntheticWorld::ToParsedRow(const SyntheticRow& row, const Schema& schema,
                                 ParsedRow* out) const {
  out->label = row.label;
  out->dense.resize(row.dense.size());
  for (size_t j = 0; j < row.dense.size(); ++j) {
    out->dense[j] = row.dense_empty[j] ? 0.0f : DenseTransform(row.dense[j]);
  }
  out->ids.clear();
  out->field_end.resize(row.tokens.size());
  const bool sep_in_hex = schema.multi_hot_sep != 0 && HexValue(schema.multi_hot_sep) >= 0;
  char hex[8];
  for (size_t f = 0; f < row.tokens.size(); ++f) {
    const int field = static_cast<int>(f);
    if (row.token_empty[f]) {
      out->ids.push_back(MissingId(field, schema.hash_buckets));
    } else {
      const uint32_t v = row.tokens[f];
      for (int i = 0; i < 8; ++i) hex[i] = kHex[(v >> (28 - 4 * i)) & 0xf];
      std::string_view token(hex, 8);
      if (!sep_in_hex) {
        out->ids.push_back(FeatureId(field, token, schema.hash_buckets));
      } else {
        size_t before = out->ids.size();
        for (size_t start = 0; start < token.size();) {
          size_t stop = std::min(token.find(schema.multi_hot_sep, start), token.size());
          if (stop > start) {
            out->ids.push_back(
                FeatureId(field, token.substr(start, stop - start), schema.hash_buckets));
          }
          start = stop + 1;
        }
        if (out->ids.size() == before) out->ids.push_back(MissingId(field, schema.hash_buckets));
      }
    }
    out->field_end[f] = static_cast<uint32_t>(out->ids.size());
  }
}

}  // namespace pstrain::worker
