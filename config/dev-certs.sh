#!/usr/bin/env bash
# Make throwaway TLS files for config/server-sasl-ssl.properties: a CA and a
# broker certificate for localhost and 127.0.0.1, in config/dev-certs/ (or
# the directory given). For development only: the keys are not protected.
#
#   bash config/dev-certs.sh            # config/dev-certs/{ca.pem,keystore.pem}
set -euo pipefail

OUT="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/dev-certs}"
mkdir -p "$OUT"
cd "$OUT"
curve=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${curve[@]}" -keyout ca.key -out ca.pem -days 365 \
    -subj "/CN=Runnel dev CA" 2>/dev/null
openssl req "${curve[@]}" -keyout broker.key -out broker.csr -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext
openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -out broker.pem -days 365 -extfile san.ext 2>/dev/null
cat broker.key broker.pem >keystore.pem
rm -f broker.csr san.ext ca.srl
echo "dev-certs: wrote $OUT/ca.pem (give it to clients) and $OUT/keystore.pem"
