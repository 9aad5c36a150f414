"""TLS with a certificate the test makes, the refusal to listen beyond loopback unprotected (and,
once allowed, credentials asked of every caller, wherever it calls from), and 500 bodies that tell
what failed without the exception's text, paths or stack."""

from __future__ import annotations

import ipaddress
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import orjson
import pytest
from conftest import error_of, free_port, start_server
from security_helpers import add_user
from starlette.testclient import TestClient
from tls_helpers import certificate

from leafsearch import Node
from leafsearch.rest.app import create_app
from tests import web


def _stop(process: subprocess.Popen) -> str:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=30)
    return output


def _finish(process: subprocess.Popen) -> str:
    """The output of a process expected to exit by itself."""
    output, _ = process.communicate(timeout=60)
    return output


def _wait_up(url: str, process: subprocess.Popen, *, verify: ssl.SSLContext | bool = True) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        try:
            web.get(url, verify=verify, timeout=1.0)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"no answer on {url}")


def _address_beyond_loopback() -> str | None:
    """This machine's own address on its route out (None without one): a caller connecting to it
    reaches the node from a non-loopback address."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1; connecting a UDP socket sends nothing
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if ipaddress.ip_address(address).is_loopback else address


def test_tls_serves_https_with_the_given_certificate(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path)
    data = tmp_path / "data"
    add_user(data, "admin", "admin-secret", "superuser")
    port = free_port()
    process = start_server(data, port, "--tls-cert", str(cert), "--tls-key", str(key))
    try:
        url = f"https://127.0.0.1:{port}"
        _wait_up(url, process, verify=ssl.create_default_context(cafile=cert))
        with web.Client(
            base_url=url, verify=ssl.create_default_context(cafile=cert), auth=("admin", "admin-secret")
        ) as https:
            assert https.get("/").json()["version"]["number"].startswith("8.")
            assert https.put("/tls/_doc/1?refresh=true", json={"a": 1}).status_code == 201
            # A streamed export over TLS: its pages go through the HTTP server (no plain socket
            # for the renderer to write to), every one of them.
            lines = b"".join(b'{"index":{}}\n{"n":%d}\n' % i for i in range(3000))
            https.post(
                "/tls/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
            )
            exported = https.post("/tls/_export", json={}).content.splitlines()
            assert len(exported) == 3002 and orjson.loads(exported[-1])["_export"]["count"] == 3001
            stats = https.get("/_nodes/stats/walks").json()["nodes"]
            assert next(iter(stats.values()))["walks"]["exports"]["written_by_renderer"] == 0
        with pytest.raises(httpx.ConnectError):
            web.get(url, timeout=5)  # the client does not trust an unknown certificate
        with pytest.raises(httpx.TransportError):
            web.get(f"http://127.0.0.1:{port}/", timeout=5)  # no plain HTTP on a TLS port
    finally:
        output = _stop(process)
    assert f"listening on https://127.0.0.1:{port}" in output


def test_a_non_loopback_address_needs_authentication_and_tls_or_insecure(tmp_path: Path) -> None:
    data = tmp_path / "data"
    refused = start_server(data, free_port(), "--host", "0.0.0.0")
    output = _finish(refused)
    assert refused.returncode == 1
    assert "refusing to listen on 0.0.0.0" in output
    assert "authentication" in output and "TLS" in output
    add_user(data, "admin", "admin-secret", "superuser")
    refused = start_server(data, free_port(), "--host", "0.0.0.0")
    output = _finish(refused)
    assert refused.returncode == 1 and "without TLS" in output
    port = free_port()
    outside = _address_beyond_loopback()
    insecure = start_server(data, port, "--host", "0.0.0.0", "--insecure", "--access-log", "-")
    try:
        _wait_up(f"http://127.0.0.1:{port}/", insecure)
        # Every caller must authenticate, from loopback and from beyond it (a node listening on
        # every address is reached from the network: the loopback caller alone proves nothing).
        for host in ("127.0.0.1", outside) if outside else ("127.0.0.1",):
            anonymous = web.get(f"http://{host}:{port}/", timeout=10)
            assert anonymous.status_code == 401, (host, anonymous.text)
            assert error_of(anonymous)["reason"] == "missing authentication credentials for REST request [/]"
            wrong = web.get(f"http://{host}:{port}/_cat/indices", auth=("admin", "wrong"), timeout=10)
            assert wrong.status_code == 401, (host, wrong.text)
            admin = web.get(f"http://{host}:{port}/", auth=("admin", "admin-secret"), timeout=10)
            assert admin.status_code == 200, (host, admin.text)
    finally:
        output = _stop(insecure)
    assert "without TLS (--tls-cert and --tls-key) (--insecure)" in output
    if outside is None:
        pytest.skip("this machine has no address beyond loopback: only loopback callers were checked")
    # The access log shows the node saw those requests come from beyond loopback.
    assert f'{outside} "GET / HTTP/1.1" 401' in output
    assert f'{outside} "GET / HTTP/1.1" 200' in output


def test_callers_beyond_loopback_authenticate_whatever_their_address(tmp_path: Path) -> None:
    """The same, in process and on any machine: the caller's address never stands for credentials."""
    with Node(tmp_path / "data", background=False) as node:
        add_user(node.path, "admin", "admin-secret", "superuser")
        app = create_app(node, bind_host="0.0.0.0")
        for peer in ("203.0.113.7", "10.1.2.3", "127.0.0.1"):
            with TestClient(app, base_url="http://203.0.113.1:9200", client=(peer, 50000)) as http:
                anonymous = http.get("/_cat/indices")
                assert anonymous.status_code == 401, peer
                assert error_of(anonymous)["type"] == "security_exception"
                assert http.get("/_cat/indices", auth=("admin", "admin-secret")).status_code == 200, peer


def test_tls_options_go_together(tmp_path: Path) -> None:
    cert, _ = certificate(tmp_path)
    process = start_server(tmp_path / "data", free_port(), "--tls-cert", str(cert))
    output = _finish(process)
    assert process.returncode == 2 and "--tls-cert and --tls-key go together" in output


def test_a_500_body_says_what_failed_without_text_paths_or_stack(tmp_path: Path) -> None:
    with Node(tmp_path / "data", background=False) as node:
        secret_path = str(node.path)

        def broken(metric_path: list[str], **options: object) -> dict:
            raise OSError(f"cannot read {secret_path}/indices/x")

        node.nodes_stats = broken
        with TestClient(create_app(node), base_url="http://127.0.0.1") as http:
            response = http.get("/_nodes/stats")
            assert response.status_code == 500
            error = error_of(response)
            assert error["type"] == "o_s_error"
            assert "OSError" in error["reason"] and secret_path not in response.text
            assert "stack_trace" not in error and "Traceback" not in response.text
            # Without authentication the caller is the node's operator: error_trace shows the stack.
            traced = http.get("/_nodes/stats?error_trace=true")
            assert secret_path in error_of(traced)["stack_trace"]
            # With users, only a superuser gets it.
            add_user(node.path, "ann", "ann-secret", "superuser")
            add_user(node.path, "vic", "vic-secret", "viewer")
            viewer = http.get("/_nodes/stats?error_trace=true", auth=("vic", "vic-secret"))
            assert viewer.status_code == 500 and secret_path not in viewer.text
            admin = http.get("/_nodes/stats?error_trace=true", auth=("ann", "ann-secret"))
            assert secret_path in error_of(admin)["stack_trace"]
