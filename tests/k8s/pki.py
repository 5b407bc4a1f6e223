"""The certificates and keys of a throwaway control plane, made with ``cryptography``.

One CA signs every serving certificate (the API server's, the Kueue webhook server's): a client that trusts
the CA trusts both, which is what a ``caBundle`` in a webhook configuration needs. The service-account
signing key is a separate RSA key (the API server signs tokens with it and verifies them with its public
half). Keys are EC P-256 where Go and OpenSSL both accept it (fast to make: the fixture makes four per run).
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

__all__ = ["CertificateAuthority", "write_service_account_keys"]

_VALID = datetime.timedelta(days=2)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass(frozen=True)
class CertificateAuthority:
    """A self-signed CA that issues serving certificates for loopback."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @classmethod
    def create(cls, name: str = "osprey-test-ca") -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            .sign(key, hashes.SHA256())
        )
        return cls(key, certificate)

    @property
    def pem(self) -> str:
        return self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    def write(self, path: Path) -> Path:
        path.write_text(self.pem)
        return path

    def issue(self, directory: Path, name: str, *, client: bool = False, organization: str = "") -> Path:
        """``directory/tls.crt`` and ``tls.key`` (the names controller-runtime's webhook server reads), valid
        for 127.0.0.1, ::1 and localhost; ``client``: also for client authentication (CN = user name,
        O = group)."""
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, name)]
        if organization:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] + ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("::1")),
                    ]
                ),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        (directory / "tls.crt").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        key_path = directory / "tls.key"
        key_path.write_bytes(_key_pem(key))
        key_path.chmod(0o600)
        return directory


def write_service_account_keys(directory: Path) -> tuple[Path, Path]:
    """``(sa.key, sa.pub)``: the private key kube-apiserver signs service-account tokens with
    (``--service-account-signing-key-file``) and the public key it verifies them with
    (``--service-account-key-file``). RSA 2048: RS256 is what every Kubernetes token reader accepts."""
    directory.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = directory / "sa.key"
    private.write_bytes(_key_pem(key))
    private.chmod(0o600)
    public = directory / "sa.pub"
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public
