-- Claim due deliveries for one replica: each is pushed back by the lease, so another replica
-- takes it only if this one neither records an outcome nor survives the lease.
-- KEYS: 1 due deliveries (zset id -> ms), 2 records (hash)
-- ARGV: 1 lease ms, 2 most to claim
-- Returns {id, record, id, record, ...}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(ids) do
  local record = redis.call('HGET', KEYS[2], id)
  if record then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), id)
    table.insert(out, id)
    table.insert(out, record)
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
