#!/usr/bin/env bash
# make_certs.sh DIR: a CA and a server/client pair (RSA 3072, SHA-256, SAN localhost +
# 127.0.0.1) in DIR/server and DIR/client, laid out as --certs_dir / --certs-dir want them.
set -euo pipefail
d=$1
mkdir -p "$d/server" "$d/client"
cd "$d"
q() { "$@" >/dev/null 2>&1; }
q openssl req -x509 -newkey rsa:3072 -nodes -keyout ca.key -out ca.crt -days 2 -sha256 -subj /CN=bench-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
for role in server client; do
  eku=serverAuth; san="subjectAltName=DNS:localhost,IP:127.0.0.1"
  [ $role = client ] && { eku=clientAuth; san=""; }
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n%s\n' \
    "$eku" "$san" > $role.ext
  q openssl req -new -newkey rsa:3072 -nodes -keyout $role/$role.key -out $role.csr -subj /CN=$role
  q openssl x509 -req -in $role.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $role/$role.crt -days 2 \
    -sha256 -extfile $role.ext
  cp ca.crt $role/ca.crt
  chmod 600 $role/$role.key
done
