-- wrk reporter for bench/run.sh: one line of key=value pairs (latencies in
-- microseconds, as wrk records them).
done = function(summary, latency, requests)
  local e = summary.errors
  local errors = e.connect + e.read + e.write + e.status + e.timeout
  io.write(string.format(
    "requests=%d errors=%d seconds=%.3f rate=%.0f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f\n",
    summary.requests, errors, summary.duration / 1e6,
    (summary.requests - e.status) / (summary.duration / 1e6),
    latency:percentile(50) / 1e3, latency:percentile(99) / 1e3,
    latency:percentile(99.9) / 1e3, latency.max / 1e3))
end
