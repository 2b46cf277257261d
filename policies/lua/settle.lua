-- Settle one finished request exactly once: release its admission's reservation, book the spend
-- (integer micro-USD, day and month) and the per-tier usage of the day, and correct the token
-- buckets from what admission charged to the real usage. A request that was served nothing
-- (no worker answered) books no spend and no usage, but still releases and corrects.
-- KEYS: 1 settled marker, 2 spend day, 3 spend month, 4 usage day hash, 5 tenant tpm bucket, 6 key tpm bucket,
--       7 reservation expiries (zset), 8 reservation amounts (hash, '#total'), 9 usage by tag of the day (hash)
-- ARGV: 1 marker ttl s, 2 cost micro, 3 tier, 4 prompt tokens, 5 completion tokens,
--       6 token correction (real - charged), 7 tenant tpm, 8 key tpm (0 = none), 9 day ttl s, 10 month ttl s,
--       11 settle token (unique per settle call), 12 reservation id ('' = none),
--       13 the request's tags, comma-separated ('' = none; a tag never holds a comma)
-- Returns {1, day_spend, month_spend, token} when counted, {0, day_spend, month_spend, marker} for a
-- duplicate; the marker holds the token of the call that counted it, so a client whose reply was
-- lost and whose retry lands here learns that its own first attempt did count.
local WINDOW_MS = 60000
if ARGV[12] ~= '' then  -- releasing twice is harmless: the amount is gone after the first
  local amount = redis.call('HGET', KEYS[8], ARGV[12])
  if amount then
    redis.call('HDEL', KEYS[8], ARGV[12])
    redis.call('HINCRBY', KEYS[8], '#total', -tonumber(amount))
    redis.call('ZREM', KEYS[7], ARGV[12])
  end
end
if not redis.call('SET', KEYS[1], ARGV[11], 'NX', 'EX', ARGV[1]) then
  return {0, tonumber(redis.call('GET', KEYS[2]) or '0'), tonumber(redis.call('GET', KEYS[3]) or '0'),
          redis.call('GET', KEYS[1]) or ''}
end
local day, month
if tonumber(ARGV[4]) + tonumber(ARGV[5]) > 0 then
  local cost = ARGV[2]
  day = redis.call('INCRBY', KEYS[2], cost)
  redis.call('EXPIRE', KEYS[2], ARGV[9])
  month = redis.call('INCRBY', KEYS[3], cost)
  redis.call('EXPIRE', KEYS[3], ARGV[10])
  local tier = ARGV[3]
  redis.call('HINCRBY', KEYS[4], tier .. ':requests', 1)
  redis.call('HINCRBY', KEYS[4], tier .. ':prompt_tokens', ARGV[4])
  redis.call('HINCRBY', KEYS[4], tier .. ':completion_tokens', ARGV[5])
  redis.call('HINCRBY', KEYS[4], tier .. ':cost_micro', cost)
  redis.call('EXPIRE', KEYS[4], ARGV[9])
  if ARGV[13] ~= '' then
    for tag in string.gmatch(ARGV[13], '[^,]+') do
      redis.call('HINCRBY', KEYS[9], tag .. ':requests', 1)
      redis.call('HINCRBY', KEYS[9], tag .. ':prompt_tokens', ARGV[4])
      redis.call('HINCRBY', KEYS[9], tag .. ':completion_tokens', ARGV[5])
      redis.call('HINCRBY', KEYS[9], tag .. ':cost_micro', cost)
    end
    redis.call('EXPIRE', KEYS[9], ARGV[9])
  end
else
  day = tonumber(redis.call('GET', KEYS[2]) or '0')
  month = tonumber(redis.call('GET', KEYS[3]) or '0')
end

local correction = tonumber(ARGV[6])
if correction ~= 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local limits, keys = {tonumber(ARGV[7]), tonumber(ARGV[8])}, {KEYS[5], KEYS[6]}
  for i = 1, 2 do
    if limits[i] > 0 then
      local v = redis.call('HMGET', keys[i], 'tokens', 'ts')
      local tokens, ts = tonumber(v[1]) or limits[i], tonumber(v[2]) or now
      tokens = math.min(limits[i], tokens + math.max(0, now - ts) * limits[i] / WINDOW_MS)
      local left = math.min(limits[i], tokens - correction)
      redis.call('HSET', keys[i], 'tokens', tostring(left), 'ts', now)
      redis.call('PEXPIRE', keys[i], WINDOW_MS + math.ceil(math.max(0, -left) * WINDOW_MS / limits[i]))
    end
  end
end
return {1, day, month, ARGV[11]}
