//! The template's intrinsic functions and SAM's policy templates, resolved as the local stack
//! deploys the template.

use anyhow::{Context, Result, bail};
use serde_yaml_ng::{Mapping, Value};

use super::{ACCOUNT, Local, REGION, STACK, Statement, allow, queue_arn, statements_of, table_arn};

/// The actions of SAM's DynamoDB policy templates, as policy_templates.json lists them.
const SAM_DYNAMODB_READ: [&str; 5] = [
    "dynamodb:GetItem",
    "dynamodb:Scan",
    "dynamodb:Query",
    "dynamodb:BatchGetItem",
    "dynamodb:DescribeTable",
];
const SAM_DYNAMODB_CRUD: [&str; 10] = [
    "dynamodb:GetItem",
    "dynamodb:DeleteItem",
    "dynamodb:PutItem",
    "dynamodb:Scan",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:BatchGetItem",
    "dynamodb:DescribeTable",
    "dynamodb:ConditionCheckItem",
];
const SAM_DYNAMODB_WRITE: [&str; 3] = [
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:BatchWriteItem",
];

/// Resolves the template's intrinsic functions as the local stack deploys it: parameters at
/// their defaults (so `CreateCursorSecret` and `CreateUserPool` hold), tables under their
/// local names.
pub(super) struct Resolver<'a> {
    pub(super) doc: &'a Value,
    pub(super) local: &'a Local,
}

impl Resolver<'_> {
    pub(super) fn policy(&self, p: &Value) -> Result<Vec<Statement>> {
        match p {
            Value::Mapping(m) if m.contains_key("Statement") => {
                statements_of(p, "Policies", &mut |v| self.value(v))
            }
            Value::Mapping(m) if m.len() == 1 => {
                let (name, args) = m.iter().next().context("empty policy")?;
                let name = name.as_str().context("a policy template's name")?;
                self.sam_template(name, args)
            }
            Value::String(name) => bail!(
                "managed policy {name}: not known to the local guard (add its statements to guard/iam.rs)"
            ),
            other => bail!("a policy the local guard cannot read: {other:?}"),
        }
    }

    /// The SAM policy templates (policy_templates.json), those with DynamoDB, SQS and
    /// Secrets Manager actions.
    fn sam_template(&self, name: &str, args: &Value) -> Result<Vec<Statement>> {
        let arg = |k: &str| -> Result<String> {
            let v = self.value(args.get(k).with_context(|| format!("{name} without {k}"))?)?;
            v.as_str()
                .map(str::to_string)
                .with_context(|| format!("{name}'s {k}"))
        };
        let table = |t: &str| {
            let arn = table_arn(t);
            vec![arn.clone(), format!("{arn}/index/*")]
        };
        let (actions, resources): (&[&str], Vec<String>) = match name {
            "DynamoDBReadPolicy" => (&SAM_DYNAMODB_READ, table(&arg("TableName")?)),
            "DynamoDBCrudPolicy" => (&SAM_DYNAMODB_CRUD, table(&arg("TableName")?)),
            "DynamoDBWritePolicy" => (&SAM_DYNAMODB_WRITE, table(&arg("TableName")?)),
            "SQSSendMessagePolicy" => (
                &["sqs:SendMessage*"],
                vec![format!(
                    "arn:aws:sqs:{REGION}:{ACCOUNT}:{}",
                    arg("QueueName")?
                )],
            ),
            "AWSSecretsManagerGetSecretValuePolicy" => {
                (&["secretsmanager:GetSecretValue"], vec![arg("SecretArn")?])
            }
            other => bail!("SAM policy template {other} is not implemented by the local guard"),
        };
        let origin = format!("{name} (SAM policy template)");
        Ok(vec![allow(actions, resources, &origin)])
    }

    fn resource(&self, id: &str) -> Option<&Value> {
        self.doc.get("Resources")?.get(id)
    }

    fn resource_type(&self, id: &str) -> Option<&str> {
        self.resource(id)?.get("Type")?.as_str()
    }

    /// `!Ref id`.
    fn reference(&self, id: &str) -> Result<Value> {
        match id {
            "AWS::Region" => return Ok(Value::String(REGION.into())),
            "AWS::AccountId" => return Ok(Value::String(ACCOUNT.into())),
            "AWS::Partition" => return Ok(Value::String("aws".into())),
            "AWS::StackName" => return Ok(Value::String(STACK.into())),
            "AWS::URLSuffix" => return Ok(Value::String("amazonaws.com".into())),
            "AWS::NoValue" => return Ok(Value::Null),
            _ => {}
        }
        if let Some(p) = self.doc.get("Parameters").and_then(|p| p.get(id)) {
            let default = match p.get("Default") {
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                _ => String::new(),
            };
            if p.get("Type").and_then(Value::as_str) == Some("CommaDelimitedList") {
                return Ok(Value::Sequence(
                    default
                        .split(',')
                        .map(|s| Value::String(s.into()))
                        .collect(),
                ));
            }
            return Ok(Value::String(default));
        }
        let name = format!("{STACK}-{id}");
        Ok(Value::String(match self.resource_type(id) {
            Some("AWS::DynamoDB::Table") => self
                .local
                .tables
                .get(id)
                .cloned()
                .with_context(|| format!("no local table for {id}"))?,
            Some("AWS::SecretsManager::Secret") => {
                format!("arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:{name}")
            }
            Some("AWS::SQS::Queue") => {
                format!("https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}")
            }
            Some(_) => name,
            None => bail!("!Ref {id}: no such parameter or resource"),
        }))
    }

    /// `!GetAtt id.attribute`.
    fn get_att(&self, id: &str, attribute: &str) -> Result<String> {
        match (self.resource_type(id), attribute) {
            (Some("AWS::DynamoDB::Table"), "Arn") => Ok(table_arn(
                self.local
                    .tables
                    .get(id)
                    .with_context(|| format!("no local table for {id}"))?,
            )),
            (Some("AWS::DynamoDB::Table"), "StreamArn") => self
                .local
                .streams
                .get(id)
                .cloned()
                .with_context(|| format!("no local stream for {id}")),
            (Some("AWS::SQS::Queue"), "Arn") => Ok(queue_arn(id)),
            // The group's ARN as CloudFormation gives it: with `:*`, so it covers its streams.
            (Some("AWS::Logs::LogGroup"), "Arn") => {
                let name = self
                    .resource(id)
                    .and_then(|r| r.get("Properties")?.get("LogGroupName"))
                    .with_context(|| format!("{id} has no LogGroupName"))?;
                let name = scalar(&self.value(name)?);
                Ok(format!(
                    "arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{name}:*"
                ))
            }
            (kind, _) => {
                bail!("!GetAtt {id}.{attribute} ({kind:?}) is not implemented by the local guard")
            }
        }
    }

    fn condition(&self, name: &str) -> Result<bool> {
        let c = self
            .doc
            .get("Conditions")
            .and_then(|c| c.get(name))
            .with_context(|| format!("no condition {name}"))?;
        self.truth(c)
    }

    fn truth(&self, v: &Value) -> Result<bool> {
        let (f, args) = intrinsic(v).with_context(|| format!("not a condition: {v:?}"))?;
        let list = |args: &Value| -> Result<Vec<Value>> {
            Ok(args
                .as_sequence()
                .context("a condition's arguments")?
                .clone())
        };
        let truths = |conditions: Vec<Value>| -> Result<Vec<bool>> {
            conditions.iter().map(|c| self.truth(c)).collect()
        };
        Ok(match f.as_str() {
            "Equals" => {
                let a = list(args)?;
                anyhow::ensure!(a.len() == 2, "Equals takes two values");
                scalar(&self.value(&a[0])?) == scalar(&self.value(&a[1])?)
            }
            "Not" => !self.truth(list(args)?.first().context("Not takes one")?)?,
            // Every operand is evaluated before combining, so an error in any one is reported.
            "And" => truths(list(args)?)?.into_iter().all(|b| b),
            "Or" => truths(list(args)?)?.into_iter().any(|b| b),
            "Condition" => self.condition(args.as_str().context("Condition's name")?)?,
            other => bail!("{other} is not a condition function"),
        })
    }

    /// A value with every intrinsic function resolved.
    pub(super) fn value(&self, v: &Value) -> Result<Value> {
        if let Some((f, args)) = intrinsic(v) {
            return self.resolve(&f, args);
        }
        match v {
            Value::Sequence(items) => Ok(Value::Sequence(
                items
                    .iter()
                    .map(|i| self.value(i))
                    .collect::<Result<Vec<_>>>()?
                    .into_iter()
                    .filter(|i| !i.is_null())
                    .collect(),
            )),
            Value::Mapping(m) => {
                let mut out = Mapping::new();
                for (k, v) in m {
                    out.insert(k.clone(), self.value(v)?);
                }
                Ok(Value::Mapping(out))
            }
            other => Ok(other.clone()),
        }
    }

    /// The intrinsic function `f` (`Ref`, `GetAtt`, `Sub`, `If`, `Join`) applied to `args`.
    fn resolve(&self, f: &str, args: &Value) -> Result<Value> {
        match f {
            "Ref" => self.reference(args.as_str().context("!Ref takes a name")?),
            "GetAtt" => {
                let (id, attribute) = match args {
                    Value::String(s) => s.split_once('.').context("!GetAtt X.Attribute")?,
                    Value::Sequence(a) if a.len() == 2 => (
                        a[0].as_str().context("!GetAtt")?,
                        a[1].as_str().context("!GetAtt")?,
                    ),
                    _ => bail!("!GetAtt {args:?}"),
                };
                Ok(Value::String(self.get_att(id, attribute)?))
            }
            "Sub" => {
                let (text, vars) = match args {
                    Value::String(s) => (s.clone(), Mapping::new()),
                    Value::Sequence(a) if a.len() == 2 => (
                        a[0].as_str().context("!Sub's string")?.to_string(),
                        a[1].as_mapping().cloned().unwrap_or_default(),
                    ),
                    _ => bail!("!Sub {args:?}"),
                };
                Ok(Value::String(self.sub(&text, &vars)?))
            }
            "If" => {
                let a = args.as_sequence().context("!If takes a list")?;
                anyhow::ensure!(a.len() == 3, "!If takes three values");
                let cond = self.condition(a[0].as_str().context("!If's condition")?)?;
                self.value(if cond { &a[1] } else { &a[2] })
            }
            "Join" => {
                let a = args.as_sequence().context("!Join takes a list")?;
                anyhow::ensure!(a.len() == 2, "!Join takes two values");
                let sep = a[0].as_str().context("!Join's separator")?;
                let parts = match self.value(&a[1])? {
                    Value::Sequence(p) => p,
                    other => bail!("!Join of {other:?}"),
                };
                let parts = parts.iter().map(scalar).collect::<Vec<_>>();
                Ok(Value::String(parts.join(sep)))
            }
            other => bail!("!{other} is not implemented by the local guard"),
        }
    }

    pub(super) fn strings(&self, v: &Value) -> Result<Vec<String>> {
        match self.value(v)? {
            Value::String(s) => Ok(vec![s]),
            Value::Sequence(s) => Ok(s.iter().map(scalar).collect()),
            other => bail!("not a string: {other:?}"),
        }
    }

    /// `${Name}` and `${Name.Attribute}` in `!Sub`'s text.
    fn sub(&self, text: &str, vars: &Mapping) -> Result<String> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}').context("!Sub: an unclosed ${")?;
            let name = &after[..end];
            if let Some(literal) = name.strip_prefix('!') {
                out.push_str("${");
                out.push_str(literal);
                out.push('}');
            } else if let Some(v) = vars.get(name) {
                out.push_str(&scalar(&self.value(v)?));
            } else if let Some((id, attribute)) = name.split_once('.') {
                out.push_str(&self.get_att(id, attribute)?);
            } else {
                out.push_str(&scalar(&self.reference(name)?));
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// `!Fn args` or `{ "Fn::Fn": args }` (`Ref` and `Condition` without `Fn::`).
pub(super) fn intrinsic(v: &Value) -> Option<(String, &Value)> {
    match v {
        Value::Tagged(t) => Some((
            t.tag.to_string().trim_start_matches('!').to_string(),
            &t.value,
        )),
        Value::Mapping(m) if m.len() == 1 => {
            let (k, args) = m.iter().next()?;
            let k = k.as_str()?;
            match k {
                "Ref" | "Condition" => Some((k.to_string(), args)),
                _ => k.strip_prefix("Fn::").map(|f| (f.to_string(), args)),
            }
        }
        _ => None,
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Sequence(items) => items.iter().map(scalar).collect::<Vec<_>>().join(","),
        _ => String::new(),
    }
}
