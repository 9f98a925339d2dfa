-- wrk -t1 -c64 -d10s -s benches/wrk/get.lua http://127.0.0.1:8080
-- Random 1-cell GETs of PE's TestTable (10,000 rows, 26-digit keys), as kura-load -w random-read.
math.randomseed(os.time())
request = function()
  local k = string.format("%026d", math.random(0, 9999))
  return wrk.format("GET", "/TestTable/" .. k .. "/info:0", {["Accept"] = "application/json"})
end
