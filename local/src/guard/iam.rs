//! IAM policies from `template.yaml`, checked against every request a function's clients make.
