"""A throwaway certificate authority and serving certificate, for the simulator's HTTPS servers.

kube-apiserver only speaks HTTPS, and Go clients (kubectl, client-go) send a kubeconfig's
bearer token only over TLS, so the simulator's API server serves HTTPS by default with a CA
made at startup; the CA certificate goes into the kubeconfig as ``certificate-authority-data``.
The simulated kubelets serve their API (``/containerLogs``) over HTTPS too, as a real kubelet
does; nobody checks their CA (kube-apiserver runs without ``--kubelet-certificate-authority``
by default). Shared by both sides, which must not import each other. Keys are EC P-256 (fast
to make); certificates live as long as their server does.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class ServingCertificate:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path) -> tuple[str, str]:
        """Write cert and key files (key mode 0600); returns (certfile, keyfile)."""
        cert_path, key_path = directory / "serving.crt", directory / "serving.key"
        cert_path.write_bytes(self.cert_pem + self.ca_pem)
        key_path.touch(mode=0o600)
        key_path.write_bytes(self.key_pem)
        return str(cert_path), str(key_path)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_serving_certificate(hosts: list[str], common_name: str = "kube-apiserver") -> ServingCertificate:
    """A CA and a certificate for ``hosts`` (IP addresses or DNS names) signed by it."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    until = now + dt.timedelta(days=365)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("airflow-gang-sim-ca"))
        .issuer_name(_name("airflow-gang-sim-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return ServingCertificate(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )
