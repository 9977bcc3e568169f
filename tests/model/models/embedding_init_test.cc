// The embedding initializer's text forms (--embedding_init, job field
// tables.*.init) and what each starts a table's rows at.
#include "model/models/embedding_init.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pstrain::worker {
namespace {

using ::testing::HasSubstr;

TEST(EmbeddingInit, EveryFormReadsBackFromItsText) {
  for (const char* text : {"uniform:0.05", "normal:0.01", "uniform:1/sqrt(dim)",
                           "uniform:sqrt(1/rows)", "zeros", "uniform:100"}) {
    absl::StatusOr<EmbeddingInitSpec> spec = ParseEmbeddingInit(text);
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(EmbeddingInitText(*spec), text);
    EXPECT_EQ(*ParseEmbeddingInit(EmbeddingInitText(*spec)), *spec);
  }
  // The flag's default (worker/flags/regularization_flags.cc) says the same.
  EXPECT_EQ(EmbeddingInitText(DefaultEmbeddingInit()), "uniform:0.1");
}

TEST(EmbeddingInit, RefusesWhatIsNotAnInitializer) {
  for (const char* text : {"", "uniform", "uniform:", "uniform:0", "uniform:-1", "normal:101",
                           "normal:1/sqrt(dim)", "gaussian:0.1", "uniform:0.05x", "zero",
                           "uniform:sqrt(1/dim)", "uniform:nan"}) {
    absl::StatusOr<EmbeddingInitSpec> spec = ParseEmbeddingInit(text);
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_THAT(std::string(spec.status().message()),
                HasSubstr("is not an embedding initializer: uniform:SCALE, normal:SCALE, "
                          "uniform:1/sqrt(dim), uniform:sqrt(1/rows) or zeros"))
        << text;
  }
}

TEST(EmbeddingInit, ScalesByTheRowsDimOrTheGivenScale) {
  const auto init = [](const char* text, int dim, uint64_t rows) {
    return EmbeddingRowInit(ParseEmbeddingInit(text).value(), "emb.item", dim, rows, 7);
  };
  EXPECT_FLOAT_EQ(init("uniform:1/sqrt(dim)", 16, 0)->scale, 0.25f);
  EXPECT_FLOAT_EQ(init("uniform:sqrt(1/rows)", 16, 400)->scale, 0.05f);
  EXPECT_EQ(init("uniform:sqrt(1/rows)", 16, 400)->kind, InitKind::kUniform);
  EXPECT_EQ(init("normal:0.3", 16, 0)->kind, InitKind::kNormal);
  EXPECT_FLOAT_EQ(init("normal:0.3", 16, 0)->scale, 0.3f);
  EXPECT_EQ(init("zeros", 16, 0)->kind, InitKind::kZeros);
  EXPECT_EQ(init("uniform:0.05", 16, 0)->seed, 7u);
  absl::StatusOr<InitializerConfig> unbounded = init("uniform:sqrt(1/rows)", 16, 0);
  ASSERT_FALSE(unbounded.ok());
  EXPECT_THAT(std::string(unbounded.status().message()),
              HasSubstr("table emb.item: uniform:sqrt(1/rows) needs the table's rows"));
}

}  // namespace
}  // namespace pstrain::worker
