-- One change to the API-managed tenants or keys, written only if the record is still what the
-- caller read (two admins never overwrite each other unseen), appended to the audit stream,
-- which is also every replica's change feed, and announced.
-- KEYS[1] the records hash (tenants or keys), KEYS[2] the audit stream, KEYS[3] the version
-- ARGV[1] field (tenant name or key id), ARGV[2] the new record ('' deletes it),
-- ARGV[3] the record as the caller read it ('' = absent), ARGV[4] the audit entry,
-- ARGV[5] the stream's approximate cap, ARGV[6] the channel
local current = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if current ~= ARGV[3] then
  return {0, current}
end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
local id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[5], '*', 'entry', ARGV[4])
redis.call('SET', KEYS[3], id)
redis.call('PUBLISH', ARGV[6], id)
return {1, id}
