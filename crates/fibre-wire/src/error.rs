//! The one error type of the crate: small and `Copy`, so the data path can count it per drop
//! reason without allocating.

use core::fmt;

/// Why bytes could not be read as a header, or a header as a `Repr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer ends before the header (or a length field inside it) says it does.
    Truncated,
    /// A field holds a value the protocol forbids (a version, a length below the minimum, an
    /// option that overruns its header).
    Malformed,
    /// A checksum does not verify. Only `verify_checksum` returns it: parsing never checks.
    Checksum,
    /// Well-formed, but of a kind this crate does not turn into a `Repr` (an ARP packet for
    /// another hardware type, an extension-header chain longer than the bound).
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::Checksum => "bad checksum",
            Error::Unsupported => "unsupported packet",
        })
    }
}

impl core::error::Error for Error {}

/// The result of every fallible call in the crate.
pub type Result<T> = core::result::Result<T, Error>;
