"""A self-signed CA and a server certificate for 127.0.0.1, made by `openssl` for a test's own
TLS servers (nothing leaves the test's folder)."""
from __future__ import annotations

import subprocess
from pathlib import Path

from launcher.redis_topology import ServerTLS


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def local_server_tls(folder: Path) -> ServerTLS:
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
             "-subj", "/CN=tiergate-test-ca", cwd=folder)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=127.0.0.1", cwd=folder)
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "1", "-extfile", "san.ext", cwd=folder)
    return ServerTLS(str(folder / "ca.pem"), str(folder / "server.pem"), str(folder / "server.key"))
