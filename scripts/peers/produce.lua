-- wrk script of the producer load (scripts/peers/produce-load.sh): one producer per wrk thread
-- (run wrk with as many connections as threads), thread i writing to the i-th agent of AGENTS
-- (comma-separated ids, each with its run already started at Producer-Seq 0), PER events per
-- POST (64), Producer-Seq 1, 2, … At the end one line: requests, non-200 answers, resyncs.
local agents = {}
for agent in string.gmatch(os.getenv("AGENTS") or "", "[^,]+") do table.insert(agents, agent) end
local per = tonumber(os.getenv("PER") or "64")

local threads = {}
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("agent", agents[counter])
  table.insert(threads, thread)
end

local event = '{"kind":"text","message_id":"0190d0c0-0000-7000-8000-0000000000b1",'
  .. '"delta":"tok ","delta_action":"append","metadata":{"sent_at_ns":1}}'
local body
local seq = 0
bad = 0
resyncs = 0

function init(args)
  local events = {}
  for i = 1, per do events[i] = event end
  body = "[" .. table.concat(events, ",") .. "]"
end

function request()
  seq = seq + 1
  return wrk.format("POST", "/v1/agents/" .. agent .. "/produce", {
    ["content-type"] = "application/json",
    ["Producer-Id"] = "load",
    ["Producer-Epoch"] = "0",
    ["Producer-Seq"] = tostring(seq),
  }, body)
end

function response(status, headers, answer)
  local expected = status == 409 and string.match(answer, "the next seq is (%d+)")
  if expected then
    -- wrk may build a request it never sends: the server says which seq comes next.
    seq = tonumber(expected) - 1
    resyncs = resyncs + 1
  elseif status ~= 200 then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local refused, resynced = 0, 0
  for _, thread in ipairs(threads) do
    refused = refused + thread:get("bad")
    resynced = resynced + thread:get("resyncs")
  end
  io.write(string.format('{"requests":%d,"duration_us":%d,"refused":%d,"resyncs":%d,"p50_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, refused, resynced,
    latency:percentile(50), latency:percentile(99)))
end
