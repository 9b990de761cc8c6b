//! IOAM namespaces and schemas (`ip ioam namespace|schema`; the kernel's net/ipv6/ioam6.c,
//! configured over generic netlink): what a transit node writes into an IOAM trace for a
//! namespace (its short and wide namespace data, the opaque state of its schema).
//!
//! Invariants: a namespace refers to at most one schema and a schema to at most one namespace,
//! each the other's (setting a schema on a namespace takes it from any other); deleting either
//! side clears the other's reference. A schema's data is kept padded with zeros to a multiple
//! of 4 bytes, as the kernel keeps it. Data equal to the "unavailable" value (all ones) is the
//! same as none, as the kernel reports it.

use std::collections::BTreeMap;

use crate::types::{Errno, RtError};

/// The data value meaning "not available" (IOAM6_U32_UNAVAILABLE, IOAM6_U64_UNAVAILABLE).
const U32_UNAVAILABLE: u32 = u32::MAX;
const U64_UNAVAILABLE: u64 = u64::MAX;

/// The most schema data iproute2 sends and the kernel takes (IOAM6_MAX_SCHEMA_DATA_LEN).
pub const SCHEMA_DATA_MAX: usize = 255 * 4;

/// One IOAM namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Namespace {
    pub data: Option<u32>,
    pub wide: Option<u64>,
    pub schema: Option<u32>,
}

/// One IOAM schema.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    /// Padded with zeros to a multiple of 4 bytes.
    pub data: Vec<u8>,
    pub namespace: Option<u16>,
}

/// The namespace's IOAM configuration.
#[derive(Debug, Clone, Default)]
pub struct Ioam {
    namespaces: BTreeMap<u16, Namespace>,
    schemas: BTreeMap<u32, Schema>,
}

impl Ioam {
    /// ioam6_genl_addns: EEXIST for an id in use.
    pub fn add_namespace(
        &mut self,
        id: u16,
        data: Option<u32>,
        wide: Option<u64>,
    ) -> Result<(), RtError> {
        if self.namespaces.contains_key(&id) {
            return Err(RtError::new(Errno::EEXIST));
        }
        let ns = Namespace {
            data: data.filter(|d| *d != U32_UNAVAILABLE),
            wide: wide.filter(|w| *w != U64_UNAVAILABLE),
            schema: None,
        };
        self.namespaces.insert(id, ns);
        Ok(())
    }

    /// ioam6_genl_delns: ENOENT for an unknown id.
    pub fn del_namespace(&mut self, id: u16) -> Result<(), RtError> {
        let ns = self
            .namespaces
            .remove(&id)
            .ok_or(RtError::new(Errno::ENOENT))?;
        if let Some(sc) = ns.schema.and_then(|s| self.schemas.get_mut(&s)) {
            sc.namespace = None;
        }
        Ok(())
    }

    /// ioam6_genl_addsc: EEXIST for an id in use.
    pub fn add_schema(&mut self, id: u32, data: &[u8]) -> Result<(), RtError> {
        if self.schemas.contains_key(&id) {
            return Err(RtError::new(Errno::EEXIST));
        }
        let mut data = data.to_vec();
        data.resize(data.len().next_multiple_of(4), 0);
        self.schemas.insert(
            id,
            Schema {
                data,
                namespace: None,
            },
        );
        Ok(())
    }

    /// ioam6_genl_delsc: ENOENT for an unknown id.
    pub fn del_schema(&mut self, id: u32) -> Result<(), RtError> {
        let sc = self
            .schemas
            .remove(&id)
            .ok_or(RtError::new(Errno::ENOENT))?;
        if let Some(ns) = sc.namespace.and_then(|n| self.namespaces.get_mut(&n)) {
            ns.schema = None;
        }
        Ok(())
    }

    /// ioam6_genl_ns_set_schema: `None` detaches; ENOENT for an unknown namespace or schema.
    pub fn set_schema(&mut self, ns_id: u16, schema: Option<u32>) -> Result<(), RtError> {
        let enoent = || RtError::new(Errno::ENOENT);
        if !self.namespaces.contains_key(&ns_id) {
            return Err(enoent());
        }
        if let Some(s) = schema {
            if !self.schemas.contains_key(&s) {
                return Err(enoent());
            }
        }
        let old = self.namespaces.get(&ns_id).and_then(|n| n.schema);
        if let Some(sc) = old.and_then(|s| self.schemas.get_mut(&s)) {
            sc.namespace = None;
        }
        if let Some(sc) = schema.and_then(|s| self.schemas.get_mut(&s)) {
            let taken = sc.namespace.replace(ns_id);
            if let Some(other) = taken.and_then(|n| self.namespaces.get_mut(&n)) {
                other.schema = None;
            }
        }
        if let Some(ns) = self.namespaces.get_mut(&ns_id) {
            ns.schema = schema;
        }
        Ok(())
    }

    /// Namespaces by id.
    pub fn namespaces(&self) -> impl Iterator<Item = (u16, &Namespace)> {
        self.namespaces.iter().map(|(k, v)| (*k, v))
    }

    /// Schemas by id.
    pub fn schemas(&self) -> impl Iterator<Item = (u32, &Schema)> {
        self.schemas.iter().map(|(k, v)| (*k, v))
    }

    /// The namespace a trace names, for a transit node to fill its data.
    pub fn namespace(&self, id: u16) -> Option<&Namespace> {
        self.namespaces.get(&id)
    }

    /// The schema a namespace refers to, for its opaque state snapshot.
    pub fn schema(&self, id: u32) -> Option<&Schema> {
        self.schemas.get(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_stay_mutual() {
        let mut io = Ioam::default();
        io.add_namespace(1, Some(0xdead_beef), None).unwrap();
        io.add_namespace(2, Some(U32_UNAVAILABLE), Some(7)).unwrap();
        assert_eq!(
            io.add_namespace(1, None, None),
            Err(RtError::new(Errno::EEXIST))
        );
        assert_eq!(io.namespace(2).unwrap().data, None);
        io.add_schema(5, b"abc").unwrap();
        assert_eq!(io.schemas().next().unwrap().1.data, b"abc\0");
        io.set_schema(1, Some(5)).unwrap();
        io.set_schema(2, Some(5)).unwrap();
        assert_eq!(io.namespace(1).unwrap().schema, None);
        assert_eq!(io.namespace(2).unwrap().schema, Some(5));
        assert_eq!(io.schemas().next().unwrap().1.namespace, Some(2));
        io.del_namespace(2).unwrap();
        assert_eq!(io.schemas().next().unwrap().1.namespace, None);
        assert_eq!(io.set_schema(2, None), Err(RtError::new(Errno::ENOENT)));
        assert_eq!(io.set_schema(1, Some(6)), Err(RtError::new(Errno::ENOENT)));
        io.set_schema(1, Some(5)).unwrap();
        io.del_schema(5).unwrap();
        assert_eq!(io.namespace(1).unwrap().schema, None);
        assert_eq!(io.del_schema(5), Err(RtError::new(Errno::ENOENT)));
    }
}
