#!/usr/bin/env python3
"""Captures golden Kafka frames: a loopback TCP proxy between real clients and
a real Apache Kafka broker that writes every request and response frame to a
file named <api>-v<version>-<client>-<req|resp>.bin (first of each kind only).

Usage: capture.py LISTEN_PORT KAFKA_PORT CLIENT_NAME OUT_DIR [SECONDS]

The proxy rewrites nothing, so Metadata responses carry the broker's own
address: point the broker's advertised.listeners at the proxy port when the
client must stay on the proxy. Used once to refresh tests/data/frames; the
unit test tests/protocol/test_golden.c decodes and re-encodes every file.
"""
import os
import socket
import struct
import sys
import threading
import time


def read_exact(sock, n):
    buf = b""
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def read_frame(sock):
    head = read_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    body = read_exact(sock, size)
    return None if body is None else head + body


class Session:
    def __init__(self, client, out_dir):
        self.client = client
        self.out_dir = out_dir
        self.pending = {}  # correlation id -> (api, version)
        self.lock = threading.Lock()

    def save(self, api, version, kind, frame):
        name = "%d-v%d-%s-%s.bin" % (api, version, self.client, kind)
        path = os.path.join(self.out_dir, name)
        if not os.path.exists(path):
            with open(path, "wb") as fh:
                fh.write(frame[4:])

    def upstream(self, src, dst):
        while True:
            frame = read_frame(src)
            if frame is None:
                break
            api, version, corr = struct.unpack(">hhi", frame[4:12])
            with self.lock:
                self.pending[corr] = (api, version)
            self.save(api, version, "req", frame)
            try:
                dst.sendall(frame)
            except OSError:
                break
        dst.close()

    def downstream(self, src, dst):
        while True:
            frame = read_frame(src)
            if frame is None:
                break
            (corr,) = struct.unpack(">i", frame[4:8])
            with self.lock:
                api_version = self.pending.pop(corr, None)
            if api_version is not None:
                self.save(api_version[0], api_version[1], "resp", frame)
            try:
                dst.sendall(frame)
            except OSError:
                break
        dst.close()


def main():
    listen_port, kafka_port, client, out_dir = sys.argv[1:5]
    seconds = float(sys.argv[5]) if len(sys.argv) > 5 else 60.0
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(listen_port)))
    srv.listen(16)
    srv.settimeout(0.5)
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            continue
        up = socket.create_connection(("127.0.0.1", int(kafka_port)))
        s = Session(client, out_dir)
        threading.Thread(target=s.upstream, args=(conn, up), daemon=True).start()
        threading.Thread(target=s.downstream, args=(up, conn), daemon=True).start()


if __name__ == "__main__":
    main()
