#include "generator.h"

#include <htslib/sam.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

namespace rocksort {
namespace gen_reads {
namespace {

int64_t Clamp(int64_t pos, int64_t ref_len) {
  return std::min(std::max<int64_t>(pos, 0), ref_len - 1);
}

uint8_t DrawMapq(Rng& rng) {
  const uint64_t u = rng.Below(100);
  if (u < 90) return 60;
  if (u < 93) return 0;
  return static_cast<uint8_t>(1 + rng.Below(59));
}

// XS:i is the best other alignment's score: near AS when MAPQ is low.
int32_t SuboptimalScore(const Alignment& a, Rng& rng) {
  if (a.mapq == 0) return a.score;
  const int32_t ceiling = a.score * (60 - std::min<int>(a.mapq, 60)) / 60;
  return static_cast<int32_t>(rng.Below(static_cast<uint64_t>(std::max(ceiling, 0)) + 1 +
                                        static_cast<uint64_t>(a.score / 4)));
}

int64_t TemplateLength(const Alignment& self, const Alignment& mate, bool self_is_read1) {
  if (self.tid != mate.tid) return 0;
  const int64_t left = std::min(self.pos, mate.pos);
  const int64_t right = std::max(self.pos + self.ref_span, mate.pos + mate.ref_span);
  const bool plus = self.pos < mate.pos || (self.pos == mate.pos && self_is_read1);
  return plus ? right - left : left - right;
}

}  // namespace

Status Generator::Run(sam_hdr_t* header) {
  GEN_RETURN_IF_ERROR(writer_.Open(opts_, header));
  if (opts_.have_pairs) {
    for (uint64_t i = 0; i < opts_.pairs; ++i) {
      GEN_RETURN_IF_ERROR(EmitDueEdgeCases(static_cast<double>(opts_.pairs)));
      GEN_RETURN_IF_ERROR(EmitPair(PlanPair(pair_rng_), pair_rng_));
      ++ordinary_pairs_;
    }
  } else {
    // The decision to stop (and where edge cases go) is only ever taken
    // from sizes measured at checkpoints, and the checkpoints depend only
    // on earlier measurements; see Writer::OutputBytes.
    double expected_pairs = std::numeric_limits<double>::infinity();
    uint64_t next_checkpoint = kFirstCheckpointPairs;
    for (;;) {
      if (ordinary_pairs_ >= next_checkpoint) {
        uint64_t bytes = 0;
        GEN_RETURN_IF_ERROR(writer_.OutputBytes(&bytes));
        if (bytes >= opts_.target_bytes) break;
        const double per_pair = static_cast<double>(bytes) / ordinary_pairs_;
        const uint64_t remaining = static_cast<uint64_t>(
            std::ceil(static_cast<double>(opts_.target_bytes - bytes) / per_pair));
        expected_pairs = static_cast<double>(ordinary_pairs_ + remaining);
        next_checkpoint =
            ordinary_pairs_ +
            (remaining > kHalvingLimit ? remaining / 2 : std::max(remaining, kMinCheckpointStep));
      }
      GEN_RETURN_IF_ERROR(EmitDueEdgeCases(expected_pairs));
      GEN_RETURN_IF_ERROR(EmitPair(PlanPair(pair_rng_), pair_rng_));
      ++ordinary_pairs_;
    }
  }
  // Whatever was not due yet (small outputs) goes at the end.
  GEN_RETURN_IF_ERROR(EmitDueEdgeCases(0.0));
  uint64_t bytes = 0;
  GEN_RETURN_IF_ERROR(writer_.OutputBytes(&bytes));
  records_ = writer_.records();
  GEN_RETURN_IF_ERROR(writer_.Close());
  bytes_ = bytes;
  return Status::Ok();
}

PairPlan Generator::PlanPair(Rng& rng) {
  PairPlan plan;
  const double both_unmapped = opts_.unmapped_frac / 4;
  const double u = rng.Uniform();
  if (u < both_unmapped) {
    plan.kind = PairKind::kBothUnmapped;
  } else if (u < both_unmapped + opts_.unmapped_frac) {
    plan.kind = PairKind::kOneUnmapped;
  } else if (u < both_unmapped + opts_.unmapped_frac + kDiscordantFrac) {
    plan.kind = PairKind::kDiscordant;
  } else if (n_recent_ > 0 && rng.Chance(opts_.tie_frac)) {
    // Reuse a recent read 1's coordinate; keep its strand 3 times in 4 so
    // that (tid, pos, strand) ties, not just (tid, pos) ties, are common.
    const RecentRead& r = recent_[rng.Below(n_recent_)];
    plan.tid = r.tid;
    plan.pos = r.pos;
    plan.reverse = r.reverse != (rng.Below(4) == 0) ? 1 : 0;
  }
  return plan;
}

int64_t Generator::FragmentLength(Rng& rng) {
  // Irwin-Hall(4) is close enough to a normal and costs four draws.
  double sum = 0;
  for (int i = 0; i < 4; ++i) sum += rng.Uniform();
  const double z = (sum - 2.0) * std::sqrt(3.0);
  return std::max<int64_t>(opts_.read_length,
                           static_cast<int64_t>(std::llround(fragment_mean_ + fragment_sd_ * z)));
}

const std::string& Generator::NextName() {
  const uint64_t serial = name_serial_++;
  const uint64_t lane = 1 + serial / (kClustersPerTile * kTilesPerLane);
  const uint64_t in_lane = serial % (kClustersPerTile * kTilesPerLane);
  const uint64_t tile_index = in_lane / kClustersPerTile;
  const uint64_t cluster = in_lane % kClustersPerTile;
  const uint64_t tile =
      (1 + tile_index / 48) * 1000 + (1 + (tile_index / 16) % 3) * 100 + (1 + tile_index % 16);
  const uint64_t x = 1000 + name_rng_.Below(31000);
  const uint64_t y = 1000 + cluster * 4 + name_rng_.Below(4);
  char buf[96];
  const int n =
      std::snprintf(buf, sizeof(buf), "SIM:1:FC01:%" PRIu64 ":%" PRIu64 ":%" PRIu64 ":%" PRIu64,
                    lane, tile, x, y);
  name_.assign(buf, static_cast<size_t>(n));
  return name_;
}

void Generator::SimulateMapped(int i, int32_t tid, int64_t pos, bool reverse, Rng& rng) {
  const int rl = opts_.read_length;
  Alignment& a = mates_[i];
  a.reverse = reverse;
  a.mapq = DrawMapq(rng);
  has_sup_[i] = rl >= kMinChimericReadLength && rng.Chance(kSupplementaryFrac);
  has_sec_[i] = rng.Chance(kSecondaryFrac);
  if (has_sup_[i]) {
    // A chimeric read: one part aligns here (primary, soft-clipped), the
    // other elsewhere (supplementary, hard-clipped, BWA's default).
    Alignment& s = sups_[i];
    const int k = rl / 4 + static_cast<int>(rng.Below(rl / 2));
    int32_t tid2;
    int64_t pos2;
    ref_.RandomLocus(rng, &tid2, &pos2);
    s.reverse = reverse;
    s.mapq = DrawMapq(rng);
    if (rng.Below(2) == 0) {  // primary = left part
      sim_.Align(tid2, pos2, 0, rl - k, 0, a.qual.data() + k, rng, &s);
      sim_.Align(tid, pos, 0, k, rl - k, a.qual.data(), rng, &a);
      a.seq.replace(k, rl - k, s.seq);
      s.cigar.insert(s.cigar.begin(), bam_cigar_gen(k, BAM_CHARD_CLIP));
      s.qual.assign(a.qual, k, rl - k);
    } else {  // primary = right part
      sim_.Align(tid2, pos2, 0, k, 0, a.qual.data(), rng, &s);
      sim_.Align(tid, pos, k, rl - k, 0, a.qual.data(), rng, &a);
      a.seq.replace(0, k, s.seq);
      s.cigar.push_back(bam_cigar_gen(rl - k, BAM_CHARD_CLIP));
      s.qual.assign(a.qual, 0, k);
    }
  } else {
    int lead = 0, trail = 0;
    if (rl >= kMinClipReadLength) {
      const double u = rng.Uniform();
      const int len = 5 + static_cast<int>(rng.Below(std::min(26, rl / 4)));
      // SAM orientation: a forward read's 3' end is on the right.
      if (u < kSoftClip3PrimeFrac) {
        (reverse ? lead : trail) = len;
      } else if (u < kSoftClip3PrimeFrac + kSoftClip5PrimeFrac) {
        (reverse ? trail : lead) = len;
      }
    }
    sim_.Align(tid, pos, lead, rl - lead - trail, trail, a.qual.data(), rng, &a);
  }
  if (has_sec_[i]) {
    // Secondary hits are stored without SEQ/QUAL, like BWA does.
    Alignment& s = secs_[i];
    int32_t tid2;
    int64_t pos2;
    ref_.RandomLocus(rng, &tid2, &pos2);
    s.reverse = rng.Below(2) != 0;
    s.mapq = 0;
    sim_.Align(tid2, pos2, 0, rl, 0, a.qual.data(), rng, &s);
  }
}

void Generator::AddAlignmentTags(const Alignment& a) {
  aux_.AddInt("NM", a.nm);
  aux_.AddString("MD", a.md);
}

void Generator::AddScoreTags(const Alignment& a, Rng& rng) {
  aux_.AddInt("AS", a.score);
  aux_.AddInt("XS", SuboptimalScore(a, rng));
}

void Generator::AppendSaEntry(const Alignment& a) {
  sa_ += ref_.name(a.tid);
  sa_ += ',';
  AppendNumber(&sa_, a.pos + 1);
  sa_ += a.reverse ? ",-," : ",+,";
  CigarToString(a.cigar, true, &cigar_text_);
  sa_ += cigar_text_;
  sa_ += ',';
  AppendNumber(&sa_, a.mapq);
  sa_ += ',';
  AppendNumber(&sa_, a.nm);
  sa_ += ';';
}

Status Generator::EmitPair(const PairPlan& plan, Rng& rng) {
  const int rl = opts_.read_length;
  bool mapped[2] = {true, true};
  if (plan.kind == PairKind::kBothUnmapped) {
    mapped[0] = mapped[1] = false;
  } else if (plan.kind == PairKind::kOneUnmapped) {
    mapped[rng.Below(2)] = false;
  }

  // Placement and strands.
  int32_t tid[2] = {-1, -1};
  int64_t pos[2] = {-1, -1};
  bool reverse[2] = {false, false};
  if (plan.kind == PairKind::kProper) {
    // FR orientation: the leftmost mate is on the forward strand.
    const int64_t insert = FragmentLength(rng) - rl;
    reverse[0] = plan.reverse >= 0 ? plan.reverse != 0 : rng.Below(2) != 0;
    reverse[1] = !reverse[0];
    if (plan.tid >= 0 && plan.pos >= 0) {
      tid[0] = tid[1] = plan.tid;
      pos[0] = plan.pos;
      pos[1] = reverse[0] ? pos[0] - insert : pos[0] + insert;
    } else {
      int64_t left;
      ref_.RandomLocus(rng, &tid[0], &left);
      if (plan.tid >= 0) {
        tid[0] = plan.tid;
        left = static_cast<int64_t>(rng.Below(ref_.length(tid[0])));
      }
      tid[1] = tid[0];
      left = std::min(left, std::max<int64_t>(0, ref_.length(tid[0]) - insert - rl));
      pos[reverse[0] ? 1 : 0] = left;
      pos[reverse[0] ? 0 : 1] = left + insert;
    }
    // Short references (or a tie anchor near an end) can push the mate
    // off the reference; keep both mates on it.
    pos[0] = Clamp(pos[0], ref_.length(tid[0]));
    pos[1] = Clamp(pos[1], ref_.length(tid[1]));
  } else {
    for (int i = 0; i < 2; ++i) {
      ref_.RandomLocus(rng, &tid[i], &pos[i]);
      reverse[i] = rng.Below(2) != 0;
    }
    if (plan.kind == PairKind::kOneUnmapped && plan.tid >= 0) {
      const int m = mapped[0] ? 0 : 1;
      tid[m] = plan.tid;
      pos[m] = static_cast<int64_t>(rng.Below(ref_.length(plan.tid)));
    }
  }

  for (int i = 0; i < 2; ++i) {
    Alignment& a = mates_[i];
    sim_.MakeQualities(rl, mapped[i] && reverse[i], rng, &a.qual);
    has_sup_[i] = has_sec_[i] = false;
    if (mapped[i]) {
      SimulateMapped(i, tid[i], pos[i], reverse[i], rng);
    } else {
      a.tid = -1;
      a.pos = -1;
      a.reverse = false;
      a.mapq = 0;
      a.cigar.clear();
      a.seq.clear();
      AppendRandomBases(rng, rl, &a.seq);  // unmappable: contamination
    }
  }

  // Coordinates as written: an unmapped mate sits at its mate's position.
  int32_t rec_tid[2];
  int64_t rec_pos[2];
  for (int i = 0; i < 2; ++i) {
    const int src = mapped[i] ? i : (mapped[1 - i] ? 1 - i : -1);
    rec_tid[i] = src >= 0 ? mates_[src].tid : -1;
    rec_pos[i] = src >= 0 ? mates_[src].pos : -1;
  }
  const bool proper = plan.kind == PairKind::kProper && mapped[0] && mapped[1];

  for (int i = 0; i < 2; ++i) {
    const int o = 1 - i;
    const Alignment& a = mates_[i];
    const Alignment& mate = mates_[o];
    const std::string& name = i == 0 ? NextName() : name_;

    uint16_t pair_flags = BAM_FPAIRED | (i == 0 ? BAM_FREAD1 : BAM_FREAD2);
    if (!mapped[o]) pair_flags |= BAM_FMUNMAP;
    if (mapped[o] && mate.reverse) pair_flags |= BAM_FMREVERSE;
    if (mapped[o]) CigarToString(mate.cigar, false, &mate_cigar_);

    RecordFields f;
    f.name = name;
    f.mtid = rec_tid[o];
    f.mpos = rec_pos[o];
    f.seq = a.seq;
    f.qual = a.qual;
    aux_.Clear();
    if (mapped[i]) {
      f.flag = pair_flags | (a.reverse ? BAM_FREVERSE : 0) | (proper ? BAM_FPROPER_PAIR : 0);
      f.tid = a.tid;
      f.pos = a.pos;
      f.mapq = a.mapq;
      f.cigar = &a.cigar;
      f.tlen = mapped[o] ? TemplateLength(a, mate, i == 0) : 0;
      AddAlignmentTags(a);
      if (mapped[o]) {
        aux_.AddString("MC", mate_cigar_);
        aux_.AddInt("MQ", mate.mapq);
      }
      AddScoreTags(a, rng);
      if (has_sup_[i]) {
        sa_.clear();
        AppendSaEntry(sups_[i]);
        aux_.AddString("SA", sa_);
      }
    } else {
      f.flag = pair_flags | BAM_FUNMAP;
      f.tid = rec_tid[i];
      f.pos = rec_pos[i];
      if (mapped[o]) {
        aux_.AddString("MC", mate_cigar_);
        aux_.AddInt("MQ", mate.mapq);
      }
      aux_.AddInt("AS", 0);
      aux_.AddInt("XS", 0);
    }
    aux_.AddString("RG", kReadGroup);
    GEN_RETURN_IF_ERROR(writer_.Write(f, aux_));

    // Extra records share the primary's pair fields, never 0x2 or TLEN.
    const Alignment* extras[2] = {has_sup_[i] ? &sups_[i] : nullptr,
                                  has_sec_[i] ? &secs_[i] : nullptr};
    for (int e = 0; e < 2; ++e) {
      const Alignment* x = extras[e];
      if (x == nullptr) continue;
      RecordFields g;
      g.name = name;
      g.flag = pair_flags | (x->reverse ? BAM_FREVERSE : 0) |
               (e == 0 ? BAM_FSUPPLEMENTARY : BAM_FSECONDARY);
      g.tid = x->tid;
      g.pos = x->pos;
      g.mapq = x->mapq;
      g.cigar = &x->cigar;
      g.mtid = rec_tid[o];
      g.mpos = rec_pos[o];
      if (e == 0) {  // supplementary: SEQ/QUAL of its own part
        g.seq = x->seq;
        g.qual = x->qual;
      }
      aux_.Clear();
      AddAlignmentTags(*x);
      if (mapped[o]) {
        aux_.AddString("MC", mate_cigar_);
        aux_.AddInt("MQ", mate.mapq);
      }
      AddScoreTags(*x, rng);
      if (e == 0) {
        sa_.clear();
        AppendSaEntry(a);
        aux_.AddString("SA", sa_);
      }
      aux_.AddString("RG", kReadGroup);
      GEN_RETURN_IF_ERROR(writer_.Write(g, aux_));
    }
  }

  if (mapped[0]) {
    recent_[recent_next_] = {mates_[0].tid, mates_[0].pos, mates_[0].reverse};
    recent_next_ = (recent_next_ + 1) % kRecentReadSlots;
    n_recent_ = std::min(n_recent_ + 1, kRecentReadSlots);
  }
  ++pairs_;
  return Status::Ok();
}

}  // namespace gen_reads
}  // namespace rocksort
