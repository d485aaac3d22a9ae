// File: common/hts_handles.h
// -----------------------------------------------------------------------------
// std::unique_ptr owners for htslib's handles, so that every early return
// closes what was opened. Closing a samFile this way ignores hts_close's
// result: where that result matters (an output being finished), call
// hts_close on the released pointer and check it.
//
// Thread-compatible, like the handles.
#ifndef ROCKSORT_COMMON_HTS_HANDLES_H_
#define ROCKSORT_COMMON_HTS_HANDLES_H_

#include <memory>

#include "htslib/bgzf.h"
#include "htslib/hts.h"
#include "htslib/sam.h"
#include "htslib/thread_pool.h"

namespace rocksort {

struct HtsFileCloser {
  void operator()(htsFile* f) const { (void)hts_close(f); }
};
struct HeaderDestroyer {
  void operator()(sam_hdr_t* h) const { sam_hdr_destroy(h); }
};
struct RecordDestroyer {
  void operator()(bam1_t* b) const { bam_destroy1(b); }
};
struct BgzfCloser {
  void operator()(BGZF* fp) const { (void)bgzf_close(fp); }
};
struct IndexDestroyer {
  void operator()(hts_idx_t* idx) const { hts_idx_destroy(idx); }
};
struct ThreadPoolDestroyer {
  void operator()(hts_tpool* p) const { hts_tpool_destroy(p); }
};

using HtsFilePtr = std::unique_ptr<htsFile, HtsFileCloser>;
using HeaderPtr = std::unique_ptr<sam_hdr_t, HeaderDestroyer>;
using RecordPtr = std::unique_ptr<bam1_t, RecordDestroyer>;
using BgzfPtr = std::unique_ptr<BGZF, BgzfCloser>;
using IndexPtr = std::unique_ptr<hts_idx_t, IndexDestroyer>;
using ThreadPoolPtr = std::unique_ptr<hts_tpool, ThreadPoolDestroyer>;

}  // namespace rocksort

#endif  // ROCKSORT_COMMON_HTS_HANDLES_H_
