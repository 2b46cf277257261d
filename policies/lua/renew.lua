-- Renew the reservations of requests still running, so a stream or a long answer holds its share
-- of the hard budgets for as long as it runs (a gateway that crashed stops renewing: they expire).
-- Only reservations still held are renewed; a settled (released) one is not brought back.
-- KEYS: pairs of (reservation expiries zset id -> expiry ms, reservation amounts hash id -> micro-USD):
--       the tenant's, then the key's own when it has budgets
-- ARGV: 1 ttl ms, 2.. reservation ids
-- Returns how many were renewed (each id counted once, whoever holds it).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  local held = false
  for k = 1, #KEYS, 2 do
    if redis.call('HEXISTS', KEYS[k + 1], ARGV[i]) == 1 then
      redis.call('ZADD', KEYS[k], 'XX', now + ttl, ARGV[i])
      held = true
    end
  end
  if held then renewed = renewed + 1 end
end
if renewed > 0 then
  for k = 1, #KEYS do
    if redis.call('PTTL', KEYS[k]) < ttl then redis.call('PEXPIRE', KEYS[k], ttl) end
  end
end
return renewed
