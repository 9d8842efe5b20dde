//! An OCI archive, as `image/oci.sh` writes it (a tar of an OCI image layout): the digest of
//! the one manifest its `index.json` names, which is the digest a registry reports once the
//! image is pushed unchanged.
//!
//! Read without unpacking: the tar's headers are walked, and the blobs seeked over, until
//! `index.json` (which `image/oci.sh` puts before the blobs, so a 1.4 GiB archive costs a few
//! blocks).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// A tar block: headers are one, contents are padded to whole ones.
const BLOCK: u64 = 512;

/// The most a header's extra data (a pax record, a GNU long name) or `index.json` may hold.
const SMALL_FILE: u64 = 16 << 20;

/// Why an archive's manifest digest could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("cannot read it")]
    Read(#[source] std::io::Error),
    #[error("it has no index.json: it is not an OCI archive")]
    NoIndex,
    #[error("its index.json is not an OCI image index")]
    Index(#[source] serde_json::Error),
    #[error(
        "its index.json names {count} manifests; an archive of `image/node-images.sh` holds one"
    )]
    Manifests { count: usize },
}

/// `index.json` of an OCI layout: only what is read here.
#[derive(serde::Deserialize)]
struct Index {
    manifests: Vec<Descriptor>,
}

#[derive(serde::Deserialize)]
struct Descriptor {
    digest: String,
}

/// The digest (`sha256:<hex>`) of the manifest the archive at `path` holds.
pub fn manifest_digest(path: &Path) -> Result<String, ArchiveError> {
    let file = std::fs::File::open(path).map_err(ArchiveError::Read)?;
    let mut reader = std::io::BufReader::new(file);
    let index = entry(&mut reader, "index.json")
        .map_err(ArchiveError::Read)?
        .ok_or(ArchiveError::NoIndex)?;
    let index: Index = serde_json::from_slice(&index).map_err(ArchiveError::Index)?;
    match index.manifests.as_slice() {
        [one] => Ok(one.digest.clone()),
        many => Err(ArchiveError::Manifests { count: many.len() }),
    }
}

/// The contents of the regular file `name` (`./name` too) in the tar `reader`, or `None` when
/// it has none.
fn entry(reader: &mut (impl Read + Seek), name: &str) -> std::io::Result<Option<Vec<u8>>> {
    let mut header = [0u8; BLOCK as usize];
    // The name a pax or GNU long-name header gave the entry after it.
    let mut next_name: Option<String> = None;
    loop {
        if !read_block(reader, &mut header)? || header.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        let size = number(&header[124..136]);
        let own_name = next_name.take().unwrap_or_else(|| header_name(&header));
        match header[156] {
            b'x' => next_name = pax_path(&read_contents(reader, size)?),
            b'L' => next_name = Some(text(&read_contents(reader, size)?)),
            b'0' | 0 if own_name.trim_start_matches("./") == name => {
                return read_contents(reader, size).map(Some);
            }
            _ => {
                reader.seek(SeekFrom::Current(padded(size) as i64))?;
            }
        }
    }
}

/// Fill `block`; `false` at the end of the input.
fn read_block(reader: &mut impl Read, block: &mut [u8]) -> std::io::Result<bool> {
    match reader.read_exact(block) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(error) => Err(error),
    }
}

/// An entry's `size` bytes, and the padding after them skipped.
fn read_contents(reader: &mut (impl Read + Seek), size: u64) -> std::io::Result<Vec<u8>> {
    if size > SMALL_FILE {
        return Err(std::io::Error::other(format!(
            "an entry of {size} bytes where a small file was expected"
        )));
    }
    let mut contents = vec![0; size as usize];
    reader.read_exact(&mut contents)?;
    reader.seek(SeekFrom::Current((padded(size) - size) as i64))?;
    Ok(contents)
}

/// `size` rounded up to whole blocks.
fn padded(size: u64) -> u64 {
    size.div_ceil(BLOCK) * BLOCK
}

/// A header's number field: octal digits, or big-endian binary when its first bit is set.
fn number(field: &[u8]) -> u64 {
    if field[0] & 0x80 != 0 {
        let tail = &field[field.len().saturating_sub(8)..];
        return tail.iter().fold(0, |n, &b| (n << 8) | u64::from(b));
    }
    let digits = text(field);
    u64::from_str_radix(digits.trim(), 8).unwrap_or(0)
}

/// The entry's name: ustar's prefix and name, joined.
fn header_name(header: &[u8]) -> String {
    let name = text(&header[0..100]);
    let prefix = text(&header[345..500]);
    if &header[257..262] == b"ustar" && !prefix.is_empty() {
        format!("{prefix}/{name}")
    } else {
        name
    }
}

/// The `path` record of a pax extended header, if it has one.
fn pax_path(records: &[u8]) -> Option<String> {
    String::from_utf8_lossy(records)
        .lines()
        .find_map(|record| Some(record.split_once(" path=")?.1.to_owned()))
}

/// Bytes up to the first NUL, as text.
fn text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::{BLOCK, entry};

    /// A tar entry: a header with `name`, `kind` and the size, then `contents`, padded.
    fn tar_entry(name: &str, kind: u8, contents: &[u8]) -> Vec<u8> {
        let mut header = vec![0u8; BLOCK as usize];
        header[..name.len()].copy_from_slice(name.as_bytes());
        let size = format!("{:011o}", contents.len());
        header[124..135].copy_from_slice(size.as_bytes());
        header[156] = kind;
        header[257..262].copy_from_slice(b"ustar");
        let mut bytes = header;
        bytes.extend_from_slice(contents);
        bytes.resize(bytes.len().div_ceil(BLOCK as usize) * BLOCK as usize, 0);
        bytes
    }

    #[test]
    fn the_file_is_found_past_other_entries_and_under_a_pax_name() {
        let mut tar = tar_entry("oci-layout", b'0', b"{}");
        tar.extend(tar_entry("blobs/sha256/aa", b'0', &[7; 1000]));
        tar.extend(tar_entry("PaxHeaders/x", b'x', b"30 path=./index.json\n"));
        tar.extend(tar_entry("shortened", b'0', b"{\"manifests\": []}"));
        tar.extend([0; 2 * BLOCK as usize]);
        let found = entry(&mut Cursor::new(&tar), "index.json").unwrap();
        assert_eq!(found.as_deref(), Some(&b"{\"manifests\": []}"[..]));
        assert_eq!(entry(&mut Cursor::new(&tar), "missing").unwrap(), None);
        // A tar cut short ends the search, as its end would.
        assert_eq!(entry(&mut Cursor::new(&tar[..700]), "x").unwrap(), None);
    }
}
