"""The local control plane's certificates and keys, made fresh at every start.

One CA signs the API server's serving certificate, the admin client
certificate every local component uses (group system:masters), and the
serving certificate the operators' webhooks present on 127.0.0.1; the
service-account token signing key pair is separate, as in any cluster.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The API server answers to these names on 127.0.0.1 and, for in-cluster clients, at the
# first address of the service range (kube-apiserver's --service-cluster-ip-range below).
SERVICE_CIDR = "10.96.0.0/16"
KUBERNETES_SERVICE_IP = "10.96.0.1"
API_SERVER_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local")
VALIDITY = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files in one folder."""

    folder: Path

    def path(self, name: str) -> Path:
        return self.folder / name

    @property
    def ca_cert(self) -> Path:
        return self.path("ca.crt")

    def pem(self, name: str) -> str:
        return self.path(name).read_text()


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _sign(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool = False,
          server_names: tuple[str, ...] = (), ips: tuple[str, ...] = (), client: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + VALIDITY)
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
            decipher_only=False), critical=True)
    else:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server_names or ips:
        alt = [x509.DNSName(n) for n in server_names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def generate(folder: Path) -> Pki:
    """Write ca, apiserver, admin and webhook certificates and the service-account key pair."""
    folder.mkdir(parents=True, exist_ok=True)
    pki = Pki(folder)
    ca_key = _key()
    ca_name = _name("gpucluster-local-ca")
    _write_key(pki.path("ca.key"), ca_key)
    _write_cert(pki.ca_cert, _sign(ca_name, ca_key, ca_name, ca_key, ca=True))

    def leaf(stem: str, subject: x509.Name, **kwargs) -> None:
        key = _key()
        _write_key(pki.path(f"{stem}.key"), key)
        _write_cert(pki.path(f"{stem}.crt"), _sign(subject, key, ca_name, ca_key, **kwargs))

    leaf("apiserver", _name("kube-apiserver"), server_names=API_SERVER_NAMES,
         ips=("127.0.0.1", KUBERNETES_SERVICE_IP))
    leaf("admin", _name("gpucluster-local-admin", "system:masters"), client=True)
    leaf("webhook", _name("gpucluster-local-webhooks"), server_names=("localhost",), ips=("127.0.0.1",))
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki.path("sa.key"), sa_key)
    pki.path("sa.pub").write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return pki
