// Time buckets read in windows of whole training steps.
//
// A job without step markers is compared by time bucket (the collector's --bucket_ms, 1 s by
// default). A training step of several seconds spans several buckets, and a bucket's floor is
// the floor of the part of the step it covers: across one 10 s step the floors of its buckets
// swing by the activations' size (15 GiB in the simulator) while a leak adds 256 MiB a step. Read
// bucket by bucket, `headroom` called a leaking rank flat, `diverged` missed a 7.5 GiB leak
// (one bucket in five broke its run) and `leaks` dated one 195 s early.
//
// The analyses read such a job in windows of W consecutive buckets instead, one point each (the
// lowest floor, the highest peak, the last end, ...), W the fewest buckets over which the floors
// stop swinging: a window that holds a step's end (where the activations are gone) has the
// step's floor, so W may be shorter than a step (1 s steps in 250 ms buckets: 3) when every
// window does on every rank, and the 90th percentile of the changes is what must calm down (on
// the median rank, then on each rank against its own best). A job whose bucket floors
// swing by under 1% of its memory keeps its buckets; a noisy one may get a window that only
// smooths its noise. Wherever the analyses read time buckets: standing in for missing step
// markers, or asked for with --axis time (the collector's, plot's); two jobs compared are read
// in one window (the wider). Pure functions.
#ifndef MEMTRACE_QUERY_ANALYSIS_BUCKET_WINDOWS_H_
#define MEMTRACE_QUERY_ANALYSIS_BUCKET_WINDOWS_H_

#include <cstdint>

#include "query/analysis/step_metrics.h"
#include "query/analysis/timeline.h"

namespace memtrace::analysis {

// The window, in buckets, that `job`'s floors call for: 1 (buckets as they are) for a job on the
// step axis, or whose bucket floors swing by under 1% of its memory, or for which no window of
// at most 240 buckets (and 8 windows a rank) calms the swing to a quarter; then widened, while 8
// windows a rank remain, until every rank's own swing is at most twice the least any window
// gives it (a leaking rank's longer steps are not the median rank's; a window that holds no step
// end on one rank reads its floor high). The same for a job's timeline and its step metrics
// (both read the floors).
int64_t StepWindowOf(const JobTimeline& job);
int64_t StepWindowOf(const JobStepMetrics& job);

// `job` with each rank's buckets merged in windows of `window` (aligned on bucket indexes that
// are multiples of it, so every rank's windows line up): step = bucket index / window,
// bucket_ns = window x bucket_ns. Within a window: the first start, the last end and end bytes,
// the lowest floor, the highest peak, summed counts; a tag's or source's live bytes at the
// window's end and its highest peak; a phase's at its last close in the window (as last seen
// when it closed in none). A rank's bucket in progress (RankTimeline::in_progress) makes its
// window the rank's window in progress, not one of its steps. A window of 1, or a job on the step
// axis, is returned unchanged.
JobTimeline InStepWindows(const JobTimeline& job, int64_t window);
JobStepMetrics InStepWindows(const JobStepMetrics& job, int64_t window);

// The shortest width that is a whole number of buckets of both `a_ns` and `b_ns` and at least
// `at_least_ns`, for two jobs stored at other bucket widths to be compared in one window; 0
// when none is within an hour or within 4x `at_least_ns` (widths with no small common
// multiple: buckets of 999 and 1000 ms share only 999 s, windows in which a job of a few
// minutes is too short for every analysis, with nothing to say why).
int64_t CommonWindowNs(int64_t a_ns, int64_t b_ns, int64_t at_least_ns);

}  // namespace memtrace::analysis

#endif  // MEMTRACE_QUERY_ANALYSIS_BUCKET_WINDOWS_H_
