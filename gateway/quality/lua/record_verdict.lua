-- Record one sample's verdict and, atomically across replicas, decide the tier's adjustment for
-- the sample's tenant: each tenant's verdicts move only that tenant's step.
-- KEYS: 1 the tenant's tier window (list), 2 predicted-class window (list), 3 the tenant's
--       controller hash, 4 changes stream, 5 the tier's window over every tenant (shown, never
--       acted on), 6 set of tenants with a controller hash
-- ARGV: 1 verdict ("1" failed, "0" passed), 2 window N, 3 min fresh samples, 4 trigger,
--       5 recover, 6 max steps, 7 tier name, 8 changes stream max length, 9 tenant name
-- A change needs ARGV[3] samples taken since the previous change (fresh evidence only), so one
-- burst of failures moves the tier one step, never several; trigger > recover gives hysteresis.
local n = tonumber(ARGV[2])
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, n - 1)
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, n - 1)
redis.call('LPUSH', KEYS[5], ARGV[1])
redis.call('LTRIM', KEYS[5], 0, n - 1)
redis.call('SADD', KEYS[6], ARGV[9])
local tier = ARGV[7]
local since = redis.call('HINCRBY', KEYS[3], 'since:' .. tier, 1)
local step = tonumber(redis.call('HGET', KEYS[3], 'step:' .. tier) or '0')

local window = redis.call('LRANGE', KEYS[1], 0, -1)
local fails, fresh_fails = 0, 0
local fresh = math.min(since, #window)
for i, v in ipairs(window) do
  if v == '1' then
    fails = fails + 1
    if i <= fresh then fresh_fails = fresh_fails + 1 end
  end
end

local changed = 0
if since >= tonumber(ARGV[3]) then
  local rate = fresh_fails / fresh
  local new, why = step, nil
  if rate > tonumber(ARGV[4]) and step < tonumber(ARGV[6]) then
    new = step + 1
    why = string.format('failure rate %.3f over the last %d samples is above the trigger %s', rate, fresh, ARGV[4])
  elseif rate < tonumber(ARGV[5]) and step > 0 then
    new = step - 1
    why = string.format('failure rate %.3f over the last %d samples is below the recover level %s', rate, fresh, ARGV[5])
  end
  if new ~= step then
    redis.call('HSET', KEYS[3], 'step:' .. tier, new, 'since:' .. tier, 0)
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[8], '*', 'tier', tier, 'tenant', ARGV[9], 'from_step', step, 'to_step', new,
               'failure_rate', string.format('%.4f', rate), 'samples', fresh, 'reason', why)
    if new > step then changed = 1 else changed = -1 end
    step = new
  end
end
return {fails, #window, step, changed}
