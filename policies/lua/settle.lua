-- Settle one finished request exactly once: release its admission's reservation (the tenant's and
-- its key's), book the spend (integer micro-USD: day, week and month, of the tenant and of its key)
-- and the per-tier usage of the day, and correct the token buckets from what admission charged to the
-- real usage. A request that was served nothing (no worker answered) books no spend and no usage, but
-- still releases and corrects.
-- KEYS: 1 settled marker, 2 spend day, 3 spend month, 4 usage day hash, 5 tenant tpm bucket, 6 key tpm bucket,
--       7 reservation expiries (zset), 8 reservation amounts (hash, '#total'), 9 usage by tag of the day (hash),
--       10 spend week, 11-13 the key's spend day, week, month (only with ARGV 15 '1'), 14-15 the key's
--       reservation expiries and amounts (only when the key holds a hard budget of its own)
-- ARGV: 1 marker ttl s, 2 cost micro, 3 tier, 4 prompt tokens, 5 completion tokens,
--       6 token correction (real - charged), 7 tenant tpm, 8 key tpm (0 = none), 9 day ttl s, 10 month ttl s,
--       11 settle token (unique per settle call), 12 reservation id ('' = none),
--       13 the request's tags, comma-separated ('' = none; a tag never holds a comma), 14 week ttl s,
--       15 book the key's own spend (1: the request came with a key; 0: anonymous)
-- Returns {1, day, month, token, week, key day, key week, key month} when counted, {0, ..., marker, ...}
-- for a duplicate; the marker holds the token of the call that counted it, so a client whose reply was
-- lost and whose retry lands here learns that its own first attempt did count.
local WINDOW_MS = 60000
local function release(zset, hash)  -- releasing twice is harmless: the amount is gone after the first
  local amount = redis.call('HGET', hash, ARGV[12])
  if amount then
    redis.call('HDEL', hash, ARGV[12])
    redis.call('HINCRBY', hash, '#total', -tonumber(amount))
    redis.call('ZREM', zset, ARGV[12])
  end
end
if ARGV[12] ~= '' then
  release(KEYS[7], KEYS[8])
  if KEYS[15] then release(KEYS[14], KEYS[15]) end
end
local owners = (ARGV[15] == '1') and 6 or 3  -- the tenant's spend keys, then the key's own
local spend = {KEYS[2], KEYS[10], KEYS[3], KEYS[11], KEYS[12], KEYS[13]}
local ttls = {ARGV[9], ARGV[14], ARGV[10], ARGV[9], ARGV[14], ARGV[10]}
local function reply(first, values)  -- in the order Returns names; a key not booked reads 0
  return {first, values[1], values[3], '', values[2], values[4] or 0, values[5] or 0, values[6] or 0}
end
local function read_spend()
  local values = {}
  for i = 1, owners do values[i] = tonumber(redis.call('GET', spend[i]) or '0') end
  return values
end
if not redis.call('SET', KEYS[1], ARGV[11], 'NX', 'EX', ARGV[1]) then
  local dup = reply(0, read_spend())
  dup[4] = redis.call('GET', KEYS[1]) or ''
  return dup
end
-- a key's TTL is set when a write creates it (every writer sets one), not refreshed on each write
local values
if tonumber(ARGV[4]) + tonumber(ARGV[5]) > 0 then
  local cost = tonumber(ARGV[2])
  values = {}
  for i = 1, owners do
    values[i] = redis.call('INCRBY', spend[i], cost)
    if values[i] == cost then redis.call('EXPIRE', spend[i], ttls[i]) end
  end
  local tier = ARGV[3]
  if redis.call('HINCRBY', KEYS[4], tier .. ':requests', 1) == 1 then redis.call('EXPIRE', KEYS[4], ARGV[9]) end
  redis.call('HINCRBY', KEYS[4], tier .. ':prompt_tokens', ARGV[4])
  redis.call('HINCRBY', KEYS[4], tier .. ':completion_tokens', ARGV[5])
  redis.call('HINCRBY', KEYS[4], tier .. ':cost_micro', cost)
  if ARGV[13] ~= '' then
    local created = false
    for tag in string.gmatch(ARGV[13], '[^,]+') do
      created = redis.call('HINCRBY', KEYS[9], tag .. ':requests', 1) == 1 or created
      redis.call('HINCRBY', KEYS[9], tag .. ':prompt_tokens', ARGV[4])
      redis.call('HINCRBY', KEYS[9], tag .. ':completion_tokens', ARGV[5])
      redis.call('HINCRBY', KEYS[9], tag .. ':cost_micro', cost)
    end
    if created then redis.call('EXPIRE', KEYS[9], ARGV[9]) end
  end
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
local counted = reply(1, values or read_spend())
counted[4] = ARGV[11]
return counted
