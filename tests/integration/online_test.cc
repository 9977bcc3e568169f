// Online training feeding serving, end to end with real processes: a job
// follows a stream of partitions (--train_stream) and exports versions to
// --export_dir (bases and deltas); `pstrain serve` follows the folder. Ids
// first seen in partition k score as unseen until k is trained, and differ
// once the version holding k is served, which comes while the stream waits
// for partition k+1 (the trainer exports while it waits); versions after
// the first are deltas, brought up to date in place; the last version
// served gives the scores of the job's --save_model.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int kProbes = 12;
constexpr int kFirstCategorical = 14;  // label, 13 integer columns, then 26 categorical

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

// `line` with its first categorical column replaced by `token`.
std::string WithToken(const std::string& line, const std::string& token) {
  std::vector<std::string> f = absl::StrSplit(line, '\t');
  f[kFirstCategorical] = token;
  return absl::StrJoin(f, "\t");
}

std::string Token(const std::string& prefix, int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%s%04x", prefix.c_str(), i);
  return buf;
}

class Online : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("online");
    stream_ = dir_ + "/stream";
    export_ = dir_ + "/export";
    fs::create_directories(export_);
  }
  void TearDown() override {
    serve_.reset();
    fs::remove_all(dir_);
  }

  // Partition `k` of the stream: `base`'s rows with the first categorical
  // column set to fresh tokens `prefix`0000.. (kProbes of them, in turn).
  void WritePartition(int k, const std::vector<std::string>& base, const std::string& prefix) {
    const std::string p = absl::StrCat(stream_, "/2026-12-01/0", k);
    fs::create_directories(p);
    std::ofstream out(p + "/part-0.tsv");
    for (size_t i = 0; i < base.size(); ++i) {
      out << WithToken(base[i], Token(prefix, static_cast<int>(i % kProbes))) << "\n";
    }
    out.close();
    std::ofstream(p + "/_SUCCESS");
  }

  void StartServe() {
    port_ = FreePort();
    serve_ = std::make_unique<TestProcess>(
        BinDir() + "/pstrain",
        std::vector<std::string>{"serve", "--model_dir=" + export_, absl::StrCat("--port=", port_),
                                 "--poll_secs=0.1"},
        dir_ + "/serve.log");
    for (const absl::Time give_up = absl::Now() + absl::Seconds(30); absl::Now() < give_up;) {
      if (httplib::Client("127.0.0.1", port_).Get("/healthz")) return;
      ASSERT_TRUE(serve_->running()) << serve_->Log();
      absl::SleepFor(absl::Milliseconds(50));
    }
    FAIL() << "serve did not listen: " << serve_->Log();
  }

  std::string Get(const std::string& path) {
    httplib::Result r = httplib::Client("127.0.0.1", port_).Get(path);
    return r && r->status == 200 ? r->body : "";
  }

  // The served step (-1: no model yet).
  int64_t ServedStep() {
    const std::string h = Get("/healthz");
    const size_t at = h.find("(step ");
    return at == std::string::npos ? -1 : std::stoll(h.substr(at + 6));
  }

  std::vector<double> Scores(const std::vector<std::string>& rows) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    httplib::Result r = c.Post("/predict", absl::StrJoin(rows, "\n") + "\n", "text/plain");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
    if (!r || r->status != 200) return {};
    return json::parse(r->body)["probabilities"].get<std::vector<double>>();
  }

  // The step of the job's latest export while the stream waited, once it is
  // past `after` (-1 on timeout).
  int64_t WaitForIdleExport(const TestProcess& job, int64_t after) {
    const std::regex re("the stream waits for its next partition; exporting step ([0-9]+)");
    for (const absl::Time give_up = absl::Now() + absl::Seconds(60); absl::Now() < give_up;) {
      const std::string log = job.Log();
      int64_t last = -1;
      for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it) {
        last = std::stoll((*it)[1]);
      }
      if (last > after) return last;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return -1;
  }

  bool WaitForServedStep(int64_t step) {
    for (const absl::Time give_up = absl::Now() + absl::Seconds(20); absl::Now() < give_up;) {
      if (ServedStep() == step) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  std::vector<double> PredictScores(const std::string& model, const std::vector<std::string>& rows) {
    const std::string data = dir_ + "/probe.tsv", out = dir_ + "/scores.txt";
    std::ofstream(data) << absl::StrJoin(rows, "\n") << "\n";
    std::string log;
    EXPECT_EQ(RunPstrain({"predict", "--model=" + model, "--data=" + data, "--out=" + out},
                         dir_ + "/predict.log", &log, absl::Seconds(60)),
              0)
        << log;
    std::vector<double> scores;
    std::ifstream in(out);
    for (double v; in >> v;) scores.push_back(v);
    return scores;
  }

  std::string dir_, stream_, export_;
  int port_ = 0;
  std::unique_ptr<TestProcess> serve_;
};

int Differing(const std::vector<double>& a, const std::vector<double>& b) {
  int n = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) n += std::abs(a[i] - b[i]) > 1e-6;
  return n;
}

TEST_F(Online, IdsOfAPartitionAreServedByTheDeltaExportedWhileTheStreamWaits) {
  // Partition 0 from the generator; partitions 1 and 2 are its rows with
  // fresh tokens in one column.
  std::string log;
  ASSERT_EQ(RunPstrain({"gen", "--stream=" + dir_ + "/gen", "--rows=3000", "--partitions=1"},
                       dir_ + "/gen.log", &log, absl::Seconds(60)),
            0)
      << log;
  fs::create_directories(stream_ + "/2026-12-01");
  fs::rename(dir_ + "/gen/2026-12-01/00", stream_ + "/2026-12-01/00");
  const std::vector<std::string> base = Lines(stream_ + "/2026-12-01/00/part-0.tsv");
  ASSERT_EQ(base.size(), 3000u);
  std::vector<std::string> fresh, never;  // probes: tokens of partition 1, and of none
  for (int i = 0; i < kProbes; ++i) {
    fresh.push_back(WithToken(base[i], Token("f00d", i)));
    never.push_back(WithToken(base[i], Token("beef", i)));
  }

  StartServe();
  // With eviction on (--ttl_steps; nothing is old enough to go here) an id
  // not in the model reads as zeros: ids not trained yet score alike.
  TestProcess job(BinDir() + "/pstrain",
                  {"local", "--servers=2", "--workers=1", "--batch_size=200",
                   "--train_stream=" + stream_, "--stream_end=2026-12-01/02",
                   "--stream_poll_secs=0.1", "--export_dir=" + export_,
                   "--save_model=" + dir_ + "/model", "--export_every_secs=0.3",
                   "--metrics_out=" + dir_ + "/m.jsonl", "--ttl_steps=100000", "--timeout=120"},
                  dir_ + "/job.log");
  // Partition 0 trained and served: the fresh tokens score as unseen.
  const int64_t first = WaitForIdleExport(job, 0);
  ASSERT_GT(first, 0) << job.Log();
  ASSERT_TRUE(WaitForServedStep(first)) << serve_->Log();
  const std::vector<double> before = Scores(fresh);
  ASSERT_EQ(before.size(), static_cast<size_t>(kProbes));
  EXPECT_EQ(Differing(before, Scores(never)), 0);

  // Partition 1 brings the fresh tokens: once its version is served they
  // score differently from tokens never seen.
  WritePartition(1, base, "f00d");
  const int64_t second = WaitForIdleExport(job, first);
  ASSERT_GT(second, first) << job.Log();
  ASSERT_TRUE(WaitForServedStep(second)) << serve_->Log();
  EXPECT_EQ(Differing(Scores(fresh), Scores(never)), kProbes);
  EXPECT_THAT(Get("/metrics"), ::testing::ContainsRegex(
                                   "pstrain_serve_model_loads_total\\{result=\"delta\"\\} [1-9]"));

  WritePartition(2, base, "cafe");
  ASSERT_EQ(job.Wait(absl::Seconds(90)), 0) << job.Log();
  // Every version after the first is a delta (a base every 10 by default).
  std::vector<std::string> kinds;
  for (const std::string& line : Lines(dir_ + "/m.jsonl")) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("event", "") == "export") kinds.push_back(j["kind"]);
  }
  ASSERT_GE(kinds.size(), 3u);
  EXPECT_EQ(kinds[0], "base");
  for (size_t i = 1; i < kinds.size() && i < 10; ++i) EXPECT_EQ(kinds[i], "delta") << i;
  // The final version, served, scores as the job's whole saved model.
  std::string inspect;
  ASSERT_EQ(RunPstrain({"model", "inspect", dir_ + "/model"}, dir_ + "/inspect.log", &inspect,
                       absl::Seconds(30)),
            0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(inspect, m, std::regex("step ([0-9]+)"))) << inspect;
  ASSERT_TRUE(WaitForServedStep(std::stoll(m[1]))) << serve_->Log();
  std::vector<std::string> rows = fresh;
  rows.insert(rows.end(), never.begin(), never.end());
  for (int i = 0; i < kProbes; ++i) rows.push_back(WithToken(base[i], Token("cafe", i)));
  const std::vector<double> served = Scores(rows);
  const std::vector<double> saved = PredictScores(dir_ + "/model", rows);
  const std::vector<double> exported = PredictScores(export_, rows);
  ASSERT_EQ(served.size(), rows.size());
  ASSERT_EQ(saved.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_NEAR(served[i], saved[i], 1e-6) << "row " << i;
    EXPECT_EQ(exported[i], saved[i]) << "row " << i;
  }
}

}  // namespace
}  // namespace pstrain::testing
