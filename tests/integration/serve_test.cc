// Real processes on 127.0.0.1: `pstrain train --save_model` writes a model,
// `pstrain serve` serves it over HTTP. Its scores equal `pstrain predict`'s
// for the same rows (text with and without the label column, JSON rows); a
// new version written to the folder is taken up; a corrupt one is refused
// and the old one kept; bad requests get 400 with the row and column; a
// server started before any model exists is live (/healthz) but not ready
// (/readyz 503) until one appears; a row lacking a standardized column
// scores with its training mean and the answer says so.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
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
using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr int kRows = 40;  // rows scored in each comparison

// The N of "(step N)" in a /healthz answer (-1: none).
int64_t StepOf(const std::string& healthz) {
  const size_t at = healthz.find("(step ");
  return at == std::string::npos ? -1 : std::stoll(healthz.substr(at + 6));
}

class Serve : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("serve");
    data_ = WriteTrainEval(dir_, 23, 6000, 500);
    std::vector<std::string> lines = absl::StrSplit(ReadFile(data_.eval), '\n', absl::SkipEmpty());
    lines.resize(kRows);
    for (const std::string& l : lines) rows_ += l + "\n";
    rows_file_ = dir_ + "/rows.tsv";
    std::ofstream(rows_file_) << rows_;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Trains `epochs` epochs into `model`.
  void Train(const std::string& model, int epochs) {
    TestProcess p(BinDir() + "/pstrain",
                  {"train", "--train_data=" + data_.train, "--save_model=" + model,
                   absl::StrCat("--epochs=", epochs), "--batch_size=256"},
                  model + ".log");
    ASSERT_EQ(p.Wait(absl::Seconds(120)), 0) << p.Log();
  }

  // Starts `pstrain serve` on `model_dir`; returns when it listens and,
  // with `ready`, when its model is loaded (/readyz 200).
  void StartServe(const std::string& model_dir, bool ready = true,
                  std::vector<std::string> flags = {}) {
    port_ = FreePort();
    std::vector<std::string> args = {"serve", "--model_dir=" + model_dir,
                                     absl::StrCat("--port=", port_), "--poll_secs=0.2",
                                     "--max_request_rows=100"};
    args.insert(args.end(), flags.begin(), flags.end());
    serve_ = std::make_unique<TestProcess>(BinDir() + "/pstrain", args, dir_ + "/serve.log");
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (absl::Now() < give_up) {
      httplib::Client c("127.0.0.1", port_);
      if (httplib::Result r = c.Get(ready ? "/readyz" : "/healthz"); r && r->status == 200) return;
      ASSERT_TRUE(serve_->running()) << serve_->Log();
      absl::SleepFor(absl::Milliseconds(50));
    }
    FAIL() << "serve did not listen" << (ready ? " with a model" : "") << ": " << serve_->Log();
  }

  httplib::Result Post(const std::string& body, const std::string& type = "text/plain") {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    return c.Post("/predict", body, type);
  }

  // The probabilities of a 200 answer.
  std::vector<double> Scores(const std::string& body, const std::string& type = "text/plain") {
    httplib::Result r = Post(body, type);
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    json j = json::parse(r->body, nullptr, false);
    if (!j.is_object() || !j.contains("probabilities")) return {};
    return j["probabilities"].get<std::vector<double>>();
  }

  std::string Get(const std::string& path, int* status) {
    httplib::Client c("127.0.0.1", port_);
    httplib::Result r = c.Get(path);
    *status = r ? r->status : -1;
    return r ? r->body : "";
  }
  std::string Healthz(int* status) { return Get("/healthz", status); }

  // Waits until /healthz names a version other than `old`; returns its body.
  std::string WaitForVersionOtherThan(const std::string& old, absl::Duration timeout) {
    const absl::Time give_up = absl::Now() + timeout;
    std::string body;
    while (absl::Now() < give_up) {
      int status;
      body = Healthz(&status);
      if (status == 200 && body != old && StepOf(body) >= 0) return body;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return body;
  }

  std::vector<double> PredictScores(const std::string& model) {
    const std::string out = dir_ + "/scores.txt";
    TestProcess p(BinDir() + "/pstrain",
                  {"predict", "--model=" + model, "--data=" + rows_file_, "--out=" + out},
                  dir_ + "/predict.log");
    EXPECT_EQ(p.Wait(absl::Seconds(60)), 0) << p.Log();
    std::vector<double> scores;
    std::ifstream in(out);
    for (double v; in >> v;) scores.push_back(v);
    return scores;
  }

  std::string dir_, rows_, rows_file_;
  TrainEval data_;
  int port_ = 0;
  int status_ = 0;
  std::unique_ptr<TestProcess> serve_;
};

TEST_F(Serve, ScoresEqualPredictForTextWithAndWithoutLabelAndJsonRows) {
  const std::string model = dir_ + "/model";
  Train(model, 1);
  StartServe(model);
  const std::vector<double> expected = PredictScores(model);
  ASSERT_EQ(expected.size(), static_cast<size_t>(kRows));

  const std::vector<double> text = Scores(rows_);
  ASSERT_EQ(text.size(), expected.size());
  // predict writes 6 decimals.
  for (int i = 0; i < kRows; ++i) EXPECT_NEAR(text[i], expected[i], 1e-6) << "row " << i;

  // Without the label column, and as JSON objects by column name.
  std::string no_label;
  json rows = json::array();
  for (const auto& line : absl::StrSplit(rows_, '\n', absl::SkipEmpty())) {
    std::vector<std::string> cols = absl::StrSplit(line, '\t');
    no_label += absl::StrJoin(cols.begin() + 1, cols.end(), "\t") + "\n";
    json r = json::object();
    for (int j = 1; j <= 13; ++j) {
      if (!cols[j].empty()) r[absl::StrCat("I", j)] = std::stoll(cols[j]);
    }
    for (int f = 1; f <= 26; ++f) r[absl::StrCat("C", f)] = cols[13 + f];
    rows.push_back(r);
  }
  EXPECT_EQ(Scores(no_label), text);
  EXPECT_EQ(Scores(json{{"rows", rows}}.dump(), "application/json"), text);
  EXPECT_EQ(Scores(json{{"lines", absl::StrSplit(rows_, '\n', absl::SkipEmpty())}}.dump(),
                   "application/json"),
            text);
}

TEST_F(Serve, BadRequestsGet400WithTheRowAndColumn) {
  const std::string model = dir_ + "/model";
  Train(model, 1);
  StartServe(model);
  httplib::Result r = Post("1\t2\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("row 1: 2 columns, want 40 (or 39 without the label)"));

  std::string line = rows_.substr(0, rows_.find('\n'));
  std::vector<std::string> cols = absl::StrSplit(line, '\t');
  cols[3] = "many";  // I3
  r = Post(line + "\n" + absl::StrJoin(cols, "\t") + "\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("row 2: column I3: not an integer"));

  r = Post(R"({"rows": [{"I1": 1, "C2": "a"}, {"I1": 2, "Cx": "b"}]})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("row 2: unknown column \\\"Cx\\\""));

  r = Post("{\"rows\": [", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("not valid JSON"));

  std::string many;
  for (int i = 0; i < 101; ++i) many += line + "\n";
  r = Post(many);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("more than 100 rows"));

  // The server still answers well-formed requests.
  EXPECT_EQ(Scores(line + "\n").size(), 1u);
  httplib::Client c("127.0.0.1", port_);
  httplib::Result m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_THAT(m->body, HasSubstr("pstrain_serve_requests_total{code=\"400\"} 5"));
  EXPECT_THAT(m->body, HasSubstr("pstrain_serve_requests_total{code=\"200\"} 1"));
}

TEST_F(Serve, TakesUpANewVersionAndRefusesACorruptOne) {
  const std::string model = dir_ + "/model", next = dir_ + "/next", bad = dir_ + "/bad";
  Train(model, 1);
  Train(next, 3);
  StartServe(model);
  int status;
  const std::string first = Healthz(&status);
  ASSERT_EQ(status, 200);
  const std::vector<double> before = Scores(rows_);

  // A new version, put in place in one step (as --save_model does).
  fs::copy(next, bad, fs::copy_options::recursive);
  fs::rename(model, dir_ + "/old");
  fs::rename(next, model);
  const std::string second = WaitForVersionOtherThan(first, absl::Seconds(10));
  EXPECT_NE(second, first);
  EXPECT_GT(StepOf(second), StepOf(first));  // 3 epochs against 1
  const std::vector<double> after = Scores(rows_);
  EXPECT_NE(after, before);
  const std::vector<double> expected = PredictScores(model);
  ASSERT_EQ(after.size(), expected.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_NEAR(after[i], expected[i], 1e-6) << "row " << i;

  // A corrupt version: one bit of a table flipped. Refused; the old stays.
  {
    std::fstream f(bad + "/emb.C3.tbl", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(40);
    char b;
    f.read(&b, 1);
    b ^= 1;
    f.seekp(40);
    f.write(&b, 1);
  }
  fs::rename(model, dir_ + "/old2");
  fs::rename(bad, model);
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (absl::Now() < give_up && serve_->Log().find("checksum mismatch") == std::string::npos) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_THAT(serve_->Log(), HasSubstr("emb.C3.tbl: checksum mismatch"));
  EXPECT_EQ(Healthz(&status), second);
  EXPECT_EQ(Scores(rows_), after);
  httplib::Client c("127.0.0.1", port_);
  httplib::Result m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_THAT(m->body, HasSubstr("pstrain_serve_model_loads_total{result=\"failed\"} 1"));
  EXPECT_THAT(m->body, HasSubstr("pstrain_serve_model_loads_total{result=\"ok\"} 2"));
}

TEST_F(Serve, IsLiveButNotReadyUntilTheFirstModelExists) {
  const std::string model = dir_ + "/model";
  fs::create_directories(model);
  StartServe(model, /*ready=*/false);
  int status;
  EXPECT_THAT(Healthz(&status), HasSubstr("no model yet"));
  EXPECT_EQ(status, 200);
  EXPECT_THAT(Get("/readyz", &status), HasSubstr("no model in " + model + " yet"));
  EXPECT_EQ(status, 503);
  httplib::Result r = Post(rows_);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);

  const std::string staged = dir_ + "/staged";
  Train(staged, 1);
  fs::remove(model);
  fs::rename(staged, model);
  EXPECT_THAT(WaitForVersionOtherThan("", absl::Seconds(10)), HasSubstr("ok: serving version"));
  EXPECT_THAT(Get("/readyz", &status), HasSubstr("\"ready\":true"));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(Scores(rows_).size(), static_cast<size_t>(kRows));
}

TEST_F(Serve, ListensBeforeItsModelLoadsAndWaitsForAFolderOnlyWhenAsked) {
  const std::string model = dir_ + "/later";
  // A folder that does not exist: refused at once, naming the flag.
  TestProcess refused(BinDir() + "/pstrain",
                      {"serve", "--model_dir=" + model, absl::StrCat("--port=", FreePort())},
                      dir_ + "/refused.log");
  EXPECT_EQ(refused.Wait(absl::Seconds(10)), 2) << refused.Log();
  EXPECT_THAT(refused.Log(), HasSubstr("--model_dir=" + model + ": no such folder"));

  StartServe(model, /*ready=*/false, {"--wait_for_model"});
  int status;
  EXPECT_THAT(Healthz(&status), HasSubstr("ok: no model yet"));
  EXPECT_EQ(status, 200);
  json not_ready = json::parse(Get("/readyz", &status), nullptr, false);
  EXPECT_EQ(status, 503);
  EXPECT_EQ(not_ready.value("ready", true), false) << not_ready;
  EXPECT_THAT(not_ready.value("reason", ""), HasSubstr(model + " does not exist yet"));

  const std::string staged = dir_ + "/staged";
  Train(staged, 1);
  fs::rename(staged, model);
  json ready;
  for (const absl::Time give_up = absl::Now() + absl::Seconds(10); absl::Now() < give_up;) {
    ready = json::parse(Get("/readyz", &status), nullptr, false);
    if (status == 200) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(status, 200) << ready;
  EXPECT_EQ(ready.value("ready", false), true) << ready;
  EXPECT_GT(ready.value("model_step", int64_t{0}), 0) << ready;
  EXPECT_THAT(serve_->Log(), HasSubstr("waiting for a model: " + model + " does not exist yet"));
  EXPECT_EQ(Scores(rows_).size(), static_cast<size_t>(kRows));
}

// Ratings with a standardized year (mean about 1995) and two categorical
// columns; the label follows the year.
std::string WriteRatings(const std::string& dir, int rows) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> year(1995, 12);
  std::uniform_real_distribution<double> unit(0, 1);
  std::string text = "user,item,rating,year\n";
  for (int r = 0; r < rows; ++r) {
    const int y = static_cast<int>(year(rng)), user = 1 + r % 50, item = 1 + (r * 7) % 200;
    const double p = 1 / (1 + std::exp(-((y - 1995) / 12.0 + (user % 5 - 2) * 0.5)));
    absl::StrAppend(&text, user, ",", item, ",", unit(rng) < p ? 1 : 0, ",", y, "\n");
  }
  std::ofstream(dir + "/ratings.csv") << text;
  std::ofstream(dir + "/ratings.json")
      << R"({"format": "csv", "header": true, "label": "rating",
             "dense": [{"column": "year", "transform": "standardize"}],
             "sparse": ["user", "item"]})";
  return dir + "/ratings.csv";
}

TEST_F(Serve, ARowLackingAStandardizedColumnScoresWithItsTrainingMeanAndSaysSo) {
  const std::string data = WriteRatings(dir_, 4000), model = dir_ + "/ratings-model";
  TestProcess train(BinDir() + "/pstrain",
                    {"train", "--schema=" + dir_ + "/ratings.json", "--train_data=" + data,
                     "--save_model=" + model, "--batch_size=256", "--epochs=2"},
                    dir_ + "/ratings-train.log");
  ASSERT_EQ(train.Wait(absl::Seconds(120)), 0) << train.Log();
  const json dense = json::parse(ReadFile(model + "/model.json"))["model"]["schema"]["dense"][0];
  EXPECT_EQ(dense["missing"], "mean") << dense;
  const double mean = dense["mean"].get<double>();
  EXPECT_NEAR(mean, 1995, 2);
  StartServe(model);

  auto answer = [&](const std::string& body, const std::string& type) {
    httplib::Result r = Post(body, type);
    EXPECT_TRUE(r);
    EXPECT_EQ(r ? r->status : -1, 200) << (r ? r->body : "");
    return r ? json::parse(r->body, nullptr, false) : json();
  };
  const json lacking = answer(R"({"rows": [{"user": "3", "item": "17"}]})", "application/json");
  ASSERT_TRUE(lacking.contains("warnings")) << lacking;
  EXPECT_EQ(lacking["warnings"],
            json::array({"column \"year\" is missing in 1 of 1 row: scored with its training mean"}));
  const json at_mean = answer(json{{"rows", {{{"user", "3"}, {"item", "17"}, {"year", mean}}}}}.dump(),
                              "application/json");
  EXPECT_FALSE(at_mean.contains("warnings")) << at_mean;
  EXPECT_EQ(lacking["probabilities"], at_mean["probabilities"]);
  const json year_zero = answer(R"({"rows": [{"user": "3", "item": "17", "year": 0}]})",
                                "application/json");
  EXPECT_GT(std::abs(year_zero["probabilities"][0].get<double>() -
                     at_mean["probabilities"][0].get<double>()),
            0.01)
      << "year 0 is far from every year seen in training";
  // As text, with NA or an empty field, with the label and without.
  const json text = answer("3,17,1,NA\n3,17,\n", "text/plain");
  EXPECT_EQ(text["warnings"], json::array({"column \"year\" is missing in 2 of 2 rows: scored "
                                           "with its training mean"}));
  ASSERT_EQ(text["probabilities"].size(), 2u);
  for (const json& p : text["probabilities"]) {
    EXPECT_NEAR(p.get<double>(), at_mean["probabilities"][0].get<double>(), 1e-6);
  }

  // What stays a 400, naming the column.
  httplib::Result r = Post(R"({"rows": [{"user": "3", "itm": "17"}]})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("unknown column \\\"itm\\\""));
  r = Post(R"({"rows": [{"user": "3", "year": "old"}]})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("column \\\"year\\\": not a number"));
  r = Post("3,17\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("row 1: 2 columns, want 4 (or 3 without the label): no value "
                                 "for column \\\"rating\\\" on (\\\"year\\\" on, without the label)"));
}

// A job that exports every few steps feeds a server started before it:
// the server takes up versions of increasing steps while the job trains,
// and ends on the job's final model.
TEST_F(Serve, FollowsAJobThatExportsEveryFewSteps) {
  const std::string model = dir_ + "/model";
  fs::create_directories(model);
  StartServe(model, /*ready=*/false);
  TestProcess job(BinDir() + "/pstrain",
                  {"local", "--servers=1", "--workers=1", "--train_data=" + data_.train,
                   "--epochs=4", "--batch_size=256", "--export_every_steps=10",
                   "--save_model=" + model, "--log_every_secs=1000", "--timeout=120"},
                  dir_ + "/job.log");
  std::vector<int64_t> steps;  // distinct steps served, in order
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (job.running() && absl::Now() < give_up) {
    int status;
    const int64_t step = StepOf(Healthz(&status));
    if (step >= 0 && (steps.empty() || step != steps.back())) steps.push_back(step);
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(job.Wait(absl::Seconds(10)), 0) << job.Log();
  EXPECT_THAT(job.Log(), HasSubstr("model of step 10 saved to"));
  // The final model, as the job's log reports it.
  const std::string log = job.Log();
  const size_t at = log.find("trained ");
  ASSERT_NE(at, std::string::npos) << log;
  const int64_t final_step = std::stoll(log.substr(at + 8));
  const absl::Time wait_final = absl::Now() + absl::Seconds(10);
  while (StepOf(Healthz(&status_)) != final_step && absl::Now() < wait_final) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(StepOf(Healthz(&status_)), final_step);
  std::cout << "steps served while the job trained:";
  for (int64_t st : steps) std::cout << " " << st;
  std::cout << "\n";
  ASSERT_GE(steps.size(), 3u) << "versions served while training: " << steps.size();
  for (size_t i = 1; i < steps.size(); ++i) EXPECT_GT(steps[i], steps[i - 1]);
  EXPECT_EQ(steps.front() % 10, 0) << steps.front();
  const std::vector<double> served = Scores(rows_), expected = PredictScores(model);
  ASSERT_EQ(served.size(), expected.size());
  for (size_t i = 0; i < served.size(); ++i) EXPECT_NEAR(served[i], expected[i], 1e-6) << "row " << i;
}

}  // namespace
}  // namespace pstrain::testing
