//! The files idem reads: regular files only, opened without blocking, read up to a stated size.
//!
//! A path given on the command line may name a FIFO (whose open blocks
//! until a writer comes, and Ctrl-C with it), a device such as `/dev/zero`
//! (endless), or a directory. Each file idem reads is opened with
//! `O_NONBLOCK`, so the open itself never waits, is refused in one line
//! unless it is a regular file, and is read no further than its limit.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use anyhow::{Result, bail};

/// The most a scenario file may hold.
pub const MAX_SCENARIO_BYTES: u64 = 1024 * 1024;

/// The most a PEM file (a certificate, a chain, a key) may hold.
pub const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// `path`'s bytes, if it is a regular file of at most `limit` bytes;
/// `what` names it in a message (`--cacert`, `scenario file`).
pub fn read_regular(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    read_named(path, limit, &format!("{what} {}", path.display()))
}

/// [`read_regular`], with the file named in messages as `named` says
/// (`--data @big.json`, as the user wrote it).
pub fn read_named(path: &Path, limit: u64, named: &str) -> Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| anyhow::anyhow!("{named}: could not read it: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| anyhow::anyhow!("{named}: could not read it: {e}"))?;
    if !meta.is_file() {
        bail!(
            "{named} is not a regular file ({}); give a file",
            kind(&meta)
        );
    }
    let too_big = || anyhow::anyhow!("{named} is over {}, the most idem reads", size(limit));
    if meta.len() > limit {
        return Err(too_big());
    }
    // The file may grow while it is read: one byte past the limit tells.
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| anyhow::anyhow!("{named}: could not read it: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(bytes)
}

/// `bytes` as a person reads a limit: `4 bytes`, `65536 bytes (64 KiB)`,
/// `1048576 bytes (1 MiB)`.
pub fn size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    match bytes {
        b if b >= MIB && b % MIB == 0 => format!("{b} bytes ({} MiB)", b / MIB),
        b if b >= KIB && b % KIB == 0 => format!("{b} bytes ({} KiB)", b / KIB),
        b if b >= KIB => format!("{b} bytes ({:.1} KiB)", b as f64 / KIB as f64),
        b => format!("{b} bytes"),
    }
}

/// `path`'s text, read as [`read_regular`] reads, and UTF-8.
pub fn read_text(path: &Path, limit: u64, what: &str) -> Result<String> {
    let bytes = read_regular(path, limit, what)?;
    String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{what} {} is not UTF-8 text", path.display()))
}

/// `text`, the TOML file `name`, read as a `T`; an error is one line naming
/// the file and the line it is on.
pub fn parse_toml<T: serde::de::DeserializeOwned>(name: &str, text: &str) -> Result<T> {
    toml::from_str(text).map_err(|err| {
        let line = err
            .span()
            .map(|span| format!(" line {}", line_at(text, span.start)));
        anyhow::anyhow!(
            "{name}{}: {}",
            line.unwrap_or_default(),
            err.message().trim().replace('\n', " ")
        )
    })
}

/// The line (from 1) of byte `at` in `text`.
pub fn line_at(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// What a file that is not a regular one is, for a message.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_within_its_limit_is_read() {
        let err = read_regular(Path::new("/dev/zero"), 10, "--cacert").unwrap_err();
        assert_eq!(
            err.to_string(),
            "--cacert /dev/zero is not a regular file (a device); give a file"
        );
        let err = read_regular(Path::new("/"), 10, "x").unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        let dir = std::env::temp_dir().join(format!("idem-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_regular(&file, 5, "x").unwrap(), b"12345");
        assert!(
            read_regular(&file, 4, "x")
                .unwrap_err()
                .to_string()
                .contains("over 4 bytes")
        );
        let named = read_named(&file, 4, "--data @f").unwrap_err().to_string();
        assert_eq!(size(65536), "65536 bytes (64 KiB)");
        assert_eq!(size(1 << 20), "1048576 bytes (1 MiB)");
        assert_eq!(size(1500), "1500 bytes (1.5 KiB)");
        assert!(named.starts_with("--data @f is over 4 bytes"), "{named}");
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_regular(&fifo, 10, "scenario file").unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
