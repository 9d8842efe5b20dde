//! Unpredictable bytes without a dependency: the standard library's per-process random hash
//! keys, mixed with the clock and the process id. For salts and ids that must differ, never for
//! secrets. A leaf: it imports nothing of the crate.

use std::hash::{BuildHasher, Hasher};

/// 16 unpredictable bytes.
pub fn bytes() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    for chunk in bytes.chunks_mut(8) {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        hasher.write_u32(std::process::id());
        chunk.copy_from_slice(&hasher.finish().to_le_bytes());
    }
    bytes
}

/// An app's id: 128 random bits in hex, unique, not secret.
pub fn id() -> String {
    bytes().iter().map(|b| format!("{b:02x}")).collect()
}
