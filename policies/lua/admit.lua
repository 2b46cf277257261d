-- Admit one request atomically: hard budgets against settled spend plus live reservations, then
-- request windows and token buckets for the tenant and (optionally) the key. Either everything
-- is charged and reserved or nothing is.
-- The same call run again (redis-py resends a command whose reply was lost to a dropped connection or
-- a timeout) finds its member's marker and answers "admitted" without charging anything twice.
-- KEYS: 1 tenant rpm log, 2 tenant tpm bucket, 3 key rpm log, 4 key tpm bucket, 5 spend day, 6 spend month,
--       7 reservation expiries (zset id -> expiry ms), 8 reservation amounts (hash id -> micro-USD, '#total'),
--       9 this member's admitted marker
-- ARGV: 1 member (unique per admit), 2 tokens to charge (prompt + n x max_tokens), 3 tenant rpm, 4 tenant tpm,
--       5 key rpm, 6 key tpm (0 = no limit), 7 daily hard, 8 monthly hard (micro-USD, -1 = none),
--       9 reservation id ('' = reserve nothing), 10 worst-case cost micro-USD, 11 reservation ttl ms,
--       12 admitted marker ttl ms
-- Returns {status, retry_after_ms, day_spend, month_spend, what}; status 0 ok, 1 rate limited, 2 budget
-- (retry_after_ms 0 for a budget: it is spent until it resets; else live reservations may free it sooner).
local WINDOW_MS = 60000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local day = tonumber(redis.call('GET', KEYS[5]) or '0')
local month = tonumber(redis.call('GET', KEYS[6]) or '0')
if redis.call('EXISTS', KEYS[9]) == 1 then return {0, 0, day, month, ''} end
local cost = tonumber(ARGV[10])
local daily_hard, monthly_hard = tonumber(ARGV[7]), tonumber(ARGV[8])
local reserved = 0
if daily_hard >= 0 or monthly_hard >= 0 then
  -- reservations of gateways that never settled them (crashed) stop counting at their expiry
  local expired = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', now)
  for _, id in ipairs(expired) do
    local amount = redis.call('HGET', KEYS[8], id)
    if amount then
      redis.call('HDEL', KEYS[8], id)
      redis.call('HINCRBY', KEYS[8], '#total', -tonumber(amount))
    end
  end
  if #expired > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now) end
  reserved = tonumber(redis.call('HGET', KEYS[8], '#total') or '0')
end
local function crosses(spent, hard)
  return hard >= 0 and (spent >= hard or spent + reserved + cost > hard)
end
local function budget_wait(spent, hard)
  if spent >= hard or spent + cost > hard then return 0 end
  return 1000  -- only requests in flight stand in the way: their settlement may leave room
end
if crosses(day, daily_hard) then return {2, budget_wait(day, daily_hard), day, month, 'daily'} end
if crosses(month, monthly_hard) then return {2, budget_wait(month, monthly_hard), day, month, 'monthly'} end

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
if wait > 0 then return {1, wait, day, month, what} end

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
  local before = tonumber(redis.call('HGET', KEYS[8], ARGV[9]) or '0')  -- a batch line run again: one hold
  redis.call('ZADD', KEYS[7], now + ttl, ARGV[9])
  redis.call('HSET', KEYS[8], ARGV[9], cost)
  redis.call('HINCRBY', KEYS[8], '#total', cost - before)
  redis.call('PEXPIRE', KEYS[7], ttl)
  redis.call('PEXPIRE', KEYS[8], ttl)
end
redis.call('SET', KEYS[9], '1', 'PX', ARGV[12])
return {0, 0, day, month, ''}
