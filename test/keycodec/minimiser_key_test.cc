// File: test/keycodec/minimiser_key_test.cc
// -----------------------------------------------------------------------------
// The -M key: FindMinimiser against a reference written here from samtools
// 1.23.1's rules in another form (every window of k accepted bases spelt
// out and hashed, instead of rolling hashes), on random sequences with
// every base code, for k from 1 to 31, both strands or one, squashed or
// not; ReverseComplement against samtools' letter table; the key layout
// (placed reads keep the coordinate key; unplaced ones order by hash, then
// offset rank, then strand, then input order); and what AppendAndRewrite
// changes. test/keycodec/golden_test.cc checks whole outputs against
// samtools itself.
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/coding.h"
#include "gtest/gtest.h"
#include "keycodec/key_parts_internal.h"
#include "keycodec/keycodec.h"
#include "keycodec/test_records.h"

namespace rocksort::keycodec {
namespace {

using internal::FindMinimiser;
using internal::Minimiser;
using internal::ReverseComplement;
using test_util::BamPtr;
using test_util::KeyOf;

constexpr char kBases[] = "=ACMGRSVTWYHKDBN";  // BAM's 4-bit codes, in order.

// A read with SEQ `seq` ("*" for none) and QUAL `qual` (empty: missing).
BamPtr MakeRead(uint16_t flag, int32_t tid, int64_t pos, const std::string& seq,
                const std::string& qual = "", int64_t mpos = -1, int64_t isize = 0) {
  BamPtr b(bam_init1());
  const std::string s = seq == "*" ? "" : seq;
  std::string q = qual;
  for (char& c : q) c = static_cast<char>(c - 33);
  // A mapped read with a sequence needs a CIGAR that covers it.
  const uint32_t cigar = bam_cigar_gen(s.size(), BAM_CMATCH);
  const bool has_cigar = (flag & BAM_FUNMAP) == 0 && !s.empty();
  const int r =
      bam_set1(b.get(), 1, "r", flag, tid, pos, 0, has_cigar ? 1 : 0, has_cigar ? &cigar : nullptr,
               -1, mpos, isize, s.size(), s.c_str(), q.empty() ? nullptr : q.c_str(), 0);
  EXPECT_GE(r, 0);
  return b;
}

std::string SeqOf(const bam1_t& b) {
  std::string s;
  for (int i = 0; i < b.core.l_qseq; ++i) s += kBases[bam_seqi(bam_get_seq(&b), i)];
  return s;
}

std::string QualOf(const bam1_t& b) {
  std::string q;
  for (int i = 0; i < b.core.l_qseq; ++i) q += static_cast<char>(bam_get_qual(&b)[i] + 33);
  return q;
}

// ---- The reference ---------------------------------------------------------

// 2-bit value of a base on the forward strand; every base but A C G T is A.
uint64_t Code(char base) {
  switch (base) {
    case 'C':
      return 1;
    case 'G':
      return 2;
    case 'T':
      return 3;
    default:
      return 0;
  }
}

// Of the complement strand: A C G T -> 3 2 1 0, every other base as T.
uint64_t ComplementCode(char base) {
  return std::string("ACGT").find(base) == std::string::npos ? 0 : 3 - Code(base);
}

Minimiser ReferenceMinimiser(const std::string& seq, const MinimiserOptions& o) {
  const int k = o.kmer;
  const uint64_t mask = (uint64_t{1} << (2 * k)) - 1;
  const uint64_t hash_xor = 0xdead7878beef7878 & mask;
  // The bases taken into k-mers, with their index in the read.
  std::vector<std::pair<char, int64_t>> taken;
  for (size_t i = 0; i < seq.size(); ++i) {
    if (o.squash_homopolymers && !taken.empty() && seq[i] == taken.back().first) continue;
    taken.emplace_back(seq[i], static_cast<int64_t>(i));
  }
  const int64_t len = static_cast<int64_t>(seq.size());
  uint64_t best = UINT64_MAX;
  int64_t best_end = 0;
  bool best_reverse = false;
  // Forward windows first, in read order; a reverse one wins only when
  // strictly smaller than every forward one (samtools' strands compete
  // after each found its own first minimum).
  uint64_t best_reverse_hash = UINT64_MAX;
  int64_t best_reverse_end = 0;
  for (size_t w = 0; w + k <= taken.size(); ++w) {
    uint64_t forward = 0;
    uint64_t reverse = 0;
    // The reverse complement of the window, read 5' to 3': its first base
    // is the complement of the window's last.
    for (int j = 0; j < k; ++j) forward = forward * 4 + Code(taken[w + j].first);
    for (int j = k - 1; j >= 0; --j) reverse = reverse * 4 + ComplementCode(taken[w + j].first);
    const int64_t last = taken[w + k - 1].second;
    if ((forward ^ hash_xor) < best) {
      best = forward ^ hash_xor;
      best_end = last;
    }
    if (o.try_reverse && (reverse ^ hash_xor) < best_reverse_hash) {
      best_reverse_hash = reverse ^ hash_xor;
      best_reverse_end = len - last + k - 2;
    }
  }
  if (best_reverse_hash < best) {
    best = best_reverse_hash;
    best_end = best_reverse_end;
    best_reverse = true;
  }
  Minimiser m;
  m.hash = best;
  m.offset = best_end - (k - 1);
  m.reverse = best_reverse;
  return m;
}

TEST(FindMinimiser, MatchesTheReferenceOnRandomSequences) {
  std::mt19937_64 rng(41);
  for (int round = 0; round < 3000; ++round) {
    MinimiserOptions o;
    o.kmer = std::vector<int>{1, 2, 3, 5, 8, 15, 20, 31}[rng() % 8];
    o.try_reverse = rng() % 3 != 0;
    o.squash_homopolymers = rng() % 2 == 0;
    // Small alphabets make homopolymers and equal k-mers; the full one
    // every code.
    const std::string alphabet =
        std::vector<std::string>{"A", "AC", "ACGT", "ACGTN", kBases}[rng() % 5];
    std::string seq;
    const size_t len = rng() % 90;
    for (size_t i = 0; i < len; ++i) seq += alphabet[rng() % alphabet.size()];
    const BamPtr b = MakeRead(4, -1, -1, seq.empty() ? "*" : seq);
    const Minimiser got = FindMinimiser(*b, o);
    const Minimiser want = ReferenceMinimiser(seq, o);
    ASSERT_EQ(got.hash, want.hash) << seq << " k " << o.kmer;
    ASSERT_EQ(got.offset, want.offset) << seq << " k " << o.kmer;
    ASSERT_EQ(got.reverse, want.reverse) << seq << " k " << o.kmer;
  }
}

TEST(FindMinimiser, ShortAndEmptySequencesHaveNone) {
  const MinimiserOptions o;  // k 20.
  for (const std::string seq : {"*", "A", "ACGTACGTACGTACGTACG"}) {
    const Minimiser m = FindMinimiser(*MakeRead(4, -1, -1, seq), o);
    EXPECT_EQ(m.hash, UINT64_MAX) << seq;
    EXPECT_EQ(m.offset, -19) << seq;
    EXPECT_FALSE(m.reverse) << seq;
  }
  // Squashed, a long homopolymer is one base.
  MinimiserOptions squash;
  squash.squash_homopolymers = true;
  EXPECT_EQ(FindMinimiser(*MakeRead(4, -1, -1, std::string(100, 'A')), squash).hash, UINT64_MAX);
  EXPECT_NE(FindMinimiser(*MakeRead(4, -1, -1, std::string(100, 'A')), o).hash, UINT64_MAX);
}

TEST(FindMinimiser, AReadAndItsReverseComplementShareTheirMinimiser) {
  const std::string seq = "GATTACACCGGTTAACGTAGGCTAGCTTACGATCGATCAGT";
  const BamPtr forward = MakeRead(4, -1, -1, seq);
  BamPtr reverse = MakeRead(4, -1, -1, seq);
  ReverseComplement(reverse.get());
  const MinimiserOptions o;
  const Minimiser a = FindMinimiser(*forward, o);
  const Minimiser b = FindMinimiser(*reverse, o);
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_NE(a.reverse, b.reverse);
  // Only the forward strand: they differ.
  MinimiserOptions forward_only;
  forward_only.try_reverse = false;
  EXPECT_NE(FindMinimiser(*forward, forward_only).hash, FindMinimiser(*reverse, forward_only).hash);
}

// ---- Reverse complement ----------------------------------------------------

TEST(ReverseComplement, FollowsSamtoolsLetterTable) {
  // samtools' table: = -> N, and Y stays Y (R -> Y).
  BamPtr b = MakeRead(4, -1, -1, "=ACMGRSVTWYHKDBN", "ABCDEFGHIJKLMNOP");
  ReverseComplement(b.get());
  EXPECT_EQ(SeqOf(*b), "NVHMDYWABSYCKGTN");
  EXPECT_EQ(QualOf(*b), "PONMLKJIHGFEDCBA");
  EXPECT_EQ(b->core.flag, 4 | BAM_FREVERSE);
  // Odd length: the middle base is complemented, its quality kept.
  b = MakeRead(20, -1, -1, "ACGTT", "12345");
  ReverseComplement(b.get());
  EXPECT_EQ(SeqOf(*b), "AACGT");
  EXPECT_EQ(QualOf(*b), "54321");
  EXPECT_EQ(b->core.flag, 4);
  // No sequence: only the flag.
  b = MakeRead(4, -1, -1, "*");
  ReverseComplement(b.get());
  EXPECT_EQ(b->core.l_qseq, 0);
  EXPECT_EQ(b->core.flag, 4 | BAM_FREVERSE);
}

// ---- Keys ------------------------------------------------------------------

std::unique_ptr<KeyEncoder> Encoder(const MinimiserOptions& o = {}) {
  SortOrder order;
  order.kind = OrderKind::kMinimiser;
  order.minimiser = o;
  absl::StatusOr<std::unique_ptr<KeyEncoder>> e =
      MakeKeyEncoder(order, *test_util::ParseHeader("@HD\tVN:1.6\n"));
  EXPECT_TRUE(e.ok()) << e.status();
  return std::move(*e);
}

TEST(MinimiserKey, PlacedReadsKeepTheCoordinateKey) {
  const std::unique_ptr<KeyEncoder> e = Encoder();
  absl::StatusOr<std::unique_ptr<KeyEncoder>> coordinate =
      MakeKeyEncoder(SortOrder{}, *test_util::ParseHeader("@HD\tVN:1.6\n"));
  ASSERT_TRUE(coordinate.ok());
  for (const BamPtr& b : {MakeRead(0, 0, 100, "ACGT"), MakeRead(16, 3, 0, "*"),
                          MakeRead(4, 1, 7, "ACGTACGTACGTACGTACGTACGT")}) {
    EXPECT_EQ(KeyOf(*e, *b, 9), KeyOf(**coordinate, *b, 9));
  }
  std::string key;
  BamPtr far = MakeRead(0, 0, 100, "A");
  far->core.pos = int64_t{1} << 31;  // bam_set1 would refuse it.
  EXPECT_EQ(e->Append(*far, 0, &key).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(key.empty());
}

TEST(MinimiserKey, UnplacedReadsSortAfterPlacedOnesByHashThenOffset) {
  const std::unique_ptr<KeyEncoder> e = Encoder();
  const BamPtr placed = MakeRead(0, 2000000, int64_t{1} << 30, "ACGT");
  const BamPtr unplaced = MakeRead(4, -1, -1, "ACGTACGTACGTACGTACGTACGT");
  const std::string u = KeyOf(*e, *unplaced, 5);
  EXPECT_LT(KeyOf(*e, *placed, 9), u);
  ASSERT_EQ(u.size(), 24u);
  EXPECT_EQ(u.substr(0, 4), std::string(4, '\xff'));
  const Minimiser m = FindMinimiser(*unplaced, MinimiserOptions{});
  EXPECT_EQ(GetBigEndian64(u.data() + 4),
            (m.hash + (uint64_t{1} << 30)) & ((uint64_t{1} << 62) - 1));
  EXPECT_EQ(~GetBigEndian32(u.data() + 12), static_cast<uint32_t>(65535 - m.offset));
  EXPECT_EQ(GetBigEndian64(u.data() + 16), uint64_t{5} | (m.reverse ? uint64_t{1} << 63 : 0));

  // The same k-mer further into the read: the same hash, a larger offset,
  // so it sorts later (samtools: the larger 65535 - offset first). With
  // k 5, ACTGA (codes 0 1 3 2 0 = 0x078, the XOR's low 10 bits) hashes to
  // 0, the smallest hash, wherever it is.
  const std::string kmer = "ACTGA";
  const BamPtr early = MakeRead(4, -1, -1, kmer + "TTTTT");
  const BamPtr late = MakeRead(4, -1, -1, "TTTTT" + kmer);
  MinimiserOptions forward_only;
  forward_only.kmer = 5;
  forward_only.try_reverse = false;
  const std::unique_ptr<KeyEncoder> f = Encoder(forward_only);
  ASSERT_EQ(FindMinimiser(*early, forward_only).hash, 0u);
  ASSERT_EQ(FindMinimiser(*late, forward_only).hash, 0u);
  EXPECT_EQ(FindMinimiser(*late, forward_only).offset, 5);
  EXPECT_LT(KeyOf(*f, *early, 1), KeyOf(*f, *late, 0));
  // Equal sequences tie on hash and offset: then the strand as written
  // (forward first, samtools' coordinate tie-break), then input order.
  const BamPtr fwd = MakeRead(4, -1, -1, kmer);
  const BamPtr rev = MakeRead(20, -1, -1, kmer);
  EXPECT_LT(KeyOf(*f, *fwd, 1), KeyOf(*f, *rev, 0));
  EXPECT_LT(KeyOf(*f, *fwd, 0), KeyOf(*f, *MakeRead(4, -1, -1, kmer), 1));
}

TEST(MinimiserKey, WithoutAKmerTheHashWrapsAsSamtools) {
  // UINT64_MAX + 2^30 wraps to 2^30 - 1: such reads come early among the
  // unplaced ones, as in samtools 1.23.1.
  const std::string key = KeyOf(*Encoder(), *MakeRead(4, -1, -1, "ACG"), 0);
  EXPECT_EQ(GetBigEndian64(key.data() + 4), (uint64_t{1} << 30) - 1);
  EXPECT_EQ(~GetBigEndian32(key.data() + 12), 65535u + 19u);
}

TEST(MinimiserKey, AppendAndRewriteChangesOnlyUnplacedReads) {
  const std::unique_ptr<KeyEncoder> e = Encoder();
  // A read whose minimiser is on the reverse strand (random ones until one
  // is), with a position, a mate position and a template length to clear.
  std::mt19937_64 rng(5);
  BamPtr read;
  std::string seq;
  for (;;) {
    seq.clear();
    for (int i = 0; i < 40; ++i) seq += "ACGT"[rng() % 4];
    read = MakeRead(4, -1, 17, seq, std::string(40, 'I').replace(0, 1, "#"), 33, -12);
    if (FindMinimiser(*read, MinimiserOptions{}).reverse) break;
  }
  const std::string appended = KeyOf(*e, *read, 3);
  std::string key;
  ASSERT_TRUE(e->AppendAndRewrite(read.get(), 3, &key).ok());
  EXPECT_EQ(key, appended);
  EXPECT_EQ(read->core.pos, -1);
  EXPECT_EQ(read->core.mpos, -1);
  EXPECT_EQ(read->core.isize, 0);
  EXPECT_EQ(read->core.flag, 4 | BAM_FREVERSE);
  BamPtr expected = MakeRead(4, -1, -1, seq, std::string(40, 'I').replace(0, 1, "#"));
  ReverseComplement(expected.get());
  EXPECT_EQ(SeqOf(*read), SeqOf(*expected));
  EXPECT_EQ(QualOf(*read), std::string(39, 'I') + "#");

  // A placed read is stored as it came.
  BamPtr placed = MakeRead(0, 1, 17, seq, "", 33, -12);
  key.clear();
  ASSERT_TRUE(e->AppendAndRewrite(placed.get(), 3, &key).ok());
  EXPECT_EQ(placed->core.pos, 17);
  EXPECT_EQ(placed->core.mpos, 33);
  EXPECT_EQ(placed->core.isize, -12);
  EXPECT_EQ(SeqOf(*placed), seq);
}

TEST(MinimiserKey, KmerSizeOutsideOneToThirtyOneIsRefused) {
  for (const int k : {0, 32, -1}) {
    SortOrder order;
    order.kind = OrderKind::kMinimiser;
    order.minimiser.kmer = k;
    EXPECT_EQ(MakeKeyEncoder(order, *test_util::ParseHeader("@HD\tVN:1.6\n")).status().code(),
              absl::StatusCode::kInvalidArgument)
        << k;
  }
}

}  // namespace
}  // namespace rocksort::keycodec
