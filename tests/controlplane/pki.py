"""The certificates and keys a Kubernetes control plane needs, made fresh for each start:
a CA, the API server's serving certificate, client certificates (CN = user, O = groups, as
the API server's x509 authenticator reads them) and the ECDSA P-256 key pair that signs and
verifies service-account tokens."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=2)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(cn: str, groups: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    return x509.Name(attrs)


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


class Pki:
    """Writes everything under `root`; `client()` issues a client certificate on demand."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        now = datetime.datetime.now(datetime.UTC)
        self._ca_key = _key()
        ca_name = _name("xla-sentinel-test-ca")
        self._ca_cert = (
            x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
            .public_key(self._ca_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._ca_key, hashes.SHA256()))
        self.ca = root / "ca.crt"
        self.ca.write_bytes(self._ca_cert.public_bytes(serialization.Encoding.PEM))
        self.serving = self._issue("kube-apiserver", (), server=True)
        sa_key = _key()
        self.sa_private = root / "sa.key"
        self.sa_private.write_bytes(_pem_key(sa_key))
        self.sa_public = root / "sa.pub"
        self.sa_public.write_bytes(sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))

    def client(self, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        return self._issue(user, groups, server=False)

    def _issue(self, cn: str, groups: tuple[str, ...], *, server: bool) -> KeyPair:
        now = datetime.datetime.now(datetime.UTC)
        key = _key()
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder().subject_name(_name(cn, groups))
            .issuer_name(self._ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + _VALIDITY)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.DNSName("kubernetes.default.svc"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                # The `kubernetes` service's address, which pods on the real node (node.py) dial.
                x509.IPAddress(ipaddress.ip_address("10.96.0.1"))]), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        stem = cn.replace(":", "_")
        pair = KeyPair(self.root / f"{stem}.crt", self.root / f"{stem}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_pem_key(key))
        pair.key.chmod(0o600)
        return pair
