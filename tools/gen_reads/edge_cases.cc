// The --edge-cases records of Generator: when each is due and how each kind
// is made.

#include <htslib/sam.h>

#include <cstdint>
#include <string>
#include <vector>

#include "generator.h"

namespace rocksort {
namespace gen_reads {

Status Generator::EmitDueEdgeCases(double expected_pairs) {
  if (!opts_.edge_cases) return Status::Ok();
  const bool flush_all = expected_pairs <= 0.0;
  while (next_edge_slot_ < kEdgeSlots) {
    const double due = expected_pairs * (next_edge_slot_ + 0.5) / kEdgeSlots;
    if (!flush_all && static_cast<double>(ordinary_pairs_) < due) break;
    const int slot = next_edge_slot_++;
    const uint64_t before = writer_.records();
    GEN_RETURN_IF_ERROR(EmitEdgeCase(static_cast<EdgeKind>(slot % kEdgeKinds), slot / kEdgeKinds));
    edge_records_ += writer_.records() - before;
  }
  return Status::Ok();
}

Status Generator::EmitEdgeCase(EdgeKind kind, int repeat) {
  Rng& rng = edge_rng_;
  const int rl = opts_.read_length;
  const int32_t last = ref_.size() - 1;
  Alignment& a = single_;
  a.reverse = repeat % 2 != 0;
  a.mapq = 60;
  switch (kind) {
    case EdgeKind::kLongRead: {
      const int64_t pos = static_cast<int64_t>(rng.Below(ref_.length(0) - kLongReadLength));
      sim_.MakeQualities(kLongReadLength, a.reverse, rng, &a.qual);
      sim_.Align(0, pos, 0, kLongReadLength, 0, a.qual.data(), rng, &a);
      return WriteSingleEnd(a, kind, 1);
    }
    case EdgeKind::kManyCigarOps: {
      // 1M1I repeated: a valid alignment whose op count exceeds BAM's
      // 16-bit n_cigar_op, so htslib must store it in CG:B,I.
      const int64_t pos = static_cast<int64_t>(rng.Below(ref_.length(0) - kManyOpsPairs));
      a.tid = 0;
      a.pos = pos;
      a.cigar.clear();
      a.seq.clear();
      for (int j = 0; j < kManyOpsPairs; ++j) {
        a.seq.push_back(kBases[ref_.Base(0, pos + j)]);
        a.cigar.push_back(bam_cigar_gen(1, BAM_CMATCH));
        AppendRandomBases(rng, 1, &a.seq);
        a.cigar.push_back(bam_cigar_gen(1, BAM_CINS));
      }
      a.md.clear();
      AppendNumber(&a.md, kManyOpsPairs);  // insertions are not in MD
      a.nm = kManyOpsPairs;
      a.score = 0;
      a.ref_span = kManyOpsPairs;
      sim_.MakeQualities(2 * kManyOpsPairs, a.reverse, rng, &a.qual);
      return WriteSingleEnd(a, kind, 1);
    }
    case EdgeKind::kHugeIntArray:
    case EdgeKind::kHugeString:
    case EdgeKind::kTieBurst: {
      int32_t tid;
      int64_t pos;
      ref_.RandomLocus(rng, &tid, &pos);
      sim_.MakeQualities(rl, a.reverse, rng, &a.qual);
      sim_.Align(tid, pos, 0, rl, 0, a.qual.data(), rng, &a);
      if (kind == EdgeKind::kHugeIntArray) {
        huge_array_.resize(kHugeArrayElements);
        for (int32_t& v : huge_array_) {
          v = static_cast<int32_t>(static_cast<uint32_t>(rng.Next()));
        }
      } else if (kind == EdgeKind::kHugeString) {
        static constexpr char kAlnum[] =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        huge_string_.resize(kHugeStringLength);
        for (char& ch : huge_string_) ch = kAlnum[rng.Below(62)];
      }
      // Identical records that differ only in name: a sorter must keep
      // them in input order.
      return WriteSingleEnd(a, kind, kind == EdgeKind::kTieBurst ? kTieBurstSize : 1);
    }
    case EdgeKind::kFirstBase: {
      PairPlan plan;
      plan.tid = repeat % 2 == 0 ? 0 : last;
      plan.pos = 0;
      plan.reverse = 0;
      return EmitPair(plan, rng);
    }
    case EdgeKind::kLastBase: {
      // POS is the reference's last base; the rest of the read is
      // soft-clipped, on the right (forward) or the left (reverse).
      const int64_t pos = ref_.length(last) - 1;
      sim_.MakeQualities(rl, a.reverse, rng, &a.qual);
      sim_.Align(last, pos, a.reverse ? rl - 1 : 0, a.reverse ? 1 : rl, 0, a.qual.data(), rng, &a);
      return WriteSingleEnd(a, kind, 1);
    }
    case EdgeKind::kLastReference: {
      PairPlan plan;
      plan.tid = last;
      return EmitPair(plan, rng);
    }
    case EdgeKind::kMateUnmapped: {
      PairPlan plan;
      plan.kind = PairKind::kOneUnmapped;
      plan.tid = repeat % 2 == 0 ? last : -1;
      return EmitPair(plan, rng);
    }
    case EdgeKind::kBothUnmapped: {
      PairPlan plan;
      plan.kind = PairKind::kBothUnmapped;
      return EmitPair(plan, rng);
    }
    case EdgeKind::kCount:
      break;
  }
  return Status::Error("internal error: bad edge-case kind");
}

Status Generator::WriteSingleEnd(const Alignment& a, EdgeKind kind, int copies) {
  aux_.Clear();
  AddAlignmentTags(a);
  AddScoreTags(a, edge_rng_);
  aux_.AddString("RG", kReadGroup);
  if (kind == EdgeKind::kHugeIntArray) aux_.AddInt32Array("ZB", huge_array_);
  if (kind == EdgeKind::kHugeString) aux_.AddString("ZZ", huge_string_);
  RecordFields f;
  f.flag = a.reverse ? BAM_FREVERSE : 0;
  f.tid = a.tid;
  f.pos = a.pos;
  f.mapq = a.mapq;
  f.cigar = &a.cigar;
  f.seq = a.seq;
  f.qual = a.qual;
  for (int c = 0; c < copies; ++c) {
    f.name = NextName();
    GEN_RETURN_IF_ERROR(writer_.Write(f, aux_));
  }
  return Status::Ok();
}

}  // namespace gen_reads
}  // namespace rocksort
