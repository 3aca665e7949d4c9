//! JSON as the browser reads it: text → one `serde_json::Value` → the type wanted.
//!
//! Why a detour: serde_json's reader of text is generic over the type it fills, so every type
//! read straight from text carries its own copy of the parser in the wasm bundle (5–9 KB
//! each: the frames, the props, every REST answer). Read through a `Value`, the text parser
//! is compiled once and each type only walks a tree, for a tree's allocations per read (frames
//! and pages are small). The server and the tests read text directly, as before.
//!
//! [`ServerProps`] does the same for an island's props, which Leptos reads from the page, and
//! keeps their serializer out of the browser (only the server writes props).
//!
//! Numbers: the browser's serde_json is built without `float_roundtrip` (17 KB of exact decimal
//! reading; only the server's Cargo.toml asks for it). A decimal of up to 15 significant digits
//! with a power of ten up to 22 still reads as the closest double; a longer one may read one
//! step (ulp) away. The browser only shows the numbers it reads (tool inputs and results,
//! usage); what it sends is built from what a person typed or clicked.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Reads `text` as a `T`; the error says what was wrong, as serde_json's does (in the browser
/// without a line and column: the text is one frame or one answer).
pub fn read<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    #[cfg(feature = "hydrate")]
    {
        serde_json::from_value(serde_json::from_str::<serde_json::Value>(text)?)
    }
    #[cfg(not(feature = "hydrate"))]
    {
        serde_json::from_str(text)
    }
}

/// An island's prop: written into the page by the server, read by the browser through
/// [`read`]'s detour. The browser never writes one (it hydrates islands the server drew and
/// creates none), so there it serializes as nothing and the value's serializer is not compiled
/// into the bundle.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerProps<T>(pub T);

impl<T: Serialize> Serialize for ServerProps<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[cfg(feature = "ssr")]
        {
            self.0.serialize(serializer)
        }
        #[cfg(not(feature = "ssr"))]
        {
            serializer.serialize_unit()
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for ServerProps<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        serde_json::from_value(value).map(ServerProps).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Row {
        id: u64,
        name: Option<String>,
    }

    #[test]
    fn reads_what_serde_json_reads_and_refuses_what_it_refuses() {
        let cases: [(&str, Option<Row>); 5] = [
            (r#"{"id":7,"name":"a"}"#, Some(Row { id: 7, name: Some("a".into()) })),
            (r#"{"id":7}"#, Some(Row { id: 7, name: None })),
            (r#"{"id":"7"}"#, None),
            (r#"{"id":7,"name":"a"} trailing"#, None),
            (r#"{"id":7.5}"#, None),
        ];
        for (text, want) in cases {
            assert_eq!(read::<Row>(text).ok(), want, "{text}");
            assert_eq!(serde_json::from_str::<Row>(text).ok(), want, "{text}");
        }
    }

    #[test]
    fn a_float_where_it_does_not_belong_is_named_in_the_error() {
        // serde_json writes the float itself (vendor/serde_core/VENDORED.md), from text and
        // from a tree alike.
        let from_text = read::<Row>(r#"{"id":7.25}"#).unwrap_err().to_string();
        let from_tree = serde_json::from_value::<Row>(serde_json::json!({"id": 7.25}));
        for error in [from_text, from_tree.unwrap_err().to_string()] {
            assert!(error.contains("invalid type: floating point `7.25`, expected u64"), "{error}");
        }
        let unexpected = serde::de::Unexpected::Float(3.0).to_string();
        assert_eq!(unexpected, "floating point `3.0`");
        assert_eq!(serde::de::Unexpected::Float(0.5).to_string(), "floating point");
    }

    #[test]
    fn the_numbers_a_page_shows_are_read_exactly() {
        // The browser reads JSON without serde_json's `float_roundtrip` (only the server asks
        // for it; `cargo test -p app` builds the browser's way): a decimal of up to 15
        // significant digits and a power of ten up to 22 is still the closest double, as Rust's
        // own parser reads it; longer ones may land one step (ulp) away, on screen only.
        let decimals = ["0.1", "2.5", "3.14159", "-0.000123", "1e-7", "12345.678", "6.02e22"];
        for text in decimals.into_iter().chain(["0.3", "99.99", "1234567.89012345"]) {
            let read: f64 = read(text).unwrap();
            assert_eq!(read, text.parse::<f64>().unwrap(), "{text}");
        }
        assert_eq!(read::<u64>("18446744073709551615").unwrap(), u64::MAX);
    }

    #[test]
    fn server_props_read_the_value_and_say_what_was_wrong() {
        let props: ServerProps<Row> = serde_json::from_str(r#"{"id":3,"name":null}"#).unwrap();
        assert_eq!(props.0, Row { id: 3, name: None });
        let error = serde_json::from_str::<ServerProps<Row>>(r#"{"name":"x"}"#).unwrap_err();
        assert!(error.to_string().contains("missing field `id`"), "{error}");
    }
}
