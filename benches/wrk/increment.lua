-- wrk -t1 -c64 -d10s -s benches/wrk/increment.lua http://127.0.0.1:8080
-- Increments of 1,000 counters picked uniformly, as kura-load -w increment sends them:
-- `PUT /TestTable/{key}?check=increment` of `info:counter` by 1 (create TestTable with family
-- `info` first). The server's durability decides when each is acknowledged.
local b64chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
local function b64(data)
  return ((data:gsub('.', function(x)
    local r, b = '', x:byte()
    for i = 8, 1, -1 do r = r .. (b % 2 ^ i - b % 2 ^ (i - 1) > 0 and '1' or '0') end
    return r
  end) .. '0000'):gsub('%d%d%d?%d?%d?%d?', function(x)
    if (#x < 6) then return '' end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == '1' and 2 ^ (6 - i) or 0) end
    return b64chars:sub(c + 1, c + 1)
  end) .. ({ '', '==', '=' })[#data % 3 + 1])
end
local reqs = {}
init = function(args)
  local col = b64(args[1] or "info:counter")
  for i = 0, 999 do
    local k = string.format("%026d", i)
    local body = '{"Row":[{"key":"' .. b64(k) .. '","Cell":[{"column":"' .. col .. '","$":"' .. b64("1") .. '"}]}]}'
    reqs[i] = wrk.format("PUT", "/TestTable/" .. k .. "?check=increment",
      {["Content-Type"] = "application/json", ["Accept"] = "application/json"}, body)
  end
end
math.randomseed(os.time())
request = function()
  return reqs[math.random(0, 999)]
end
