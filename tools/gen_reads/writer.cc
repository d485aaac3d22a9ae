#include "writer.h"

#include <htslib/bgzf.h>
#include <htslib/hts.h>
#include <htslib/sam.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace rocksort {
namespace gen_reads {

Status Writer::Open(const Options& opts, sam_hdr_t* header) {
  name_ = opts.output;
  header_ = header;
  const std::string_view out = opts.output;
  auto ends_with = [&out](std::string_view suffix) {
    return out.size() > suffix.size() && out.substr(out.size() - suffix.size()) == suffix;
  };
  std::string mode;
  if (out == "-" || ends_with(".sam")) {
    mode = "w";
    is_bam_ = false;
    if (opts.compression_level >= 0) {
      std::fprintf(stderr, "%s: warning: -l is ignored for SAM output\n", kProgramName);
    }
  } else if (ends_with(".bam")) {
    mode = "wb";
    if (opts.compression_level >= 0) {
      mode += static_cast<char>('0' + opts.compression_level);
    }
    is_bam_ = true;
  } else {
    return Status::Error("can't tell the output format of \"" + opts.output +
                         "\": use a .bam or .sam name, or -");
  }
  fp_.reset(sam_open(opts.output.c_str(), mode.c_str()));
  if (!fp_) {
    return Status::Error("can't open \"" + opts.output + "\": " + std::strerror(errno));
  }
  if (opts.threads > 0 && hts_set_threads(fp_.get(), opts.threads) != 0) {
    return Status::Error("can't start " + std::to_string(opts.threads) + " htslib threads for \"" +
                         opts.output + "\"");
  }
  if (sam_hdr_write(fp_.get(), header_) < 0) {
    return Status::Error("\"" + opts.output + "\": can't write the header");
  }
  text_bytes_ = sam_hdr_length(header_);
  bam_.reset(bam_init1());
  if (!bam_) return Status::Error("out of memory");
  return Status::Ok();
}

Status Writer::Write(const RecordFields& f, const AuxBuilder& aux) {
  bam1_t* b = bam_.get();
  const size_t n_cigar = f.cigar != nullptr ? f.cigar->size() : 0;
  if (bam_set1(b, f.name.size(), f.name.data(), f.flag, f.tid, f.pos, f.mapq, n_cigar,
               n_cigar ? f.cigar->data() : nullptr, f.mtid, f.mpos, f.tlen, f.seq.size(),
               f.seq.empty() ? nullptr : f.seq.data(), f.qual.empty() ? nullptr : f.qual.data(),
               aux.size()) < 0) {
    return Status::Error("\"" + name_ + "\": record " + std::to_string(records_ + 1) + " (read \"" +
                         std::string(f.name) + "\"): can't build record: " + std::strerror(errno));
  }
  // bam_set1 reserved aux.size() bytes after the core fields.
  std::memcpy(b->data + b->l_data, aux.data(), aux.size());
  b->l_data += static_cast<int>(aux.size());
  const int ret = sam_write1(fp_.get(), header_, b);
  if (ret < 0) {
    return Status::Error("\"" + name_ + "\": record " + std::to_string(records_ + 1) + " (read \"" +
                         std::string(f.name) + "\"): write failed");
  }
  text_bytes_ += static_cast<uint64_t>(ret);  // SAM: the line incl. '\n'
  ++records_;
  return Status::Ok();
}

Status Writer::OutputBytes(uint64_t* bytes) {
  if (!is_bam_) {
    *bytes = text_bytes_;
    return Status::Ok();
  }
  if (bgzf_flush(fp_->fp.bgzf) != 0) {
    return Status::Error("\"" + name_ + "\": write failed");
  }
  *bytes = static_cast<uint64_t>(bgzf_tell(fp_->fp.bgzf) >> 16);
  return Status::Ok();
}

Status Writer::Close() {
  bam_.reset();
  samFile* fp = fp_.release();
  if (fp != nullptr && sam_close(fp) != 0) {
    return Status::Error("\"" + name_ + "\": closing failed (disk full?)");
  }
  return Status::Ok();
}

Status BuildHeader(const Options& opts, const Reference& ref,
                   std::unique_ptr<sam_hdr_t, HeaderFreer>* out) {
  std::string text = "@HD\tVN:1.6\tSO:unsorted\n";
  for (int i = 0; i < ref.size(); ++i) {
    text += "@SQ\tSN:" + ref.name(i) + "\tLN:" + std::to_string(ref.length(i)) + "\n";
  }
  text += std::string("@RG\tID:") + kReadGroup +
          "\tSM:sim_sample\tLB:sim_lib1\tPL:ILLUMINA\tPU:FC01.1\n";
  std::unique_ptr<sam_hdr_t, HeaderFreer> h(sam_hdr_init());
  if (!h || sam_hdr_add_lines(h.get(), text.data(), text.size()) != 0 ||
      sam_hdr_add_pg(h.get(), kProgramName, "VN", kVersion, "CL", opts.command_line.c_str(),
                     nullptr) != 0) {
    return Status::Error("can't build the SAM header");
  }
  *out = std::move(h);
  return Status::Ok();
}

}  // namespace gen_reads
}  // namespace rocksort
