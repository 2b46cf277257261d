-- Admit one request atomically: hard budgets (the tenant's and the key's own) against settled spend
-- plus live reservations, then request windows and token buckets for the tenant and (optionally) the
-- key. Either everything is charged and reserved or nothing is.
-- The same call run again (redis-py resends a command whose reply was lost to a dropped connection or
-- a timeout) finds its member's marker and answers "admitted" without charging anything twice.
-- KEYS: 1 tenant rpm log, 2 tenant tpm bucket, 3 key rpm log, 4 key tpm bucket, 5 spend day, 6 spend month,
--       7 reservation expiries (zset id -> expiry ms), 8 reservation amounts (hash id -> micro-USD, '#total'),
--       9 this member's admitted marker, 10 spend week, 11-13 the key's spend day, week, month,
--       14-15 the key's reservation expiries and amounts
-- ARGV: 1 member (unique per admit), 2 tokens to charge (prompt + n x max_tokens), 3 tenant rpm, 4 tenant tpm,
--       5 key rpm, 6 key tpm (0 = no limit), 7 daily hard, 8 monthly hard (micro-USD, -1 = none),
--       9 reservation id ('' = reserve nothing), 10 worst-case cost micro-USD, 11 reservation ttl ms,
--       12 admitted marker ttl ms, 13 weekly hard, 14-16 the key's daily, weekly, monthly hard (-1 = none),
--       17 '1' when the key has budgets of its own (absent, with KEYS 11-15 and ARGV 14-16, when it has none:
--       the key's spend is then neither read nor held, and 0s are returned for it)
-- Returns {status, retry_after_ms, day_spend, month_spend, what, week_spend, key day, key week, key month};
-- status 0 ok, 1 rate limited, 2 budget (retry_after_ms 0 for a budget: it is spent until it resets; else
-- live reservations may free it sooner). `what` names the limit: daily, ..., key_daily, ...
local WINDOW_MS = 60000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function spent(key) return tonumber(redis.call('GET', key) or '0') end
local day, week, month = spent(KEYS[5]), spent(KEYS[10]), spent(KEYS[6])
local keyed = ARGV[17] == '1'  -- the key has budgets of its own: read (and hold) them; else KEYS 11-15 are absent
local kday, kweek, kmonth = 0, 0, 0
if keyed then kday, kweek, kmonth = spent(KEYS[11]), spent(KEYS[12]), spent(KEYS[13]) end
local function reply(status, wait, what)
  return {status, wait, day, month, what, week, kday, kweek, kmonth}
end
if redis.call('EXISTS', KEYS[9]) == 1 then return reply(0, 0, '') end
local cost = tonumber(ARGV[10])
local owners = {  -- the tenant's budgets, then the key's own
  {prefix = '', zset = KEYS[7], hash = KEYS[8], spent = {day, week, month},
   hard = {tonumber(ARGV[7]), tonumber(ARGV[13]), tonumber(ARGV[8])}}}
if keyed then
  owners[2] = {prefix = 'key_', zset = KEYS[14], hash = KEYS[15], spent = {kday, kweek, kmonth},
               hard = {tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])}}
end
local periods = {'daily', 'weekly', 'monthly'}

-- reservations of gateways that never settled them (crashed) stop counting at their expiry
local function live_reserved(zset, hash)
  local expired = redis.call('ZRANGEBYSCORE', zset, '-inf', now)
  for _, id in ipairs(expired) do
    local amount = redis.call('HGET', hash, id)
    if amount then
      redis.call('HDEL', hash, id)
      redis.call('HINCRBY', hash, '#total', -tonumber(amount))
    end
  end
  if #expired > 0 then redis.call('ZREMRANGEBYSCORE', zset, '-inf', now) end
  return tonumber(redis.call('HGET', hash, '#total') or '0')
end
for _, o in ipairs(owners) do
  o.holds = o.hard[1] >= 0 or o.hard[2] >= 0 or o.hard[3] >= 0
  if o.holds then
    local reserved = live_reserved(o.zset, o.hash)
    for i, hard in ipairs(o.hard) do
      local s = o.spent[i]
      if hard >= 0 and (s >= hard or s + reserved + cost > hard) then
        -- 0: spent until it resets; else only requests in flight stand in the way and may leave room
        local wait = (s >= hard or s + cost > hard) and 0 or 1000
        return reply(2, wait, o.prefix .. periods[i])
      end
    end
  end
end

-- sliding one-minute log of admitted requests: exact, and the oldest entry says when a slot frees
local function window_wait(key, limit)
  if limit <= 0 then return 0 end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - WINDOW_MS)
  if redis.call('ZCARD', key) < limit then return 0 end
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) + WINDOW_MS - now)
end

-- token bucket refilled at limit/minute, capacity one minute's worth; may be negative (debt)
local function bucket_level(key, limit)
  local v = redis.call('HMGET', key, 'tokens', 'ts')
  local tokens, ts = tonumber(v[1]) or limit, tonumber(v[2]) or now
  return math.min(limit, tokens + math.max(0, now - ts) * limit / WINDOW_MS)
end

local charge = tonumber(ARGV[2])
local rpm = {tonumber(ARGV[3]), tonumber(ARGV[5])}
local tpm = {tonumber(ARGV[4]), tonumber(ARGV[6])}
local rpm_keys, tpm_keys = {KEYS[1], KEYS[3]}, {KEYS[2], KEYS[4]}
local names = {'tenant', 'key'}
local wait, what = 0, ''
local levels = {}
for i = 1, 2 do
  local w = window_wait(rpm_keys[i], rpm[i])
  if w > wait then wait, what = w, names[i] .. '_requests_per_minute' end
  if tpm[i] > 0 then
    local level = bucket_level(tpm_keys[i], tpm[i])
    local need = math.min(charge, tpm[i])  -- a request bigger than the bucket passes when it is full
    levels[i] = level
    if level < need then
      local w2 = math.ceil((need - level) * WINDOW_MS / tpm[i])
      if w2 > wait then wait, what = w2, names[i] .. '_tokens_per_minute' end
    end
  end
end
if wait > 0 then return reply(1, wait, what) end

for i = 1, 2 do
  if rpm[i] > 0 then
    redis.call('ZADD', rpm_keys[i], now, ARGV[1])
    redis.call('PEXPIRE', rpm_keys[i], WINDOW_MS)
  end
  if tpm[i] > 0 then
    local left = levels[i] - charge
    redis.call('HSET', tpm_keys[i], 'tokens', tostring(left), 'ts', now)
    redis.call('PEXPIRE', tpm_keys[i], WINDOW_MS + math.ceil(math.max(0, -left) * WINDOW_MS / tpm[i]))
  end
end
if ARGV[9] ~= '' and cost > 0 then
  local ttl = tonumber(ARGV[11])
  for _, o in ipairs(owners) do
    if o.holds then
      local before = tonumber(redis.call('HGET', o.hash, ARGV[9]) or '0')  -- a batch line run again: one hold
      redis.call('ZADD', o.zset, now + ttl, ARGV[9])
      redis.call('HSET', o.hash, ARGV[9], cost)
      redis.call('HINCRBY', o.hash, '#total', cost - before)
      redis.call('PEXPIRE', o.zset, ttl)
      redis.call('PEXPIRE', o.hash, ttl)
    end
  end
end
redis.call('SET', KEYS[9], '1', 'PX', ARGV[12])
return reply(0, 0, '')
