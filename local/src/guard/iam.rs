//! IAM on the local stack: each function's policy from `template.yaml` (the inline policies of
//! its own `Role`, or else its `Policies` and what SAM adds for its events), and AWS's
//! evaluation of it: an explicit `Deny` wins, else an `Allow` whose action and resource
//! patterns match, else the implicit deny.
//!
//! Every check that passes is recorded process-wide ([`used`]), so a test can compare what a
//! workload used against what the template grants.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use serde_yaml_ng::{Mapping, Value};

mod resolve;

use resolve::Resolver;

/// The account and region every local ARN names.
pub const ACCOUNT: &str = "123456789012";
pub const REGION: &str = "us-east-1";
/// The stack name in role and physical-resource names.
pub const STACK: &str = "gridline";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Effect {
    Allow,
    Deny,
}

/// One statement, with its action and resource patterns (`*` and `?` wildcards).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Statement {
    pub sid: Option<String>,
    pub effect: Effect,
    pub actions: Vec<String>,
    pub resources: Vec<String>,
    /// Where it comes from: `Policies`, or what SAM adds (for the listing test).
    pub origin: String,
}

/// A principal's identity-based policy.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The function's logical id (or the gridctl command).
    pub principal: String,
    /// The caller AWS names in an AccessDeniedException.
    pub caller_arn: String,
    pub statements: Vec<Statement>,
}

/// A request the policy does not allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    pub caller_arn: String,
    pub action: String,
    pub resource: String,
    /// An explicit `Deny` matched (else: no `Allow` did).
    pub explicit: bool,
}

impl Denied {
    /// AWS's message for it.
    pub fn message(&self) -> String {
        let why = if self.explicit {
            "with an explicit deny in an identity-based policy".to_string()
        } else {
            format!(
                "because no identity-based policy allows the {} action",
                self.action
            )
        };
        format!(
            "User: {} is not authorized to perform: {} on resource: {} {why}",
            self.caller_arn, self.action, self.resource
        )
    }
}

static USED: Mutex<BTreeSet<(String, String, String)>> = Mutex::new(BTreeSet::new());

/// Every `(principal, action, resource)` allowed so far in this process.
pub fn used() -> BTreeSet<(String, String, String)> {
    USED.lock().map(|u| u.clone()).unwrap_or_default()
}

impl Policy {
    /// A principal's policy; its caller is the role SAM would name for it (`{principal}Role`).
    pub fn new(principal: &str, statements: Vec<Statement>) -> Self {
        Self {
            principal: principal.to_string(),
            caller_arn: caller_arn(&format!("{principal}Role"), principal),
            statements,
        }
    }

    /// AWS's evaluation of one action on one resource; an allowed one is recorded.
    pub fn check(&self, action: &str, resource: &str) -> Result<(), Denied> {
        let matching = |effect: Effect| {
            self.statements.iter().any(|s| {
                s.effect == effect
                    && s.actions
                        .iter()
                        .any(|a| wildcard(&a.to_lowercase(), &action.to_lowercase()))
                    && s.resources.iter().any(|r| wildcard(r, resource))
            })
        };
        let denied = |explicit| Denied {
            caller_arn: self.caller_arn.clone(),
            action: action.to_string(),
            resource: resource.to_string(),
            explicit,
        };
        if matching(Effect::Deny) {
            return Err(denied(true));
        }
        if !matching(Effect::Allow) {
            return Err(denied(false));
        }
        if let Ok(mut used) = USED.lock() {
            used.insert((self.principal.clone(), action.into(), resource.into()));
        }
        Ok(())
    }

    /// A policy document (`{"Statement": [...]}`, JSON) keeping only the statements whose
    /// `Sid` starts with `sid` (all of them when `None`), with `${Name}` placeholders
    /// substituted.
    pub fn from_document(
        principal: &str,
        document: &str,
        sid: Option<&str>,
        substitutions: &BTreeMap<String, String>,
    ) -> Result<Self> {
        let mut text = document.to_string();
        for (k, v) in substitutions {
            text = text.replace(&format!("${{{k}}}"), v);
        }
        let doc: Value = serde_yaml_ng::from_str(&text).context("a policy document")?;
        let statements = statements_of(&doc, "document", &mut |v| Ok(v.clone()))?
            .into_iter()
            .filter(|s| match (sid, &s.sid) {
                (None, _) => true,
                (Some(want), Some(have)) => have.starts_with(want),
                (Some(_), None) => false,
            })
            .collect::<Vec<_>>();
        anyhow::ensure!(!statements.is_empty(), "no statement with Sid {sid:?}");
        if let Some(left) = statements
            .iter()
            .flat_map(|s| s.resources.iter())
            .find(|r| r.contains("${"))
        {
            bail!("unsubstituted placeholder in {left}");
        }
        Ok(Self::new(principal, statements))
    }
}

/// The session of `role` (its logical id) that runs `function`, as AWS names it.
fn caller_arn(role: &str, function: &str) -> String {
    format!("arn:aws:sts::{ACCOUNT}:assumed-role/{STACK}-{role}-LOCAL/{STACK}-{function}")
}

/// IAM's wildcard match: `*` any run of characters, `?` any one.
pub fn wildcard(pattern: &str, value: &str) -> bool {
    let (p, v): (Vec<char>, Vec<char>) = (pattern.chars().collect(), value.chars().collect());
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < v.len() {
        if i < p.len() && (p[i] == '?' || p[i] == v[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// An ARN of the local stack.
pub fn table_arn(table: &str) -> String {
    if table.starts_with("arn:") {
        return table.to_string();
    }
    format!("arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}")
}

/// A queue of the template (its logical id) as the local stack names its ARN.
pub fn queue_arn(logical_id: &str) -> String {
    format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{STACK}-{logical_id}")
}

/// What the template's names resolve to on the local stack.
#[derive(Clone, Debug, Default)]
pub struct Local {
    /// Table logical id → local table name.
    pub tables: BTreeMap<String, String>,
    /// Table logical id → the local engine's stream ARN (from DescribeTable).
    pub streams: BTreeMap<String, String>,
}

/// The logical ids of every `AWS::Serverless::Function`.
pub fn functions(template: &str) -> Result<Vec<String>> {
    let doc = document(template)?;
    Ok(resources(&doc)?
        .iter()
        .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some("AWS::Serverless::Function"))
        .filter_map(|(id, _)| id.as_str().map(str::to_string))
        .collect())
}

/// Every function's policy, by logical id.
pub fn function_policies(template: &str, local: &Local) -> Result<BTreeMap<String, Arc<Policy>>> {
    functions(template)?
        .into_iter()
        .map(|id| Ok((id.clone(), Arc::new(function_policy(template, &id, local)?))))
        .collect()
}

/// One function's policy: what its execution role grants. Its own `Role`, an
/// `AWS::IAM::Role` of the template, when it names one (SAM then generates no role, so adds
/// nothing for its events and ignores `Policies`); else the role SAM generates.
pub fn function_policy(template: &str, function: &str, local: &Local) -> Result<Policy> {
    let doc = document(template)?;
    let r = Resolver { doc: &doc, local };
    let props = &resources(&doc)?
        .get(function)
        .with_context(|| format!("no function {function} in template.yaml"))?["Properties"];
    let Some(role) = props.get("Role") else {
        return Ok(Policy::new(function, sam_role(&r, function, props)?));
    };
    if props.get("Policies").is_some() {
        bail!("{function} has a Role and Policies: SAM ignores Policies when Role is set");
    }
    let role = role_id(role).with_context(|| {
        format!("{function}'s Role: only !GetAtt <role>.Arn of an AWS::IAM::Role in the template is known to the local guard")
    })?;
    let mut policy = Policy::new(function, role_statements(&r, role)?);
    policy.caller_arn = caller_arn(role, function);
    Ok(policy)
}

/// The role SAM generates for a function: its `Policies` and what SAM adds for its events.
fn sam_role(r: &Resolver, function: &str, props: &Value) -> Result<Vec<Statement>> {
    let mut statements = Vec::new();
    let policies = match props.get("Policies") {
        Some(Value::Sequence(policies)) => policies.clone(),
        Some(one) => vec![one.clone()],
        None => Vec::new(),
    };
    for p in &policies {
        statements.extend(
            r.policy(p)
                .with_context(|| format!("{function}'s Policies"))?,
        );
    }
    let Some(Value::Mapping(events)) = props.get("Events") else {
        return Ok(statements);
    };
    for (_, event) in events {
        match event.get("Type").and_then(Value::as_str).unwrap_or("") {
            "DynamoDB" => {
                // The managed policy SAM attaches (its CloudWatch Logs actions aside: the
                // local stack does not emulate Logs).
                statements.push(allow(
                    &[
                        "dynamodb:DescribeStream",
                        "dynamodb:GetRecords",
                        "dynamodb:GetShardIterator",
                        "dynamodb:ListStreams",
                    ],
                    vec!["*".into()],
                    "AWSLambdaDynamoDBExecutionRole (SAM, DynamoDB event)",
                ));
                let on_failure = &event["Properties"]["DestinationConfig"]["OnFailure"];
                if on_failure["Type"].as_str() == Some("SQS") {
                    let queue = r.strings(&on_failure["Destination"])?;
                    statements.push(allow(
                        &["sqs:SendMessage"],
                        queue,
                        "SQSSendMessagePolicy (SAM, OnFailure destination)",
                    ));
                } else if !on_failure.is_null() {
                    bail!("{function}: OnFailure destination type not implemented locally");
                }
            }
            "SQS" => {
                // The managed policy SAM attaches for an SQS event source: the mapping
                // receives and deletes with the function's role.
                statements.push(allow(
                    &[
                        "sqs:ReceiveMessage",
                        "sqs:DeleteMessage",
                        "sqs:GetQueueAttributes",
                    ],
                    vec!["*".into()],
                    "AWSLambdaSQSQueueExecutionRole (SAM, SQS event)",
                ));
            }
            "Api" => {}
            other => bail!("{function}: events of type {other} not implemented by the guard"),
        }
    }
    Ok(statements)
}

/// The logical id `X` of `!GetAtt X.Arn`.
fn role_id(role: &Value) -> Option<&str> {
    let (f, args) = resolve::intrinsic(role)?;
    if f != "GetAtt" {
        return None;
    }
    match args {
        Value::String(s) => s.strip_suffix(".Arn"),
        Value::Sequence(a) if a.len() == 2 && a[1].as_str() == Some("Arn") => a[0].as_str(),
        _ => None,
    }
}

/// The statements of the template's role `id`: its inline `Policies`. A managed policy or a
/// permissions boundary is refused: the guard cannot know what it grants.
fn role_statements(r: &Resolver, id: &str) -> Result<Vec<Statement>> {
    let role = r
        .doc
        .get("Resources")
        .and_then(|res| res.get(id))
        .filter(|res| res.get("Type").and_then(Value::as_str) == Some("AWS::IAM::Role"))
        .with_context(|| format!("no AWS::IAM::Role {id} in template.yaml"))?;
    let props = &role["Properties"];
    for unknown in ["ManagedPolicyArns", "PermissionsBoundary"] {
        if props.get(unknown).is_some() {
            bail!("{id}'s {unknown}: not known to the local guard (write its statements inline)");
        }
    }
    let mut statements = Vec::new();
    for p in props
        .get("Policies")
        .and_then(Value::as_sequence)
        .with_context(|| format!("{id} has no Policies"))?
    {
        let name = p.get("PolicyName").and_then(Value::as_str).unwrap_or("");
        let document = p
            .get("PolicyDocument")
            .with_context(|| format!("{id}'s policy {name} has no PolicyDocument"))?;
        let origin = format!("{id} (its policy {name})");
        statements.extend(
            statements_of(document, &origin, &mut |v| r.value(v))
                .with_context(|| format!("{id}'s policy {name}"))?,
        );
    }
    Ok(statements)
}

fn allow(actions: &[&str], resources: Vec<String>, origin: &str) -> Statement {
    Statement {
        sid: None,
        effect: Effect::Allow,
        actions: actions.iter().map(|a| a.to_string()).collect(),
        resources,
        origin: origin.into(),
    }
}

fn document(template: &str) -> Result<Value> {
    serde_yaml_ng::from_str(template).context("template.yaml is not YAML")
}

fn resources(doc: &Value) -> Result<&Mapping> {
    doc.get("Resources")
        .and_then(Value::as_mapping)
        .context("template.yaml has no Resources")
}

/// `Statement` of a policy document, each value resolved through `resolve`.
fn statements_of(
    doc: &Value,
    origin: &str,
    resolve: &mut dyn FnMut(&Value) -> Result<Value>,
) -> Result<Vec<Statement>> {
    let list = match doc.get("Statement") {
        Some(Value::Sequence(s)) => s.clone(),
        Some(one) => vec![one.clone()],
        None => bail!("a policy without Statement"),
    };
    let mut out = Vec::new();
    for s in &list {
        for unsupported in ["NotAction", "NotResource", "Condition", "Principal"] {
            if s.get(unsupported).is_some() {
                bail!("{unsupported} in a statement is not implemented by the local guard");
            }
        }
        let effect = match s.get("Effect").and_then(Value::as_str) {
            Some("Allow") => Effect::Allow,
            Some("Deny") => Effect::Deny,
            other => bail!("a statement's Effect is {other:?}"),
        };
        let list_of = |v: Value| -> Result<Vec<String>> {
            match v {
                Value::String(s) => Ok(vec![s]),
                Value::Sequence(items) => Ok(items
                    .into_iter()
                    .filter(|i| !i.is_null())
                    .map(|i| match i {
                        Value::String(s) => Ok(vec![s]),
                        Value::Sequence(inner) => inner
                            .into_iter()
                            .map(|x| x.as_str().map(str::to_string).context("not a string"))
                            .collect(),
                        other => bail!("not a string: {other:?}"),
                    })
                    .collect::<Result<Vec<_>>>()?
                    .into_iter()
                    .flatten()
                    .collect()),
                other => bail!("not a string or a list: {other:?}"),
            }
        };
        let actions = list_of(resolve(
            s.get("Action").context("a statement without Action")?,
        )?)?;
        let resources = list_of(resolve(
            s.get("Resource").context("a statement without Resource")?,
        )?)?;
        out.push(Statement {
            sid: s.get("Sid").and_then(Value::as_str).map(str::to_string),
            effect,
            actions,
            resources,
            origin: origin.into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(wildcard("dynamodb:*", "dynamodb:GetItem"));
        assert!(wildcard("arn:t/index/*", "arn:t/index/GSI1"));
        assert!(!wildcard("arn:t", "arn:t/index/GSI1"));
        assert!(wildcard("a?c", "abc"));
        assert!(!wildcard("a?c", "ac"));
        assert!(wildcard("*", ""));
    }

    fn local() -> Local {
        Local {
            tables: [("RecordsTable", "records"), ("IndexTable", "index")]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            streams: [("RecordsTable".to_string(), "arn:stream".to_string())].into(),
        }
    }

    #[test]
    fn every_function_of_the_template_has_a_policy() {
        let policies = function_policies(crate::template::TEMPLATE, &local()).unwrap();
        assert!(policies.len() >= 6, "{:?}", policies.keys());
        let indexer = &policies["IndexerFunction"];
        assert!(indexer.check("dynamodb:GetRecords", "arn:stream").is_ok());
        let grid = &policies["GridFunction"];
        let denied = grid
            .check("dynamodb:PutItem", &table_arn("records"))
            .unwrap_err();
        assert!(
            denied.message().contains("GridFunctionRole"),
            "{}",
            denied.message()
        );
    }

    /// The indexer and the field job run with roles of their own, not SAM's: their policies
    /// are those roles' statements, and the stream and queue actions SAM's managed policies
    /// would grant on every resource are granted on their own stream and queue only.
    #[test]
    fn the_indexer_and_field_job_policies_are_their_roles_with_their_own_stream_and_queue() {
        let policies = function_policies(crate::template::TEMPLATE, &local()).unwrap();
        for (function, role) in [
            ("IndexerFunction", "IndexerFunctionRole"),
            ("FieldJobFunction", "FieldJobFunctionRole"),
        ] {
            let policy = &policies[function];
            assert!(!policy.statements.is_empty(), "{function}");
            for s in &policy.statements {
                assert!(s.origin.starts_with(role), "{function}: {s:?}");
            }
            assert!(
                policy
                    .caller_arn
                    .contains(&format!("assumed-role/{STACK}-{role}-")),
                "{}",
                policy.caller_arn
            );
            let logs = format!(
                "arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/{STACK}-{}:log-stream:x",
                function.trim_end_matches("Function").to_lowercase()
            );
            assert!(policy.check("logs:PutLogEvents", &logs).is_ok(), "{logs}");
            let other_group = logs.replace("/aws/lambda/", "/aws/lambda/other-");
            assert!(policy.check("logs:PutLogEvents", &other_group).is_err());
        }
        let other_stream = "arn:aws:dynamodb:us-east-1:123456789012:table/other/stream/x";
        let other_queue = queue_arn("OtherQueue");
        let stream_actions = [
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
            "dynamodb:ListStreams",
        ];
        let queue_actions = [
            "sqs:ReceiveMessage",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
        ];
        let indexer = &policies["IndexerFunction"];
        let job = &policies["FieldJobFunction"];
        for action in stream_actions {
            assert!(indexer.check(action, "arn:stream").is_ok(), "{action}");
        }
        for action in queue_actions {
            assert!(
                job.check(action, &queue_arn("FieldJobQueue")).is_ok(),
                "{action}"
            );
            assert!(
                job.check(action, &queue_arn("FieldJobDeadLetterQueue"))
                    .is_err()
            );
        }
        // No function reads another stream or takes from another queue.
        for (function, policy) in &policies {
            for action in stream_actions {
                assert!(policy.check(action, other_stream).is_err(), "{function}");
            }
            for action in queue_actions {
                assert!(policy.check(action, &other_queue).is_err(), "{function}");
            }
        }
    }

    /// SAM ignores `Policies` beside a `Role`, and a managed policy's statements are unknown
    /// here: both are refused rather than read as granting something they do not.
    #[test]
    fn a_role_beside_policies_or_with_a_managed_policy_is_refused() {
        let template = |function_extra: &str, role_extra: &str| {
            format!(
                "Resources:
  F:
    Type: AWS::Serverless::Function
    Properties:
      Role: !GetAtt R.Arn{function_extra}
  R:
    Type: AWS::IAM::Role
    Properties:{role_extra}
      Policies:
        - PolicyName: p
          PolicyDocument:
            Statement:
              - Effect: Allow
                Action: sqs:SendMessage
                Resource: !GetAtt Q.Arn
  Q:
    Type: AWS::SQS::Queue
"
            )
        };
        let read = |t: String| function_policy(&t, "F", &local());
        let policy = read(template("", "")).unwrap();
        assert!(policy.check("sqs:SendMessage", &queue_arn("Q")).is_ok());
        assert!(
            policy
                .caller_arn
                .contains("assumed-role/gridline-R-LOCAL/gridline-F")
        );
        let both = "\n      Policies:\n        - Statement: []";
        let err = read(template(both, "")).unwrap_err();
        assert!(format!("{err:#}").contains("ignores Policies"), "{err:#}");
        let managed = "\n      ManagedPolicyArns: [arn:aws:iam::aws:policy/ReadOnlyAccess]";
        let err = read(template("", managed)).unwrap_err();
        assert!(format!("{err:#}").contains("ManagedPolicyArns"), "{err:#}");
        let elsewhere = template("", "").replace("!GetAtt R.Arn", "arn:aws:iam::1:role/x");
        assert!(read(elsewhere).is_err());
    }

    #[test]
    fn explicit_deny_wins() {
        let doc = r#"{"Statement": [
            {"Sid": "a", "Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"},
            {"Sid": "a", "Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": "${T}"}]}"#;
        let subs = [("T".to_string(), "arn:x".to_string())].into();
        let p = Policy::from_document("p", doc, Some("a"), &subs).unwrap();
        assert!(p.check("dynamodb:GetItem", "arn:x").is_ok());
        let d = p.check("dynamodb:DeleteItem", "arn:x").unwrap_err();
        assert!(d.explicit && d.message().contains("explicit deny"));
    }
}
