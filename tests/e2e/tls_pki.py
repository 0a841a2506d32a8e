"""A throw-away PKI made with the openssl CLI for the mutual-TLS tests and the TLS benchmark:
a CA (openssl ca, so certificates can be back-dated, revoked and listed in a CRL), leaf
certificates with chosen key, digest, validity and SAN, and the docs/design/rpc.md#mutual-tls certificate directories."""
import os
import shutil
import subprocess

CA_EXT = """[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
"""

CONF = """[ca]
default_ca = CA_default
[CA_default]
dir = {dir}
database = $dir/index.txt
new_certs_dir = $dir/newcerts
serial = $dir/serial
crlnumber = $dir/crlnumber
private_key = $dir/ca.key
certificate = $dir/ca.crt
default_md = sha256
default_days = 30
default_crl_days = 30
policy = policy_any
unique_subject = no
copy_extensions = none
[policy_any]
commonName = supplied
"""


def run(*argv, **kw):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw)


class CA:
    """One certificate authority in its own directory."""

    def __init__(self, root, name="test-ca", bits=3072):
        self.dir = os.path.join(root, name)
        os.makedirs(os.path.join(self.dir, "newcerts"))
        open(os.path.join(self.dir, "index.txt"), "w").close()
        with open(os.path.join(self.dir, "serial"), "w") as f:
            f.write("1000\n")
        with open(os.path.join(self.dir, "crlnumber"), "w") as f:
            f.write("01\n")
        self.conf = os.path.join(self.dir, "ca.cnf")
        with open(self.conf, "w") as f:
            f.write(CONF.format(dir=self.dir) + CA_EXT)
        self.key = os.path.join(self.dir, "ca.key")
        self.crt = os.path.join(self.dir, "ca.crt")
        run("openssl", "req", "-x509", "-newkey", f"rsa:{bits}", "-nodes", "-keyout", self.key,
            "-out", self.crt, "-days", "30", "-sha256", "-subj", f"/CN={name}",
            "-config", self.conf, "-extensions", "ca_ext")
        self.n = 0

    def issue(self, key, cn, san=None, md="sha256", start=None, end=None, client=False,
              ca=False, ku=True):
        """Sign a certificate for `key` (a path); returns the certificate path."""
        self.n += 1
        base = os.path.join(self.dir, f"leaf{self.n}")
        ext = base + ".ext"
        lines = ["[leaf]", "basicConstraints = critical,CA:%s" % ("TRUE" if ca else "FALSE")]
        if ku:
            lines.append("keyUsage = critical,digitalSignature,keyEncipherment")
        lines.append("extendedKeyUsage = %s" % ("clientAuth" if client else "serverAuth"))
        if san:
            lines.append("subjectAltName = " + san)
        with open(ext, "w") as f:
            f.write("\n".join(lines) + "\n")
        run("openssl", "req", "-new", "-key", key, "-out", base + ".csr", "-subj", f"/CN={cn}")
        argv = ["openssl", "ca", "-batch", "-config", self.conf, "-in", base + ".csr",
                "-out", base + ".crt", "-notext", "-md", md, "-extfile", ext, "-extensions", "leaf"]
        if start:
            argv += ["-startdate", start]
        if end:
            argv += ["-enddate", end]
        run(*argv)
        return base + ".crt"

    def revoke(self, crt):
        run("openssl", "ca", "-config", self.conf, "-revoke", crt)

    def crl(self):
        out = os.path.join(self.dir, f"crl{self.n}.pem")
        self.n += 1
        run("openssl", "ca", "-config", self.conf, "-gencrl", "-out", out)
        return out


def rsa_key(path, bits=3072):
    run("openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", f"rsa_keygen_bits:{bits}",
        "-out", path)
    return path


def encrypt_key(src, dst, passphrase):
    """PKCS#8 with AES-256 (the 'ENCRYPTED PRIVATE KEY' PEM the daemon and dyno detect)."""
    run("openssl", "pkcs8", "-topk8", "-in", src, "-out", dst, "-v2", "aes-256-cbc",
        "-passout", "pass:" + passphrase)
    return dst


def certs_dir(path, role, ca_crt, crt, key, crl=None):
    """A --certs_dir / --certs-dir: <role>.crt, <role>.key, ca.crt and optional ca.crl."""
    os.makedirs(path, exist_ok=True)
    shutil.copy(ca_crt, os.path.join(path, "ca.crt"))
    shutil.copy(crt, os.path.join(path, role + ".crt"))
    shutil.copy(key, os.path.join(path, role + ".key"))
    os.chmod(os.path.join(path, role + ".key"), 0o600)
    if crl:
        shutil.copy(crl, os.path.join(path, "ca.crl"))
    return path
