//! The DynamoDB stream event Lambda hands the indexer, decoded straight from its JSON into what
//! the indexer reads: each record's event name, keys, sequence number and images, with every
//! string borrowed from the event's text (owned only when it holds an escape). Nothing else of
//! a record is kept, and no image is copied into an owned attribute map first.
//!
//! Every DynamoDB attribute type decodes, so a record of an item the API would never write still
//! reaches the indexer (which parks it) instead of failing the whole batch's decoding.

use std::borrow::{Borrow, Cow};
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};

use crate::model::codec::AttrView;

/// A string of the event: borrowed from its JSON text unless it holds an escape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Str<'a>(pub Cow<'a, str>);

impl Str<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Str<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

// Hashes as the `str` it borrows as, so a map of them is looked up by `&str`.
impl Hash for Str<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(StrVisitor)
    }
}

/// An item as a stream record holds it (its keys, its new image). Hashed with foldhash: the
/// keys are attribute names and field ids, and SipHash was a tenth of the core's time.
pub type Image<'a> = HashMap<Str<'a>, Attr<'a>, foldhash::fast::RandomState>;

/// Room an image's map starts with: an issue item has 16 attributes, and a map that grows
/// rehashes (JSON says nothing of a map's size before it is read).
const IMAGE_ROOM: usize = 16;

/// An image, its map made with room for an issue item's attributes.
fn image<'de: 'a, 'a, D: Deserializer<'de>>(deserializer: D) -> Result<Image<'a>, D::Error> {
    struct ImageVisitor;
    impl<'de> Visitor<'de> for ImageVisitor {
        type Value = Image<'de>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of attribute values")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
            let room = map.size_hint().unwrap_or(IMAGE_ROOM);
            let mut out = HashMap::with_capacity_and_hasher(room, Default::default());
            while let Some((k, v)) = map.next_entry()? {
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    deserializer.deserialize_map(ImageVisitor)
}

/// [`image`], or none for `null` or an empty map (what some engines send for the image a
/// record does not have: an item always has its keys).
fn some_image<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Image<'a>>, D::Error> {
    #[derive(Deserialize)]
    struct Present<'a>(#[serde(borrow, deserialize_with = "image")] Image<'a>);
    Ok(Option::<Present<'a>>::deserialize(deserializer)?
        .map(|p| p.0)
        .filter(|i| !i.is_empty()))
}

/// A DynamoDB attribute value in the event's JSON: `{"S": "…"}`, `{"N": "…"}`, `{"M": {…}}`, …
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub enum Attr<'a> {
    #[serde(rename = "S", borrow)]
    S(Str<'a>),
    #[serde(rename = "N", borrow)]
    N(Str<'a>),
    #[serde(rename = "B", borrow)]
    B(Str<'a>),
    #[serde(rename = "SS", borrow)]
    Ss(Vec<Str<'a>>),
    #[serde(rename = "NS", borrow)]
    Ns(Vec<Str<'a>>),
    #[serde(rename = "BS", borrow)]
    Bs(Vec<Str<'a>>),
    #[serde(rename = "M", borrow, deserialize_with = "image")]
    M(Image<'a>),
    #[serde(rename = "L", borrow)]
    L(Vec<Attr<'a>>),
    #[serde(rename = "NULL")]
    Null(bool),
    #[serde(rename = "BOOL")]
    Bool(bool),
}

impl<'a> AttrView for Attr<'a> {
    type Key = Str<'a>;
    type Hasher = foldhash::fast::RandomState;
    fn s(&self) -> Option<&str> {
        match self {
            Self::S(s) => Some(s.as_str()),
            _ => None,
        }
    }
    fn n(&self) -> Option<&str> {
        match self {
            Self::N(n) => Some(n.as_str()),
            _ => None,
        }
    }
    fn ss(&self) -> Option<&[Str<'a>]> {
        match self {
            Self::Ss(v) => Some(v),
            _ => None,
        }
    }
    fn m(&self) -> Option<&Image<'a>> {
        match self {
            Self::M(m) => Some(m),
            _ => None,
        }
    }
}

/// A DynamoDB stream event: a batch of records of one shard, in order.
#[derive(Debug, Deserialize)]
pub struct StreamEvent<'a> {
    #[serde(rename = "Records", borrow)]
    pub records: Vec<StreamRecord<'a>>,
}

/// One record of the batch: what the indexer reads of it.
#[derive(Debug, Deserialize)]
pub struct StreamRecord<'a> {
    /// `INSERT`, `MODIFY` or `REMOVE`.
    #[serde(rename = "eventName", borrow, default)]
    pub event_name: Option<Str<'a>>,
    #[serde(borrow)]
    pub dynamodb: StreamChange<'a>,
}

/// The change a record carries (its `dynamodb` member).
#[derive(Debug, Default, Deserialize)]
pub struct StreamChange<'a> {
    /// When the change was made, in seconds since the epoch.
    #[serde(rename = "ApproximateCreationDateTime", default)]
    pub approximate_creation_date_time: Option<f64>,
    #[serde(rename = "Keys", borrow, default, deserialize_with = "image")]
    pub keys: Image<'a>,
    /// The item after the change (the stream's view type is `NEW_AND_OLD_IMAGES`); none on
    /// `REMOVE`.
    #[serde(rename = "NewImage", borrow, default, deserialize_with = "some_image")]
    pub new_image: Option<Image<'a>>,
    /// The item before the change, which an issue's history entry is the difference from;
    /// none on `INSERT`.
    #[serde(rename = "OldImage", borrow, default, deserialize_with = "some_image")]
    pub old_image: Option<Image<'a>>,
    #[serde(rename = "SequenceNumber", borrow, default)]
    pub sequence_number: Option<Str<'a>>,
}

impl StreamRecord<'_> {
    /// The record's sequence number (empty when it has none: no stream record lacks one).
    pub fn sequence_number(&self) -> &str {
        self.dynamodb
            .sequence_number
            .as_ref()
            .map_or("", Str::as_str)
    }

    /// A string attribute of the record's keys.
    pub fn key(&self, name: &str) -> Option<&str> {
        self.dynamodb.keys.get(name).and_then(AttrView::s)
    }
}

impl<'a> StreamEvent<'a> {
    /// Decodes a stream event from the JSON Lambda sends, borrowing from `json`.
    pub fn from_json(json: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }
}

impl StreamChange<'_> {
    /// When the change was made, in milliseconds since the epoch.
    pub fn created_ms(&self) -> Option<i64> {
        self.approximate_creation_date_time
            .map(|s| (s * 1000.0) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_borrowed_unless_escaped() {
        let e = StreamEvent::from_json(
            r##"{"Records":[{"eventName":"MODIFY","eventID":"x","dynamodb":{
                "ApproximateCreationDateTime":1763757723.5,
                "Keys":{"PK":{"S":"T#a#I#1"},"SK":{"S":"#ISSUE"}},
                "SequenceNumber":"100","SizeBytes":5,
                "NewImage":{"title":{"S":"say \"hi\""},"n":{"N":"5"},"l":{"L":[{"NULL":true},{"BOOL":false}]},
                  "m":{"M":{"x":{"SS":["a","b"]}}},"b":{"B":"AA=="},"ns":{"NS":["1"]},"bs":{"BS":["AA=="]}}}}]}"##,
        )
        .unwrap();
        let r = &e.records[0];
        assert_eq!(r.key("PK"), Some("T#a#I#1"));
        assert_eq!(r.sequence_number(), "100");
        assert_eq!(
            r.dynamodb.approximate_creation_date_time,
            Some(1763757723.5)
        );
        let image = r.dynamodb.new_image.as_ref().unwrap();
        assert!(matches!(
            &image.get("n"),
            Some(Attr::N(Str(Cow::Borrowed("5"))))
        ));
        assert!(
            matches!(&image.get("title"), Some(Attr::S(Str(Cow::Owned(t)))) if t == "say \"hi\"")
        );
        assert_eq!(image.len(), 7);
    }

    #[test]
    fn a_record_without_an_image_or_a_name_still_decodes() {
        let e = StreamEvent::from_json(r#"{"Records":[{"dynamodb":{}}]}"#).unwrap();
        assert!(e.records[0].event_name.is_none());
        assert_eq!(e.records[0].key("PK"), None);
        assert!(StreamEvent::from_json(r#"{"Records":[{}]}"#).is_err());
    }
}
