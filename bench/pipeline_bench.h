// `pstrain_bench pipeline`: the deep_tower model (24 layers of width 1024 by
// default) trained through a pipeline of --stages stages with --microbatches
// micro-batches and the --schedule schedule: a whole job in this process (a
// coordinator, a parameter server and the stage workers as threads on an
// in-process network) on a synthetic training file. Prints one line:
//   {"bench":"pipeline","stages":P,"microbatches":M,"schedule":S,
//    "bubble":X,"ideal_bubble":Y,"samples_per_sec":Z, ...}
// where ideal_bubble = (P-1)/(M+P-1) and bubble is every step replayed on P
// dedicated cores from the measured CPU seconds of each stage's forward and
// backward ops (see worker/pipeline/pipeline_stats.h): on a machine whose
// stages share cores, a stage's wall-clock wait also holds the time the
// others compute, so the wall-clock idle fraction is reported separately
// as bubble_wall.
#pragma once

namespace pstrain::bench {

// argv[0] is the program; a "pipeline" argument is skipped; the rest are
// --name=value flags (--help lists them). Returns the exit code.
int RunPipelineBench(int argc, char** argv);

}  // namespace pstrain::bench
