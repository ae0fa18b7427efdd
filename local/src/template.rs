//! Reads `template.yaml`, the one source of truth for the tables and the API routes.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use serde::Deserialize;
use serde_yaml_ng::Value;

/// The template, compiled in so the local stack and the tests always agree with it.
pub const TEMPLATE: &str = include_str!("../../template.yaml");

fn resources(template: &str) -> Result<serde_yaml_ng::Mapping> {
    let doc: Value = serde_yaml_ng::from_str(template).context("template.yaml is not YAML")?;
    match doc.get("Resources") {
        Some(Value::Mapping(m)) => Ok(m.clone()),
        _ => bail!("template.yaml has no Resources"),
    }
}

fn resources_of_type(template: &str, kind: &str) -> Result<Vec<(String, Value)>> {
    Ok(resources(template)?
        .into_iter()
        .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some(kind))
        .filter_map(|(id, r)| Some((id.as_str()?.to_string(), r.get("Properties")?.clone())))
        .collect())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct AttrDef {
    attribute_name: String,
    attribute_type: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct KeyElem {
    attribute_name: String,
    key_type: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ProjectionDef {
    projection_type: String,
    #[serde(default)]
    non_key_attributes: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct GsiDef {
    index_name: String,
    key_schema: Vec<KeyElem>,
    projection: ProjectionDef,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct StreamDef {
    stream_view_type: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct TtlDef {
    attribute_name: String,
    enabled: bool,
}

/// The parts of `AWS::DynamoDB::Table` properties a local table needs.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TableDef {
    attribute_definitions: Vec<AttrDef>,
    key_schema: Vec<KeyElem>,
    #[serde(default)]
    global_secondary_indexes: Vec<GsiDef>,
    #[serde(default)]
    stream_specification: Option<StreamDef>,
    #[serde(default)]
    time_to_live_specification: Option<TtlDef>,
}

/// Every table in the template, by logical id.
pub fn tables(template: &str) -> Result<BTreeMap<String, TableDef>> {
    resources_of_type(template, "AWS::DynamoDB::Table")?
        .into_iter()
        .map(|(id, props)| {
            let def = serde_yaml_ng::from_value(props).with_context(|| format!("table {id}"))?;
            Ok((id, def))
        })
        .collect()
}

fn key_schema(elems: &[KeyElem]) -> Result<Vec<KeySchemaElement>> {
    elems
        .iter()
        .map(|k| {
            Ok(KeySchemaElement::builder()
                .attribute_name(&k.attribute_name)
                .key_type(KeyType::from(k.key_type.as_str()))
                .build()?)
        })
        .collect()
}

impl TableDef {
    pub fn has_stream(&self) -> bool {
        self.stream_specification.is_some()
    }

    /// The stream's view type (`NEW_IMAGE`, ...), when the table has a stream.
    pub fn stream_view_type(&self) -> Option<&str> {
        self.stream_specification
            .as_ref()
            .map(|s| s.stream_view_type.as_str())
    }

    /// The attribute whose epoch-seconds value expires an item, when TTL is enabled.
    pub fn ttl_attribute(&self) -> Option<&str> {
        self.time_to_live_specification
            .as_ref()
            .filter(|t| t.enabled)
            .map(|t| t.attribute_name.as_str())
    }

    /// `(index name, projection type, non-key attributes)` of each GSI.
    pub fn gsi_projections(&self) -> Vec<(&str, &str, Vec<&str>)> {
        self.global_secondary_indexes
            .iter()
            .map(|g| {
                (
                    g.index_name.as_str(),
                    g.projection.projection_type.as_str(),
                    g.projection
                        .non_key_attributes
                        .iter()
                        .flatten()
                        .map(String::as_str)
                        .collect(),
                )
            })
            .collect()
    }

    /// Creates the table as the template defines it, on-demand billing.
    pub async fn create(&self, client: &Client, name: &str) -> Result<()> {
        let mut req = client
            .create_table()
            .table_name(name)
            .billing_mode(BillingMode::PayPerRequest)
            .set_key_schema(Some(key_schema(&self.key_schema)?));
        for a in &self.attribute_definitions {
            req = req.attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(&a.attribute_name)
                    .attribute_type(ScalarAttributeType::from(a.attribute_type.as_str()))
                    .build()?,
            );
        }
        for g in &self.global_secondary_indexes {
            let projection = Projection::builder()
                .projection_type(ProjectionType::from(g.projection.projection_type.as_str()))
                .set_non_key_attributes(g.projection.non_key_attributes.clone())
                .build();
            req = req.global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(&g.index_name)
                    .set_key_schema(Some(key_schema(&g.key_schema)?))
                    .projection(projection)
                    .build()?,
            );
        }
        if let Some(s) = &self.stream_specification {
            req = req.stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::from(s.stream_view_type.as_str()))
                    .build()?,
            );
        }
        req.send()
            .await
            .with_context(|| format!("creating table {name}"))?;
        // As CloudFormation does after creating the table: expired items are then deleted
        // by the engine's sweep, as DynamoDB does (there, within days).
        if let Some(attribute) = self.ttl_attribute() {
            client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(
                    TimeToLiveSpecification::builder()
                        .attribute_name(attribute)
                        .enabled(true)
                        .build()?,
                )
                .send()
                .await
                .with_context(|| format!("enabling TTL on table {name}"))?;
        }
        Ok(())
    }
}

/// `(function logical id, METHOD, path)` for every `Api` event in the template.
pub fn api_routes(template: &str) -> Result<Vec<(String, String, String)>> {
    Ok(api_events(template)?
        .into_iter()
        .map(|e| (e.function, e.method, e.path))
        .collect())
}

/// One `Api` event of a function.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApiEvent {
    pub function: String,
    pub method: String,
    pub path: String,
    /// The event's own `Auth.Authorizer` (`NONE` for a public method); `None` means the API's
    /// default authorizer.
    pub authorizer: Option<String>,
}

/// Every `Api` event in the template.
pub fn api_events(template: &str) -> Result<Vec<ApiEvent>> {
    let mut routes = Vec::new();
    for (function, props) in resources_of_type(template, "AWS::Serverless::Function")? {
        let Some(Value::Mapping(events)) = props.get("Events") else {
            continue;
        };
        for (_, event) in events {
            if event.get("Type").and_then(Value::as_str) != Some("Api") {
                continue;
            }
            let p = event
                .get("Properties")
                .context("Api event without Properties")?;
            let path = p
                .get("Path")
                .and_then(Value::as_str)
                .context("Api event without Path")?;
            let method = p
                .get("Method")
                .and_then(Value::as_str)
                .context("Api event without Method")?;
            let authorizer = p
                .get("Auth")
                .and_then(|a| a.get("Authorizer"))
                .and_then(Value::as_str)
                .map(str::to_string);
            routes.push(ApiEvent {
                function: function.clone(),
                method: method.to_uppercase(),
                path: path.to_string(),
                authorizer,
            });
        }
    }
    Ok(routes)
}
