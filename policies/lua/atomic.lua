-- Several commands as one, on any kind of Redis (one server, Sentinel, Cluster): what MULTI/EXEC
-- would do, without redis-py's Cluster transaction (policies/atomic.py says why).
-- KEYS: every key the commands touch (one Cluster slot: they share a hash tag); they route the call.
-- ARGV: the commands one after another, each as its word count then its words.
-- Returns each command's reply, in order.
local replies, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  replies[#replies + 1] = redis.call(unpack(ARGV, i + 1, i + n))
  i = i + n + 1
end
return replies
