#!/bin/sh
# The strobe agent image's entry point: `strobe serve` with its token read from a file (a
# podman or docker secret), HTTPS with the mounted certificate, extra options passed on.
#
#   STROBE_LISTEN      address:port to listen on (default 0.0.0.0:8443)
#   STROBE_TOKEN_FILE  the token, 16+ characters of A-Z a-z 0-9 . _ ~ - (default
#                      /run/secrets/strobe-token: podman run --secret strobe-token)
#   STROBE_TLS_CERT, STROBE_TLS_KEY  PEM files (default /etc/strobe/tls/cert.pem, key.pem)
#   STROBE_PLAIN_HTTP=1  serve plain HTTP when no certificate is mounted (a trusted network only)
# Arguments after the image name are more `strobe serve` options (e.g. --location-map FILE).
set -eu
listen=${STROBE_LISTEN:-0.0.0.0:8443}
token_file=${STROBE_TOKEN_FILE:-/run/secrets/strobe-token}
cert=${STROBE_TLS_CERT:-/etc/strobe/tls/cert.pem}
key=${STROBE_TLS_KEY:-/etc/strobe/tls/key.pem}

if [ ! -r "$token_file" ]; then
    echo "strobe-agent: cannot read the token file $token_file (podman secret create" \
        "strobe-token FILE, then run with --secret strobe-token; or set STROBE_TOKEN_FILE)" >&2
    exit 2
fi
if [ -r "$cert" ] && [ -r "$key" ]; then
    set -- --tls-cert "$cert" --tls-key "$key" "$@"
elif [ "${STROBE_PLAIN_HTTP:-0}" != 1 ]; then
    echo "strobe-agent: no readable certificate and key at $cert and $key: mount them" \
        "(-v DIR:/etc/strobe/tls:ro) or set STROBE_PLAIN_HTTP=1 for plain HTTP" >&2
    exit 2
fi
exec /usr/bin/strobe serve --listen "$listen" --token-file "$token_file" "$@"
