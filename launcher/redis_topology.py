"""Local Redis topologies on loopback for tests and benchmarks: one server, a Sentinel group
(master, replica, three Sentinels) or a Cluster (masters with a replica each). Each returns the
`redis:` settings a gateway uses to reach it, and can kill a master to force a failover.
With a password every server, replica link and Sentinel requires it (requirepass, masterauth,
Sentinel's auth-pass), and the settings name a file holding it, as a deployment mounts a Secret.

Failure detection is tuned short (one second) so a failover takes seconds, not the default
half a minute; replication stays asynchronous, as in production."""
from __future__ import annotations

import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from launcher.processes import REDIS_SERVER, free_port, stop_processes

DOWN_AFTER_MS = 1000
MASTER_NAME = "tiergate"


@dataclass(frozen=True)
class ServerTLS:
    """PEM files: the CA, and the certificate (for 127.0.0.1) and key a server shows."""
    ca_file: str
    cert_file: str
    key_file: str

    def server_flags(self, port: int) -> tuple[str, ...]:
        """TLS only, on `port`; clients need no certificate of their own."""
        return ("--port", "0", "--tls-port", str(port), "--tls-cert-file", self.cert_file, "--tls-key-file",
                self.key_file, "--tls-ca-cert-file", self.ca_file, "--tls-auth-clients", "no")


@dataclass
class Topology:
    mode: str
    settings: dict                                   # the gateway's `redis:` section
    servers: dict[int, subprocess.Popen] = field(default_factory=dict)   # port -> redis-server
    others: list[subprocess.Popen] = field(default_factory=list)         # Sentinels
    password: str | None = None
    tls: ServerTLS | None = None

    def client(self, port: int) -> redis.Redis:
        tls = {"ssl": True, "ssl_ca_certs": self.tls.ca_file} if self.tls else {}
        return redis.Redis(port=port, socket_timeout=1, decode_responses=True, password=self.password, **tls)

    def kill(self, port: int) -> None:
        """SIGKILL one server: no goodbye, no last write."""
        proc = self.servers.pop(port)
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        stop_processes(list(self.servers.values()) + self.others, timeout_s=5)


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _cluster_port() -> int:
    """A free port whose cluster bus port (10000 above it) is free too, both below the kernel's
    ephemeral range: a port from that range may go to any process's outgoing connection between
    this check and the server's bind (a Cluster test then failed to start)."""
    high = max(_ephemeral_low() - 10000, 20100)
    while True:
        port = random.randint(20000, high - 1)
        if all(_free(p) for p in (port, port + 10000)):
            return port


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _server(port: int, data: Path, password: str | None, *flags: str) -> subprocess.Popen:
    data.mkdir(parents=True, exist_ok=True)
    auth = ("--requirepass", password, "--masterauth", password) if password else ()
    return subprocess.Popen([REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
                             "--save", "", "--appendonly", "no", "--protected-mode", "no", *auth, *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _with_password(top: Topology, workdir: Path, password: str | None) -> Topology:
    """The topology's settings read the password from a file of its own (owner-only)."""
    top.password = password
    if password:
        workdir.mkdir(parents=True, exist_ok=True)
        path = workdir / "redis.password"
        path.touch(mode=0o600)
        path.write_text(password + "\n")
        top.settings["password_file"] = str(path)
    return top


def _until(check, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = check()
            if value:
                return value
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not within {timeout_s}s")
        time.sleep(0.05)


def _ping(top: Topology, port: int) -> None:
    _until(lambda: top.client(port).ping(), 10, f"redis-server on {port}")


def start_single(workdir: Path, password: str | None = None, tls: ServerTLS | None = None) -> Topology:
    """One server; with `tls`, it speaks only TLS and the settings name the CA."""
    port = free_port()
    top = _with_password(Topology("single", {"mode": "single", "url": f"redis://127.0.0.1:{port}/0"}, tls=tls),
                         workdir, password)
    if tls:
        top.settings["tls"] = {"enabled": True, "ca_file": tls.ca_file}
    top.servers[port] = _server(port, workdir / str(port), password, *(tls.server_flags(port) if tls else ()))
    _ping(top, port)
    return top


def _sentinel_conf(port: int, workdir: Path, master: int, password: str | None) -> str:
    # with a password, Sentinel logs in to the servers (auth-pass) and asks it of its own clients
    auth = f"sentinel auth-pass {MASTER_NAME} {password}\nrequirepass {password}\n" if password else ""
    return (f"port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {workdir}\n"
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} {DOWN_AFTER_MS * 3}\n" + auth)


def start_sentinel_group(workdir: Path, password: str | None = None) -> Topology:
    """One master, one replica, three Sentinels (quorum two)."""
    master, replica = free_port(), free_port()
    sentinels = [free_port() for _ in range(3)]
    top = _with_password(Topology("sentinel", {"mode": "sentinel", "master_name": MASTER_NAME,
                                               "sentinels": [f"127.0.0.1:{p}" for p in sentinels]}),
                         workdir, password)
    try:
        top.servers[master] = _server(master, workdir / str(master), password)
        top.servers[replica] = _server(replica, workdir / str(replica), password,
                                       "--replicaof", "127.0.0.1", str(master))
        for port in (master, replica):
            _ping(top, port)
        for port in sentinels:
            conf = workdir / f"sentinel-{port}.conf"  # Sentinel rewrites its file: one each
            conf.write_text(_sentinel_conf(port, workdir, master, password))
            top.others.append(subprocess.Popen([REDIS_SERVER, str(conf), "--sentinel"],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _until(lambda: top.client(replica).info("replication")["master_link_status"] == "up", 10, "replication")
        # a Sentinel can promote only a replica it has seen, and only with peers to vote
        _until(lambda: all(_sees_group(top.client(p)) for p in sentinels), 30, "sentinels seeing the group")
    except BaseException:
        top.stop()
        raise
    return top


def start_cluster(workdir: Path, masters: int = 3, password: str | None = None,
                  tls: ServerTLS | None = None) -> Topology:
    """`masters` masters owning equal slot ranges, each with one replica; with `tls`, clients, the
    replication links and the cluster bus all speak only TLS, and the settings name the CA."""
    top = _with_password(Topology("cluster", {"mode": "cluster"}, tls=tls), workdir, password)
    if tls:
        top.settings["tls"] = {"enabled": True, "ca_file": tls.ca_file}
    try:
        ports = [_cluster_node(top, workdir, password, tls) for _ in range(2 * masters)]
        top.settings["cluster_nodes"] = [f"127.0.0.1:{p}" for p in ports[:masters]]
        clients = {p: top.client(p) for p in ports}
        step = 16384 // masters
        for i, port in enumerate(ports[:masters]):
            last = 16383 if i == masters - 1 else (i + 1) * step - 1
            clients[port].execute_command("CLUSTER ADDSLOTS", *range(i * step, last + 1))  # 6.2 has no RANGE
        for port in ports[1:]:
            clients[port].execute_command("CLUSTER MEET", "127.0.0.1", ports[0])
        _until(lambda: all(len(c.execute_command("CLUSTER NODES")) == len(ports)
                           for c in clients.values()), 15, "every node knowing every other")
        for master, replica in zip(ports[:masters], ports[masters:]):
            node_id = clients[master].execute_command("CLUSTER MYID")
            _until(lambda: clients[replica].execute_command("CLUSTER REPLICATE", node_id), 10, "a replica")
        _until(lambda: all(c.cluster("info")["cluster_state"] == "ok" for c in clients.values()), 15, "cluster ok")
        for replica in ports[masters:]:
            _until(lambda: clients[replica].info("replication")["master_link_status"] == "up", 15, "replication")
    except BaseException:
        top.stop()
        raise
    return top


def _cluster_node(top: Topology, workdir: Path, password: str | None, tls: ServerTLS | None) -> int:
    """One Cluster-enabled server answering on a port of its own; a port taken meanwhile (the
    server exits at once) is traded for another."""
    for _ in range(5):
        port = _cluster_port()
        over_tls = (*tls.server_flags(port), "--tls-cluster", "yes", "--tls-replication", "yes") if tls else ()
        proc = top.servers[port] = _server(port, workdir / str(port), password, "--cluster-enabled", "yes",
                                           "--cluster-node-timeout", str(DOWN_AFTER_MS),
                                           "--cluster-require-full-coverage", "no", *over_tls)
        if _until(lambda: proc.poll() is not None or top.client(port).ping(), 10, f"redis-server on {port}") \
                and proc.poll() is None:
            return port
        del top.servers[port]
    raise RuntimeError("no port for a Cluster node after 5 tries")


def _sees_group(sentinel: redis.Redis) -> bool:
    master = sentinel.sentinel_master(MASTER_NAME)
    return int(master["num-other-sentinels"]) == 2 and int(master["num-slaves"]) == 1


def cluster_master_of(top: Topology, key: str) -> int:
    """The port of the master that now serves `key`'s slot."""
    node = top.client(next(iter(top.servers)))
    slot = node.cluster("keyslot", key)
    for start, end, master, *_ in node.execute_command("CLUSTER SLOTS"):
        if start <= slot <= end:
            return int(master[1])
    raise RuntimeError(f"no master serves slot {slot}")


def sentinel_master(top: Topology) -> int:
    """The port of the master the Sentinels now name."""
    port = int(top.settings["sentinels"][0].rpartition(":")[2])
    return int(top.client(port).sentinel_get_master_addr_by_name(MASTER_NAME)[1])
