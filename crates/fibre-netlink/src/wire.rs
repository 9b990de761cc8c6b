//! Typed views over fixed-size C structures, in smoltcp's style.
//!
//! [`fixed_header!`] declares, for one C structure, a view `XxxPacket<T: AsRef<[u8]>>` with a
//! getter per field (and a setter when `T: AsMut<[u8]>`) and a plain copy `Xxx` with `parse` and
//! `emit`. Panic contract of the views: `new_unchecked` accepts any buffer and the accessors
//! panic if it is shorter than the structure; `new_checked` returns
//! [`DecodeError::Truncated`] instead, after which no accessor can panic. Fields are in host
//! byte order, as netlink carries them; padding and reserved fields are kept as fields so that
//! a parsed structure re-emits byte for byte.

/// A fixed-width integer stored in host byte order.
pub trait Field: Copy {
    const SIZE: usize;
    /// Reads the field from the start of `b`; panics if `b` is shorter than `SIZE`.
    fn read(b: &[u8]) -> Self;
    /// Writes the field at the start of `b`; panics if `b` is shorter than `SIZE`.
    fn write(self, b: &mut [u8]);
}

macro_rules! impl_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_ne_bytes(a)
            }
            fn write(self, b: &mut [u8]) {
                b[..Self::SIZE].copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
impl_field!(u8, u16, u32, i32, u64);

/// Declares a view and a plain copy of a fixed-size C structure; see the module documentation.
macro_rules! fixed_header {
    (
        $(#[$rm:meta])* pub struct $repr:ident;
        $(#[$pm:meta])* pub struct $packet:ident;
        len = $len:expr, what = $what:expr;
        { $( $(#[$fm:meta])* $field:ident, $setter:ident: $ty:ty = $off:expr; )* }
    ) => {
        $(#[$pm])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        #[allow(clippy::len_without_is_empty)]
        impl<T: AsRef<[u8]>> $packet<T> {
            /// Size of the structure in bytes.
            pub const LEN: usize = $len;

            /// Wraps `buffer` without checking its length; accessors panic if it is too short.
            pub fn new_unchecked(buffer: T) -> Self {
                $packet { buffer }
            }

            /// Wraps `buffer` after checking it holds the whole structure, so that no accessor
            /// can panic. `offset` locates the buffer in the caller's input, for the error.
            pub fn new_checked(buffer: T, offset: usize) -> Result<Self, $crate::DecodeError> {
                let have = buffer.as_ref().len();
                if have < $len {
                    return Err($crate::DecodeError::Truncated { what: $what, offset, need: $len, have });
                }
                Ok($packet { buffer })
            }

            pub fn into_inner(self) -> T {
                self.buffer
            }

            $(
                $(#[$fm])*
                pub fn $field(&self) -> $ty {
                    <$ty as $crate::wire::Field>::read(&self.buffer.as_ref()[$off..])
                }
            )*
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $packet<T> {
            $(
                pub fn $setter(&mut self, value: $ty) {
                    <$ty as $crate::wire::Field>::write(value, &mut self.buffer.as_mut()[$off..])
                }
            )*
        }

        $(#[$rm])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $repr {
            $( $(#[$fm])* pub $field: $ty, )*
        }

        impl $repr {
            /// Size of the structure in bytes.
            pub const LEN: usize = $len;

            /// Copies the fields out of a checked view.
            pub fn parse<T: AsRef<[u8]>>(packet: &$packet<T>) -> Self {
                $repr { $( $field: packet.$field(), )* }
            }

            /// Parses the structure at the start of `buf`; `offset` locates `buf` for errors.
            pub fn parse_bytes(buf: &[u8], offset: usize) -> Result<Self, $crate::DecodeError> {
                Ok(Self::parse(&$packet::new_checked(buf, offset)?))
            }

            /// Appends the structure to `out`.
            pub fn emit(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_bytes());
            }

            /// The structure's bytes: built in an array whose length the compiler knows, so
            /// that no field's write is checked at run time.
            pub fn to_bytes(&self) -> [u8; $len] {
                let mut bytes = [0u8; $len];
                let mut packet = $packet::new_unchecked(&mut bytes[..]);
                $( packet.$setter(self.$field); )*
                bytes
            }
        }
    };
}
pub(crate) use fixed_header;
