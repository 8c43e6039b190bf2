"""Test certificates (made with the openssl CLI), a multi-listener Runnel
broker for the TLS and SASL integration tests (test_security.py), and a
PLAINTEXT + SASL_PLAINTEXT (PLAIN) broker for either target with the raw
SASL exchanges that log in to it (test_acls.py, test_delegation_tokens.py)."""

import struct
import subprocess
from pathlib import Path

import procs
import wire
from kafka_real import KafkaReal
from runnel_broker import RunnelBroker, runnel_bin

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36

KEY_PASSWORD = "keystore-pass"
PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-plain"}


def _openssl(*args, cwd):
    subprocess.run(["openssl"] + [str(a) for a in args], cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)


def _issue(d, name, subject, ca, san=None):
    """An EC P-256 key and a certificate for subject signed by ca (a name)."""
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", name + ".key", "-out", name + ".csr", "-subj", subject, cwd=d)
    ext = d / (name + ".ext")
    ext.write_text(("subjectAltName=%s\n" % san) if san else "basicConstraints=CA:FALSE\n")
    _openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
             "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", ext.name, cwd=d)


def _ca(d, name, subject):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", name + ".key", "-out", name + ".pem", "-days", "2",
             "-subj", subject, cwd=d)


class Certs:
    """ca.pem, a server keystore (encrypted PKCS#8 key + chain, one file), the
    same server pair unencrypted for inline use, a client pair signed by the
    CA, and a client pair from a CA the broker does not trust."""

    def __init__(self, d):
        d = Path(d)
        d.mkdir(parents=True, exist_ok=True)
        self.dir = d
        _ca(d, "ca", "/CN=Runnel Test CA")
        _ca(d, "rogue-ca", "/CN=Rogue CA")
        _issue(d, "server", "/CN=localhost", "ca", san="DNS:localhost,IP:127.0.0.1")
        _issue(d, "client", "/O=Runnel Tests/CN=client-1", "ca")
        _issue(d, "rogue", "/CN=intruder", "rogue-ca")
        _openssl("pkcs8", "-topk8", "-in", "server.key", "-out", "server-enc.key",
                 "-passout", "pass:" + KEY_PASSWORD, cwd=d)
        keystore = d / "keystore.pem"
        keystore.write_text((d / "server-enc.key").read_text() + (d / "server.pem").read_text()
                            + (d / "ca.pem").read_text())
        self.ca = d / "ca.pem"
        self.keystore = keystore
        self.server_cert = d / "server.pem"
        self.server_key = d / "server.key"
        self.client_cert = d / "client.pem"
        self.client_key = d / "client.key"
        self.rogue_cert = d / "rogue.pem"
        self.rogue_key = d / "rogue.key"


def plain_jaas(users):
    opts = " ".join('user_%s="%s"' % (u, p) for u, p in users.items())
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" %s;' % opts)


LISTENERS = ("PLAINTEXT", "SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT")


class SecureBroker(RunnelBroker):
    """Runnel with five listeners on 127.0.0.1:
      PLAINTEXT       the harness's readiness port (and kafka-configs)
      SSL             server certificate from a keystore file whose key is
                      encrypted (ssl.key.password); no client certificate
      MTLS            an SSL listener named MTLS: inline certificate and key,
                      client certificate required
      SASL_SSL        PLAIN (JAAS users) and SCRAM-SHA-256/512
      SASL_PLAINTEXT  PLAIN only
    ports[name] gives each port."""

    def __init__(self, datadir, certs, extra=None, binary=None):
        self.ports = {name: procs.free_port() for name in LISTENERS}
        listeners = ",".join("%s://127.0.0.1:%d" % (n, p) for n, p in self.ports.items())
        overrides = {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,"
                                              "SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.keystore),
            "ssl.key.password": KEY_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(certs.ca),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.keystore.location": "",
            "listener.name.mtls.ssl.keystore.certificate.chain": certs.server_cert.read_text(),
            "listener.name.mtls.ssl.keystore.key": certs.server_key.read_text(),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(PLAIN_USERS),
        }
        overrides.update(extra or {})
        super().__init__(datadir, port=self.ports["PLAINTEXT"], binary=binary, overrides=overrides)

    def addr(self, listener):
        return "127.0.0.1:%d" % self.ports[listener]


# ---- PLAIN over SASL_PLAINTEXT, on either target ----------------------------------------------


def _sasl_plain_props(users, props):
    p = {"sasl.enabled.mechanisms": "PLAIN",
         "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas(users)}
    p.update(props or {})
    return p


class SaslPlainRunnel(RunnelBroker):
    """Runnel with a PLAINTEXT listener (the harness's readiness port) and a
    SASL_PLAINTEXT listener offering PLAIN to users {name: password}."""

    def __init__(self, datadir, users, props=None):
        self.ports = {"PLAINTEXT": procs.free_port(), "SASL_PLAINTEXT": procs.free_port()}
        listeners = ",".join("%s://127.0.0.1:%d" % kv for kv in self.ports.items())
        overrides = dict(_sasl_plain_props(users, props), listeners=listeners, **{
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"})
        super().__init__(datadir, port=self.ports["PLAINTEXT"], binary=runnel_bin(),
                         overrides=overrides)
        self.sasl_port = self.ports["SASL_PLAINTEXT"]

    def addr(self, listener):
        return "127.0.0.1:%d" % self.ports[listener]


class SaslPlainKafka(KafkaReal):
    """Apache Kafka with the same two listeners as SaslPlainRunnel."""

    def __init__(self, datadir, users, props=None):
        self.sasl_port = procs.free_port()
        super().__init__(datadir, extra_props=_sasl_plain_props(users, props),
                         extra_listeners={"SASL_PLAINTEXT": ("SASL_PLAINTEXT", self.sasl_port)})
        self.ports = {"PLAINTEXT": self.port, "SASL_PLAINTEXT": self.sasl_port}

    def addr(self, listener):
        return "127.0.0.1:%d" % self.ports[listener]


def sasl_plain_broker(target, datadir, users, props=None):
    """An unstarted SaslPlainRunnel or SaslPlainKafka, as the target says."""
    cls = SaslPlainKafka if target == "kafka" else SaslPlainRunnel
    return cls(datadir, users, props)


def _str(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def handshake(sock, mechanism, version=1, corr=1):
    """SaslHandshake by hand: -> (error code, mechanisms offered)."""
    sock.sendall(wire.frame(wire.request_header(SASL_HANDSHAKE, version, corr) + _str(mechanism)))
    r = wire.Reader(wire.recv_frame(sock))
    assert r.take(">i") == corr
    err = r.take(">h")
    return err, r.array(wire.Reader.string)


def authenticate(sock, token, corr=2):
    """SaslAuthenticate v1 by hand: -> (error code, error message)."""
    body = struct.pack(">i", len(token)) + token
    sock.sendall(wire.frame(wire.request_header(SASL_AUTHENTICATE, 1, corr) + body))
    r = wire.Reader(wire.recv_frame(sock))
    assert r.take(">i") == corr
    err = r.take(">h")
    return err, r.string()


def plain_login(b, user, password):
    """A socket to b's SASL_PLAINTEXT listener, logged in with PLAIN."""
    s = wire.connect(b.host, b.sasl_port)
    assert handshake(s, "PLAIN") == (0, ["PLAIN"])
    assert authenticate(s, b"\0%s\0%s" % (user.encode(), password.encode()))[0] == 0
    return s
