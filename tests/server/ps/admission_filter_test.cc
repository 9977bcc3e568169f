// The admission filters on their own (admission_filter.h): AdmitAll and
// SketchAdmission's min_count and coin, without a table around them.
// admission_test.cc holds the table's side (refused gradients, zeros).
#include "server/ps/tables/admission_filter.h"

#include <cstdint>
#include <memory>

#include "gtest/gtest.h"

namespace pstrain::server {
namespace {

TableSpec Spec(uint32_t min_count, float admit_probability = 1.0f, uint32_t id = 3) {
  TableSpec spec;
  spec.id = id;
  spec.name = "emb.c7";
  spec.kind = TableKind::kSparse;
  spec.dim = 4;
  spec.admission.min_count = min_count;
  spec.admission.admit_probability = admit_probability;
  spec.admission.sketch_bytes = 4096;
  return spec;
}

std::unique_ptr<AdmissionFilter> Make(const TableSpec& spec) {
  auto filter = AdmissionFilter::Create(spec);
  EXPECT_TRUE(filter.ok()) << filter.status();
  return *std::move(filter);
}

TEST(AdmitAll, AdmitsEveryIdAtOnceAndKeepsNothing) {
  std::unique_ptr<AdmissionFilter> filter = Make(Spec(1));
  EXPECT_NE(dynamic_cast<AdmitAll*>(filter.get()), nullptr);
  EXPECT_TRUE(filter->admits_all());
  for (uint64_t id = 0; id < 100; ++id) EXPECT_TRUE(filter->Admit(id, 1));
  EXPECT_EQ(filter->sketch(), nullptr);
  EXPECT_EQ(filter->bytes(), 0u);
}

TEST(AdmissionFilter, CreateGivesTheSketchFilterForMinCountOrACoin) {
  for (const TableSpec& spec : {Spec(2), Spec(1, 0.5f), Spec(3, 0.25f)}) {
    std::unique_ptr<AdmissionFilter> filter = Make(spec);
    EXPECT_NE(dynamic_cast<SketchAdmission*>(filter.get()), nullptr);
    EXPECT_FALSE(filter->admits_all());
    ASSERT_NE(filter->sketch(), nullptr);
    EXPECT_EQ(filter->bytes(), 4096u);
  }
}

TEST(AdmissionFilter, BadConfigsAreRefusedNamingTheTable) {
  for (const TableSpec& spec : {Spec(0), Spec(70000), Spec(1, 0.0f), Spec(1, 1.5f)}) {
    auto filter = AdmissionFilter::Create(spec);
    ASSERT_EQ(filter.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(filter.status().message().find("sparse table 'emb.c7' (id 3)"), std::string::npos)
        << filter.status();
  }
}

TEST(SketchAdmission, MinCountAdmitsOnTheMinCountthOccurrence) {
  SketchAdmission filter(Spec(3).admission, 3);
  EXPECT_FALSE(filter.Admit(7, 1));
  EXPECT_FALSE(filter.Admit(7, 1));
  EXPECT_TRUE(filter.Admit(7, 1));
  EXPECT_EQ(filter.sketch()->Count(7), 3u);
  // Occurrences of one push each count.
  EXPECT_TRUE(filter.Admit(8, 3));
  EXPECT_FALSE(filter.Admit(9, 2));
  EXPECT_TRUE(filter.Admit(9, 1));
}

TEST(SketchAdmission, TheCoinIsReproducibleNearPAndDependsOnTheTable) {
  SketchAdmission a(Spec(1, 0.25f).admission, 3);
  SketchAdmission b(Spec(1, 0.25f).admission, 3);
  SketchAdmission other_table(Spec(1, 0.25f).admission, 4);
  int admitted = 0, same = 0;
  constexpr int kIds = 4000;
  for (uint64_t id = 0; id < kIds; ++id) {
    const bool by_a = a.Admit(id, 1);
    EXPECT_EQ(by_a, b.Admit(id, 1)) << id;
    admitted += by_a ? 1 : 0;
    same += by_a == other_table.Admit(id, 1) ? 1 : 0;
  }
  EXPECT_NEAR(admitted, kIds / 4, kIds / 20);
  EXPECT_LT(same, kIds * 9 / 10);  // independent coins agree ~62% of the time
}

TEST(SketchAdmission, EitherRuleAdmits) {
  // min_count 2 with a coin of 0.01: nearly every id waits for its second
  // occurrence, none for a third (a sketch wide enough not to overcount).
  AdmissionConfig config = Spec(2, 0.01f).admission;
  config.sketch_bytes = 1 << 20;
  SketchAdmission filter(config, 3);
  int first = 0;
  for (uint64_t id = 0; id < 1000; ++id) {
    if (filter.Admit(id, 1)) {
      ++first;
      continue;
    }
    EXPECT_TRUE(filter.Admit(id, 1)) << id;
  }
  EXPECT_LT(first, 40);
}

TEST(SketchAdmission, SavedCountsMergeInAndClearForgetsThem) {
  SketchAdmission saved(Spec(3).admission, 3);
  EXPECT_FALSE(saved.Admit(5, 2));
  SketchAdmission restored(Spec(3).admission, 3);
  restored.MergeSketch(*saved.sketch());
  EXPECT_TRUE(restored.Admit(5, 1));  // its third occurrence
  restored.Clear();
  EXPECT_EQ(restored.sketch()->Count(5), 0u);
  EXPECT_FALSE(restored.Admit(5, 1));
  EXPECT_EQ(restored.bytes(), 4096u);
}

}  // namespace
}  // namespace pstrain::server
