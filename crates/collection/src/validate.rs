//! Checking documents before they are logged: dimensions, finite components, a non-zero
//! vector under cosine, a JSON object of stored fields whose mapped fields convert; and the
//! fields they bring that the mapping does not have ([`Dynamic`] mapping). Live upserts
//! call [`check_docs`]; another backend can apply the same rules and messages.

use searchd_fields::{FieldType, Schema};

use crate::error::{Error, Result};
use crate::manifest::Dynamic;
use crate::segwrite::NewDoc;

/// What [`check_docs`] checks documents against.
#[derive(Debug, Clone, Copy)]
pub struct DocRules<'a> {
    /// Dimensions of the collection's vectors.
    pub dim: usize,
    /// The metric is cosine: an all-zero vector is refused (it has no direction).
    pub cosine: bool,
    /// The mapping the stored fields must convert to; `None`: they need only be a JSON object.
    pub mapping: Option<&'a Schema>,
    /// The text field (stored, analysed lexically, never a typed field).
    pub text_field: Option<&'a str>,
    /// What fields the mapping does not have do ([`Dynamic::Strict`]: refused).
    pub dynamic: Dynamic,
}

/// Check documents before they are logged: dimensions, finite components, a non-zero
/// vector under cosine, a JSON object of stored fields whose mapped fields convert.
/// Returns the fields the documents bring that the mapping does not have, with their
/// inferred types (for [`add_fields`]); under [`Dynamic::Strict`] such fields are refused.
pub fn check_docs(docs: &[NewDoc], rules: &DocRules<'_>) -> Result<Vec<(String, FieldType)>> {
    let DocRules {
        dim,
        cosine,
        mapping,
        text_field,
        dynamic,
    } = *rules;
    for (i, d) in docs.iter().enumerate() {
        let at = format!("docs[{i}]");
        if d.vector.len() != dim {
            return Err(Error::Input(format!(
                "{at}.vector has {} dimensions, the collection has {dim}",
                d.vector.len()
            )));
        }
        if let Some(j) = d.vector.iter().position(|x| !x.is_finite()) {
            return Err(Error::Input(format!(
                "{at}.vector[{j}] is not a finite number"
            )));
        }
        if cosine
            && d.vector
                .iter()
                .map(|&x| (x as f64) * (x as f64))
                .sum::<f64>()
                == 0.0
        {
            return Err(Error::Input(format!(
                "{at}.vector is all zeros: it has no direction under cosine"
            )));
        }
    }
    match mapping {
        None => {
            for (i, d) in docs.iter().enumerate() {
                serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&d.source)
                    .map_err(|e| {
                        Error::Input(format!("docs[{i}]: fields are not a JSON object: {e}"))
                    })?;
            }
            Ok(Vec::new())
        }
        Some(m) => {
            let (r, new) = check_fields(m, text_field, docs);
            r?;
            if dynamic == Dynamic::Strict && !new.is_empty() {
                let names: Vec<&str> = new.iter().map(|(n, _)| n.as_str()).collect();
                return Err(Error::Input(format!(
                    "field(s) {} are not in the mapping and dynamic mapping is strict (serve --dynamic-mapping)",
                    names.join(", ")
                )));
            }
            Ok(new)
        }
    }
}

/// Check the stored fields of `docs` against `mapping`: each is a JSON object whose mapped
/// fields convert to their types. Also returns the fields they bring that the mapping has
/// neither indexed nor skipped, with the types inferred from these documents (fields with
/// mixed value types stay unindexed, as at ingest).
pub(crate) fn check_fields(
    mapping: &searchd_fields::Schema,
    text_field: Option<&str>,
    docs: &[NewDoc],
) -> (Result<()>, Vec<(String, searchd_fields::FieldType)>) {
    let mut w = searchd_fields::FieldsWriter::new(searchd_fields::FieldsConfig {
        declared: mapping
            .fields
            .iter()
            .map(|f| (f.name.clone(), f.ty))
            .collect(),
        skip: text_field
            .into_iter()
            .map(str::to_string)
            .chain(mapping.skipped.iter().map(|s| s.name.clone()))
            .collect(),
    });
    for (i, d) in docs.iter().enumerate() {
        let at = format!("docs[{i}]");
        let map: serde_json::Map<String, serde_json::Value> =
            match serde_json::from_slice(&d.source) {
                Ok(m) => m,
                Err(e) => {
                    return (
                        Err(Error::Input(format!(
                            "{at}: fields are not a JSON object: {e}"
                        ))),
                        Vec::new(),
                    )
                }
            };
        if let Err(e) = w.add(i as u32, &map) {
            return (Err(Error::Input(format!("{at}.fields: {e}"))), Vec::new());
        }
    }
    (Ok(()), w.inferred())
}

/// Add fields (from [`check_fields`]) to the mapping, keeping it sorted by name.
pub fn add_fields(m: &mut searchd_fields::Schema, new: Vec<(String, searchd_fields::FieldType)>) {
    if new.is_empty() {
        return;
    }
    for (name, ty) in new {
        if m.get(&name).is_none() && m.skipped(&name).is_none() {
            tracing::info!(field = %name, r#type = %ty, "dynamic mapping: a new field is indexed");
            m.fields.push(searchd_fields::FieldSpec {
                name,
                ty,
                array: false,
                docs: 0,
                values: 0,
                declared: true,
            });
        }
    }
    m.fields.sort_by(|a, b| a.name.cmp(&b.name));
}
