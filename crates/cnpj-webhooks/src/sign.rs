//! Delivery signatures: `X-Registry-Signature: sha256=<hex>`, the HMAC-SHA256 of the timestamp
//! (`X-Registry-Timestamp`, Unix seconds), a dot and the raw body, keyed by the list's secret. A
//! receiver recomputes it over the bytes it got and compares, and refuses old timestamps.

use hmac::{Hmac, KeyInit, Mac};
use sha2_0_11::Sha256;

pub const SIGNATURE_PREFIX: &str = "sha256=";

/// The value of `X-Registry-Signature` for `body` sent at `timestamp`.
pub fn signature(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("{SIGNATURE_PREFIX}{}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(secret: &str, timestamp: &str, body: &[u8], expected: &str) {
        assert_eq!(signature(secret, timestamp, body), format!("sha256={expected}"), "{secret} {timestamp}");
    }

    #[test]
    fn signatures_are_hmac_sha256_of_timestamp_dot_body() {
        // Python: hmac.new(b"whsec_test", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
        check(
            "whsec_test",
            "1700000000",
            br#"{"a":1}"#,
            "38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789",
        );
        assert_ne!(signature("whsec_a", "1700000000", b"{}"), signature("whsec_a", "1700000001", b"{}"));
        assert_ne!(signature("whsec_a", "1700000000", b"{}"), signature("whsec_b", "1700000000", b"{}"));
    }
}
