//! The server's token: required from every client when the server listens beyond loopback
//! (or when one is given), for the OTG API and strobe's own endpoints alike. Clients send
//! it as `Authorization: Bearer TOKEN`, or as the password of basic authentication, which
//! is what HTTP clients (snappi's `requests` among them) send for a location URL with
//! credentials in it: `http://strobe:TOKEN@HOST:PORT`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::reply::error;

/// Whether a server on `address` must require a token: anything but loopback is reachable
/// from elsewhere.
pub fn needs_token(address: &SocketAddr) -> bool {
    !address.ip().is_loopback()
}

/// A fresh token: 128 bits from the operating system's random source, as hex.
pub fn new_token() -> String {
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The token a request carries, if any (bearer, or basic authentication's password).
fn presented(headers: &HeaderMap) -> Option<Vec<u8>> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, rest) = value.split_once(' ')?;
    match scheme.to_ascii_lowercase().as_str() {
        "bearer" => Some(rest.trim().as_bytes().to_vec()),
        "basic" => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(rest.trim())
                .ok()?;
            let colon = decoded.iter().position(|&b| b == b':')?;
            Some(decoded[colon + 1..].to_vec())
        }
        _ => None,
    }
}

/// Lets a request through only with the server's token (compared in constant time).
pub async fn require_token(
    State(token): State<Arc<str>>,
    request: Request,
    next: Next,
) -> Response {
    let ok = presented(request.headers())
        .is_some_and(|given| bool::from(given.as_slice().ct_eq(token.as_bytes())));
    if ok {
        return next.run(request).await;
    }
    let mut reply = error(
        401,
        "validation",
        vec![
            "this server requires its token (printed when it started, or given with --token): \
             send `Authorization: Bearer TOKEN`, or put it in the location URL, e.g. \
             snappi.api(location=\"http://strobe:TOKEN@HOST:PORT\")"
                .into(),
        ],
    )
    .into_response();
    reply.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"strobe\""),
    );
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_goes_without_a_token() {
        for (addr, needs) in [
            ("127.0.0.1:8443", false),
            ("127.0.0.2:8443", false),
            ("[::1]:8443", false),
            ("0.0.0.0:8443", true),
            ("198.18.0.1:8443", true),
            ("[::]:8443", true),
        ] {
            assert_eq!(needs_token(&addr.parse().unwrap()), needs, "{addr}");
        }
    }

    #[test]
    fn tokens_are_fresh_128_bit_hex() {
        let (a, b) = (new_token(), new_token());
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn bearer_and_basic_credentials_are_read() {
        let with = |value: &str| {
            let mut h = HeaderMap::new();
            h.insert(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            presented(&h)
        };
        assert_eq!(with("Bearer abc").as_deref(), Some(&b"abc"[..]));
        // "strobe:abc" and ":a:b" (the password may hold colons; the user may be empty).
        assert_eq!(with("Basic c3Ryb2JlOmFiYw==").as_deref(), Some(&b"abc"[..]));
        assert_eq!(with("basic OmE6Yg==").as_deref(), Some(&b"a:b"[..]));
        assert_eq!(with("Basic !!!"), None);
        assert_eq!(with("Digest abc"), None);
        assert_eq!(presented(&HeaderMap::new()), None);
    }
}
