-- wrk script: POST /search rotating through the rows of the server's --queries matrix.
--   wrk -t2 -c32 -d10s --latency -s crates/server/examples/qidx.lua http://127.0.0.1:8080
-- NQ (env) is the number of query rows (default 2000).
local nq = tonumber(os.getenv("NQ") or "2000")
local counter = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

function setup(thread)
  thread:set("offset", counter * 7919)
  counter = counter + 1
end

local i = 0
function request()
  i = i + 1
  local q = ((offset or 0) + i) % nq
  return wrk.format(nil, "/search", nil, '{"qidx":' .. q .. ',"k":10}')
end
