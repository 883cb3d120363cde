//! A scenario file's `[race]` table read group by group: each key goes to the option group that claims it, and a bad key or value is refused at its own line and column.
//!
//! serde's `flatten` would read the groups too, but it buffers the table
//! first: an error then points at the table's header and
//! `deny_unknown_fields` stops working. Here the table is walked once.
//! Each key is checked against the keys the groups declare (serde's own
//! field lists, asked for with [`keys_of`]), so an unknown key fails while
//! its key is read; each value is read by its group straight from the
//! file, as a map of that one entry, so a bad value fails where it is
//! wrong, inside a table too. What the group read is kept as TOML, and
//! the values a group claims are then handed to it whole.

use std::fmt;
use std::marker::PhantomData;
use std::sync::OnceLock;

use serde::Serialize;

use crate::limits::Origin;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor,
};

/// One option group as the table reads it with `A`: the keys it claims,
/// and how one of its values is read.
pub struct Group<A, E> {
    pub keys: &'static [&'static str],
    pub read: fn(&mut A, &str) -> Result<toml::Value, E>,
}

impl<'de, A: MapAccess<'de>> Group<A, A::Error> {
    /// The group that deserialises as `G`.
    pub fn of<G: DeserializeOwned + Serialize>() -> Group<A, A::Error> {
        Group {
            keys: keys_of::<G>(),
            read: |map, key| map.next_value_seed(Field::<G>(key, PhantomData)),
        }
    }
}

/// Reads a table into one value table per group, in the order of `groups`.
pub fn split<'de, A: MapAccess<'de>>(
    mut map: A,
    groups: &[Group<A, A::Error>],
    every_key: &'static [&'static str],
) -> Result<Vec<toml::Table>, A::Error> {
    let mut tables = vec![toml::Table::new(); groups.len()];
    while let Some(key) = map.next_key_seed(KnownKey(every_key))? {
        let at = groups
            .iter()
            .position(|g| g.keys.contains(&key.as_str()))
            .expect("every known key belongs to a group");
        let value = (groups[at].read)(&mut map, &key)?;
        tables[at].insert(key, value);
    }
    Ok(tables)
}

/// The keys of every group, in order, gathered once.
pub fn all_keys<A, E>(
    cell: &'static OnceLock<Vec<&'static str>>,
    groups: &[Group<A, E>],
) -> &'static [&'static str] {
    cell.get_or_init(|| groups.iter().flat_map(|g| g.keys.iter().copied()).collect())
}

/// A key, refused at its own place unless a group reads it.
struct KnownKey(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for KnownKey {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl Visitor<'_> for KnownKey {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a setting's name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<String, E> {
        match self.0.contains(&key) {
            true => Ok(key.to_string()),
            false => Err(E::unknown_field(key, self.0)),
        }
    }
}

/// One value, read by its group `G` straight from the file (so that an
/// error points inside it), then kept as TOML for the group's whole read.
struct Field<'a, G>(&'a str, PhantomData<G>);

impl<'de, G: DeserializeOwned + Serialize> DeserializeSeed<'de> for Field<'_, G> {
    type Value = toml::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<toml::Value, D::Error> {
        let key = self.0;
        let partial = G::deserialize(OneEntry { key, value: d })?;
        let written = toml::Table::try_from(&partial).map_err(de::Error::custom)?;
        let value = written
            .get(key)
            .cloned()
            .ok_or_else(|| de::Error::custom(format!("{key} could not be kept")))?;
        // Out of its bound, refused where it stands.
        crate::limits::check_race_value(&format!("race.{key}"), &value, Origin::File)
            .map_err(de::Error::custom)?;
        Ok(value)
    }
}

/// A map of one entry, `key` and the value `value` deserialises: how a
/// group reads one of its fields.
struct OneEntry<'a, D> {
    key: &'a str,
    value: D,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for OneEntry<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        visitor.visit_map(OneEntryAccess {
            key: Some(self.key),
            value: Some(self.value),
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

struct OneEntryAccess<'a, D> {
    key: Option<&'a str>,
    value: Option<D>,
}

impl<'de, D: Deserializer<'de>> MapAccess<'de> for OneEntryAccess<'_, D> {
    type Error = D::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, D::Error> {
        match self.key.take() {
            Some(key) => seed.deserialize(key.into_deserializer()).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, D::Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::custom("a value read twice")),
        }
    }
}

/// The names serde's derive gives `deserialize_struct` for `G`: the keys
/// it reads.
pub fn keys_of<G: DeserializeOwned>() -> &'static [&'static str] {
    match G::deserialize(Probe) {
        Err(Fields(keys)) => keys,
        Ok(_) => &[],
    }
}

/// A deserializer that only asks a struct for its fields.
struct Probe;

/// What [`Probe`] learns, carried out as its error.
#[derive(Debug)]
struct Fields(&'static [&'static str]);

impl fmt::Display for Fields {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "fields {:?}", self.0)
    }
}

impl std::error::Error for Fields {}

impl de::Error for Fields {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Fields(&[])
    }
}

impl<'de> Deserializer<'de> for Probe {
    type Error = Fields;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Fields> {
        Err(Fields(&[]))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Fields> {
        Err(Fields(fields))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map enum identifier ignored_any
    }
}
