-- wrk script of the wire-speed bench (server/examples/peers): JSON appends over STREAMS streams
-- at PREFIX0, PREFIX1, … (created beforehand), PER_APPEND messages of ~45 bytes per POST. Every
-- message is unique (thread, counter, index), so the read-back can tell a duplicate from a loss.
-- At the end one JSON line: requests, non-2xx answers, socket errors, latency percentiles.
local prefix = os.getenv("PREFIX")
local streams = tonumber(os.getenv("STREAMS") or "64")
local per_append = tonumber(os.getenv("PER_APPEND") or "1")

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  counter = 0
  headers = { ["Content-Type"] = "application/json" }
end

local function message(n, k)
  return string.format('{"t":%d,"n":%d,"k":%d,"text":"a token"}', id, n, k)
end

function request()
  counter = counter + 1
  local stream = (counter * 7 + id * 31) % streams
  local body
  if per_append == 1 then
    body = message(counter, 0)
  else
    local parts = {}
    for k = 1, per_append do parts[k] = message(counter, k) end
    body = "[" .. table.concat(parts, ",") .. "]"
  end
  return wrk.format("POST", prefix .. stream, headers, body)
end

function done(summary, latency, requests)
  local errors = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"non2xx":%d,"socket_errors":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
