# The retry storm, sourced by scripts/bench (its server, session, wrk_run and rows): the
# BENCH_STORM_KEYS (10,000) keys a client had answered but lost (made first, untimed), sent
# again from 64 connections while 16 make new keys; beside the same new keys alone. A repeat
# of a completed key is answered from the answer cache: the figures are how many the
# database answered instead, the database's transactions beside the new keys' own, and the
# new keys' latency with and without the storm.
storm_keys="${BENCH_STORM_KEYS:-10000}"
storm="storm-$run"
rss_kib() { awk '/VmRSS/ { print $2 }' "/proc/$server/status"; }
cache_bytes_before=$(curl -sf -H "Authorization: Bearer $metrics_token" "$base/metrics" | awk '$1 == "once_answer_cache_bytes" { print $2 }')
rss_before=$(rss_kib)
echo "  making the retry storm's $storm_keys keys (untimed)"
storm_made() {
  psql_db -c "SELECT count(*) FROM idempotency_keys WHERE key LIKE '$storm-%' AND state = 'completed'"
}
until [ "$(storm_made)" -ge "$storm_keys" ]; do
  wrk -t1 -c16 -d5s -H "Cookie: once_session=$cookie" -s scripts/bench.d/orders.lua \
    "$base/api/orders" -- cycle "$storm" "$storm_keys" >/dev/null
done
metric() {
  curl -sf -H "Authorization: Bearer $metrics_token" "$base/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}
# Transactions of the shop's database, settled (the statistics are flushed within a second).
xacts() {
  sleep 1.2
  psql_db -c "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
}
count_of() { sed -n 's/^RESULT requests=\([0-9]*\).*/\1/p' <<<"$1"; }

x0=$(xacts)
wrk_run "new key alone, 16 conn" 16 new "$run-calm"; fig[calm_new]="$rate $p50 $p99 $bad"
calm_requests=$(awk -v r="$rate" -v s="$secs" 'BEGIN { printf "%.0f", r * s }')
x1=$(xacts)
replays0=$(metric once_idempotency_replays_total) remembered0=$(metric once_idempotency_remembered_total)
wrk -t1 -c64 -d"${secs}s" -H "Cookie: once_session=$cookie" -s scripts/bench.d/orders.lua \
  "$base/api/orders" -- cycle "$storm" "$storm_keys" replay >"$tmp/storm.out" &
storm_wrk=$!
wrk_run "new key during the storm, 16 conn" 16 new "$run-storm"; fig[storm_new]="$rate $p50 $p99 $bad"
storm_new_requests=$(awk -v r="$rate" -v s="$secs" 'BEGIN { printf "%.0f", r * s }')
wait "$storm_wrk"
x2=$(xacts)
replays1=$(metric once_idempotency_replays_total) remembered1=$(metric once_idempotency_remembered_total)
out=$(cat "$tmp/storm.out")
read -r requests seconds p50 p99 non2xx socket unexpected \
  < <(sed -n 's/^RESULT //p' <<<"$out" | tr ' ' '\n' | cut -d= -f2 | xargs)
rate=$(awk -v n="$requests" -v s="$seconds" 'BEGIN { print n / s }')
bad=$((unexpected + socket))
report "retry storm: repeats, 64 conn" req
rows+=("retry storm: $storm_keys keys repeated, 64 conn|$(fmt "$rate" "$p50" "$p99")|-|-|-|-|$bad")
from_table=$(( (replays1 - replays0) - (remembered1 - remembered0) ))
rows+=("retry storm: repeats the database answered|$from_table of $((replays1 - replays0))|-|-|0|$([ "$from_table" = 0 ] && echo yes || echo NO)|-")
# The database's transactions per second, and those the new keys make alone at the rate
# they ran during the storm: the difference is the storm's.
per_key=$(awk -v d="$((x1 - x0))" -v n="$calm_requests" 'BEGIN { printf "%.2f", d / n }')
storm_tx=$(awk -v d="$((x2 - x1))" -v n="$storm_new_requests" -v k="$per_key" -v s="$secs" \
  'BEGIN { printf "%.0f", (d - n * k) / s }')
rows+=("retry storm: database transactions/s|$(( (x2 - x1) / secs ))/s, of which the new keys' $(awk -v n="$storm_new_requests" -v k="$per_key" -v s="$secs" 'BEGIN { printf "%.0f", n * k / s }')/s ($per_key each)|-|-|-|-|-")
rows+=("retry storm: transactions/s beyond the new keys'|$storm_tx/s (the journal's repeat notes: up to 10/s)|-|-|-|-|-")
read -r _ calm_p50 calm_p99 _ <<<"${fig[calm_new]}"
read -r storm_rate storm_p50 storm_p99 _ <<<"${fig[storm_new]}"
rows+=("new keys alone / during the storm, 16 conn|$(fmt ${fig[calm_new]% *}) / $(fmt ${fig[storm_new]% *})|-|-|-|-|-")
# Memory: what the storm's answers cost the process, and that cost for a full cache
# (ANSWER_CACHE_BYTES, 64 MiB by default), at the same resident bytes per weighed byte.
cache_bytes=$(metric once_answer_cache_bytes) rss_after=$(rss_kib)
rows+=("answer cache after the storm|$(metric once_answer_cache_entries) answers, $(awk -v b="$cache_bytes" 'BEGIN { printf "%.1f", b / 1048576 }') MiB weighed; RSS $((rss_before / 1024)) → $((rss_after / 1024)) MiB|-|-|-|-|-")
rows+=("server memory with a full cache (64 MiB weighed), projected|$(awk -v a="$rss_after" -v b="$rss_before" -v w="$((cache_bytes - cache_bytes_before))" -v now="$cache_bytes" \
  'BEGIN { per = (a - b) * 1024 / w; printf "%.0f MiB (%.2f resident bytes per weighed byte)", (a * 1024 + (67108864 - now) * per) / 1048576, per }')|-|-|-|-|-")
