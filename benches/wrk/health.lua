-- wrk -t1 -c64 -d10s -s benches/wrk/health.lua http://127.0.0.1:8080 (the baseline of get.lua)
request = function()
  return wrk.format("GET", "/healthz", {["Accept"] = "application/json"})
end
