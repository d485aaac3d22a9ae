// SortReport's two renderings, -v text and --stats-json, of the same facts.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "pipeline/pipeline.h"

namespace rocksort::pipeline {
namespace {

// A JSON string literal (the report's strings are paths and plain text).
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

double SortReport::phase_seconds(Phase phase) const {
  for (const PhaseReport& p : phases) {
    if (p.phase == phase) return p.seconds;
  }
  return 0;
}

std::string SortReport::ToText() const {
  const store::StoreReport& s = store;
  std::string text = absl::StrFormat(
      "rocksort: %d records, %d bytes uncompressed (planned with %d: %s), %d bytes written\n"
      "rocksort: runs flushed %d (%d bytes), compactions %d (%d bytes, write amplification "
      "%.2f), runs after loading %s, intermediate merges %d (%d bytes), runs at final merge %d "
      "(+%d memtables read from memory, readahead %d KiB, %d indexes read then), peak temp %d "
      "bytes (%d released behind the final merge)\n"
      "rocksort: load %.2f s, merge %.2f s, emit %.2f s\n"
      "rocksort: loading thread: reading %.2f s, writing %.2f s (memtable stalls included), "
      "waiting for merges %.2f s\n",
      records, record_bytes, size_hint, size_hint_source, output_bytes, s.runs_flushed,
      s.flush_bytes, s.compactions, s.compaction_bytes, s.write_amplification(),
      absl::StrJoin(s.runs_after_load_per_lane, "+"), s.intermediate_merges,
      s.intermediate_merge_bytes, s.runs_merged(), s.memtables_at_final_merge,
      s.final_readahead / 1024, s.final_index_reads, s.peak_temp_bytes, s.released_bytes,
      phase_seconds(Phase::kLoad), phase_seconds(Phase::kMerge), phase_seconds(Phase::kEmit),
      read_seconds, s.write_seconds, s.merge_wait_seconds);
  if (!s.cache_room_source.empty()) {
    absl::StrAppendFormat(&text,
                          "rocksort: page cache room at the final merge %d MiB (%s); cached "
                          "pages of %d runs dropped\n",
                          s.cache_room_bytes >> 20, s.cache_room_source, s.runs_dropped_from_cache);
  }
  if (emit_waits.has_value()) {
    absl::StrAppendFormat(&text,
                          "rocksort: emit: compressors waited %.2f s for records (summed over "
                          "them), the final merge %.2f s for the compressors and %.2f s for "
                          "the disk (%d block reads not prefetched in time)\n",
                          emit_waits->compressors_idle_seconds, emit_waits->caller_blocked_seconds,
                          s.final_stalled_seconds, s.final_stalled_reads);
  }
  // How busy each kind of thread was: CPU seconds, and per thread the share
  // of the phase's wall time.
  for (const PhaseReport& p : phases) {
    std::vector<std::string> groups;
    for (const ThreadUsage& t : p.threads) {
      if (t.threads == 0) {  // Ended threads: their number is not known.
        groups.push_back(absl::StrFormat("%s %.1f s", t.group, t.cpu_seconds));
        continue;
      }
      const double busy = p.seconds > 0 ? 100 * t.cpu_seconds / p.seconds / t.threads : 0;
      groups.push_back(t.threads == 1
                           ? absl::StrFormat("%s %.1f s (%.0f%%)", t.group, t.cpu_seconds, busy)
                           : absl::StrFormat("%s x%d %.1f s (%.0f%% each)", t.group, t.threads,
                                             t.cpu_seconds, busy));
    }
    absl::StrAppendFormat(&text, "rocksort: %s: peak RSS so far %.1f MiB; threads: %s\n",
                          PhaseName(p.phase), p.peak_rss_bytes / 1048576.0,
                          groups.empty() ? "-" : absl::StrJoin(groups, ", "));
  }
  absl::StrAppendFormat(&text, "rocksort: real time %.2f s, CPU %.2f s, peak RSS %.1f MiB\n",
                        wall_seconds, cpu_seconds, peak_rss_bytes / 1048576.0);
  return text;
}

std::string SortReport::ToJson() const {
  const store::StoreReport& s = store;
  std::vector<std::string> phase_items;
  for (const PhaseReport& p : phases) {
    std::vector<std::string> groups;
    for (const ThreadUsage& t : p.threads) {
      groups.push_back(absl::StrFormat("{\"group\": %s, \"threads\": %d, \"cpu_seconds\": %.3f}",
                                       Quote(t.group), t.threads, t.cpu_seconds));
    }
    phase_items.push_back(absl::StrFormat(
        "    {\"phase\": \"%s\", \"seconds\": %.3f, \"peak_rss_bytes\": %d, \"threads\": [%s]}",
        PhaseName(p.phase), p.seconds, p.peak_rss_bytes, absl::StrJoin(groups, ", ")));
  }
  return absl::StrFormat(
      "{\n"
      "  \"order\": %s,\n"
      "  \"records\": %d,\n  \"uncompressed_bytes\": %d,\n  \"size_hint_bytes\": %d,\n"
      "  \"size_hint_source\": %s,\n  \"output_bytes\": %d,\n"
      "  \"disk_profile\": \"%s\",\n  \"disk_request_bytes\": %d,\n"
      "  \"memory_budget_bytes\": %d,\n  \"temp_dir\": %s,\n"
      "  \"lanes\": %d,\n  \"compaction_mode\": %s,\n"
      "  \"adaptive_compaction_started\": %s,\n"
      "  \"runs_flushed\": %d,\n  \"flush_bytes\": %d,\n  \"compactions\": %d,\n"
      "  \"compaction_bytes\": %d,\n  \"write_amplification\": %.3f,\n"
      "  \"runs_after_load_per_lane\": [%s],\n"
      "  \"intermediate_merges\": %d,\n  \"intermediate_merge_bytes\": %d,\n"
      "  \"runs_at_final_merge\": %d,\n"
      "  \"runs_at_final_merge_per_lane\": [%s],\n"
      "  \"memtables_at_final_merge\": %d,\n"
      "  \"final_readahead_bytes\": %d,\n  \"final_index_reads\": %d,\n"
      "  \"peak_temp_bytes\": %d,\n"
      "  \"released_bytes\": %d,\n"
      "  \"cache_room_bytes\": %d,\n  \"cache_room_source\": %s,\n"
      "  \"runs_dropped_from_cache\": %d,\n"
      "  \"run_compression_choice\": %s,\n"
      "  \"load_seconds\": %.3f,\n  \"merge_seconds\": %.3f,\n  \"emit_seconds\": %.3f,\n"
      "  \"loader_read_seconds\": %.3f,\n  \"loader_write_seconds\": %.3f,\n"
      "  \"loader_merge_wait_seconds\": %.3f,\n"
      "  \"compressors_idle_seconds\": %s,\n  \"final_merge_blocked_seconds\": %s,\n"
      "  \"final_merge_stalled_reads\": %d,\n  \"final_merge_stalled_seconds\": %.3f,\n"
      "  \"phases\": [\n%s\n  ],\n"
      "  \"wall_seconds\": %.3f,\n  \"cpu_seconds\": %.3f,\n  \"peak_rss_bytes\": %d\n"
      "}\n",
      Quote(order), records, record_bytes, size_hint, Quote(size_hint_source), output_bytes,
      disk == DiskKind::kHdd ? "hdd" : "ssd", disk_request_bytes, memory_budget, Quote(temp_dir),
      s.lanes, Quote(s.compaction_mode), s.adaptive_compaction_started ? "true" : "false",
      s.runs_flushed, s.flush_bytes, s.compactions, s.compaction_bytes, s.write_amplification(),
      absl::StrJoin(s.runs_after_load_per_lane, ", "), s.intermediate_merges,
      s.intermediate_merge_bytes, s.runs_merged(), absl::StrJoin(s.runs_merged_per_lane, ", "),
      s.memtables_at_final_merge, s.final_readahead, s.final_index_reads, s.peak_temp_bytes,
      s.released_bytes, s.cache_room_bytes, Quote(s.cache_room_source), s.runs_dropped_from_cache,
      Quote(s.run_compression_choice), phase_seconds(Phase::kLoad), phase_seconds(Phase::kMerge), phase_seconds(Phase::kEmit),
      read_seconds, s.write_seconds, s.merge_wait_seconds,
      emit_waits ? absl::StrFormat("%.3f", emit_waits->compressors_idle_seconds) : "null",
      emit_waits ? absl::StrFormat("%.3f", emit_waits->caller_blocked_seconds) : "null",
      s.final_stalled_reads, s.final_stalled_seconds, absl::StrJoin(phase_items, ",\n"),
      wall_seconds, cpu_seconds, peak_rss_bytes);
}

}  // namespace rocksort::pipeline
