-- Create one budget alert unless it exists: the first settle on any replica to reach the
-- threshold wins, every other finds the marker. A new alert is listed, and queued for delivery
-- when a webhook is configured.
-- KEYS: 1 the alert's marker, 2 records (hash id -> JSON), 3 due deliveries (zset id -> ms), 4 index (zset id -> ms)
-- ARGV: 1 alert id, 2 record JSON, 3 marker ttl s, 4 queue for delivery (1/0), 5 records kept
-- Returns 1 when this call created it, 0 when it existed.
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[3]) then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[4], now, ARGV[1])
if ARGV[4] == '1' then
  redis.call('ZADD', KEYS[3], now, ARGV[1])
end
local keep = tonumber(ARGV[5])
local old = redis.call('ZRANGE', KEYS[4], 0, -(keep + 1))
for _, id in ipairs(old) do
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
end
if #old > 0 then redis.call('ZREMRANGEBYRANK', KEYS[4], 0, #old - 1) end
return 1
