#!/usr/bin/env bash
# scripts/dev/make-certs.sh - test certificates with the openssl command: a CA, a server certificate for
# localhost, 127.0.0.1 and ::1 (plus any names or IPs given), a client certificate, and a second CA with a
# client certificate of its own (to see a certificate from another CA refused). Not for production: the
# keys are unencrypted and the CAs are throwaway.
#   scripts/dev/make-certs.sh DIR [NAME|IP ...]
# Writes DIR/ca.pem, server.pem, server.key, client.pem, client.key, other-ca.pem, other-client.pem,
# other-client.key.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/dev/make-certs.sh DIR [NAME|IP ...]" >&2; exit 2; }
dir=$1
shift
mkdir -p "$dir"
cd "$dir"
sans="DNS:localhost,IP:127.0.0.1,IP:::1"
for n in "$@"; do
  if [[ $n =~ ^[0-9.]+$ || $n == *:* ]]; then sans="$sans,IP:$n"; else sans="$sans,DNS:$n"; fi
done
ca() {   # ca NAME
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=$1" \
    -keyout "$1.key" -out "$1.pem" 2> /dev/null
}
leaf() {   # leaf NAME CA EXT
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" -keyout "$1.key" -out "$1.csr" \
    2> /dev/null
  printf '%s\n' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 30 -extfile "$1.ext" \
    -out "$1.pem" 2> /dev/null
  rm -f "$1.csr" "$1.ext"
}
ca ca
ca other-ca
leaf server ca "subjectAltName=$sans
extendedKeyUsage=serverAuth,clientAuth"
leaf client ca "extendedKeyUsage=clientAuth"
leaf other-client other-ca "extendedKeyUsage=clientAuth"
rm -f ./*.srl ca.key other-ca.key
echo "make-certs: $dir: ca.pem server.pem/.key ($sans) client.pem/.key other-ca.pem other-client.pem/.key"
