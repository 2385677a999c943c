-- wrk script for POST /api/orders (scripts/bench). Arguments after `--`:
--   new <nonce>      every request carries a key never used before: <nonce>-<thread>-<n>. The
--                    nonce is per run and the thread id comes from setup(), because LuaJIT's
--                    math.random is not seeded per thread: two threads would draw the same keys.
--   replay <key>     every request repeats <key>, which the server has already completed.
--   cycle <nonce> <count> [replay]   keys <nonce>-<thread>-1 .. <count>, over and over: the
--                    first pass makes them (the retry storm's keys), the next ones repeat them;
--                    with `replay` every answer must be a replay.
-- The session cookie and the JSON body come from wrk's -H and from here. Every answer must be
-- a 201 (with `idempotent-replayed: true` for replays); any other one is counted and printed
-- by done() on a RESULT line that scripts/bench reads.

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("id", #threads)
end

wrk.method = "POST"
wrk.body = '{"items":[{"sku":"MUG-001","quantity":1}],"email":"ada@example.com",'
  .. '"shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH",'
  .. '"city":"London","country":"GB"}}'
wrk.headers["Content-Type"] = "application/json"

function init(args)
  mode = args[1]
  unexpected = 0
  args_replay = args[4] == "replay"
  if mode == "replay" then
    -- One fixed request: wrk sends the same bytes each time (no Lua per request).
    wrk.headers["Idempotency-Key"] = args[2]
    return
  end
  -- A request is prefix .. key .. suffix: cut once from wrk.format around a marker, so each
  -- request costs one string concatenation instead of a full wrk.format.
  -- (wrk.format takes a headers table instead of wrk.headers, not on top of it: copy them.)
  local marker = "@KEY@"
  local headers = { ["Idempotency-Key"] = marker }
  for name, value in pairs(wrk.headers) do headers[name] = value end
  local template = wrk.format(nil, nil, headers)
  local at = string.find(template, marker, 1, true)
  local prefix = string.sub(template, 1, at - 1) .. args[2] .. "-" .. id .. "-"
  local suffix = string.sub(template, at + #marker)
  local n = 0
  local count = tonumber(args[3] or "0")
  request = function()
    n = n + 1
    if mode == "cycle" and n > count then n = 1 end
    return prefix .. n .. suffix
  end
end

function response(status, headers)
  local replayed = headers["idempotent-replayed"] == "true"
  local bad_replay = replayed ~= (mode == "replay")
  if mode == "cycle" then bad_replay = args_replay and not replayed end
  if status ~= 201 or bad_replay then
    unexpected = unexpected + 1
  end
end

function done(summary, latency)
  local unexpected = 0
  for _, thread in ipairs(threads) do
    unexpected = unexpected + thread:get("unexpected")
  end
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d seconds=%.3f p50_ms=%.2f p99_ms=%.2f non2xx=%d socket_errors=%d unexpected=%d\n",
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, e.status, e.connect + e.read + e.write + e.timeout, unexpected))
end
