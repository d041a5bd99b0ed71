//! A small JSON Schema checker, enough for `schema/report.schema.json`: `type`, `const`,
//! `enum`, `required`, `properties`, `additionalProperties: false`, `items`, `oneOf`,
//! `minimum`/`maximum`/`maxItems`, and local `$ref`s. Returns every violation with its path.

use serde_json::Value;

pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, schema, value, "$", &mut errors);
    errors
}

fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').expect("local $ref");
            resolve(
                root,
                root.pointer(pointer)
                    .unwrap_or_else(|| panic!("bad $ref {r}")),
            )
        }
        None => node,
    }
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        other => panic!("unknown type {other}"),
    }
}

fn check(root: &Value, node: &Value, v: &Value, path: &str, errors: &mut Vec<String>) {
    let node = resolve(root, node);
    if let Some(t) = node.get("type") {
        let ok = match t {
            Value::String(s) => type_ok(s, v),
            Value::Array(ts) => ts
                .iter()
                .any(|t| type_ok(t.as_str().expect("type name"), v)),
            _ => panic!("bad type at {path}"),
        };
        if !ok {
            errors.push(format!("{path}: {v} is not of type {t}"));
            return;
        }
    }
    if let Some(c) = node.get("const")
        && c != v
    {
        errors.push(format!("{path}: {v} is not {c}"));
    }
    if let Some(Value::Array(options)) = node.get("enum")
        && !options.contains(v)
    {
        errors.push(format!("{path}: {v} is not one of {options:?}"));
    }
    if let Some(Value::Array(options)) = node.get("oneOf") {
        let passing = options
            .iter()
            .filter(|o| {
                let mut e = Vec::new();
                check(root, o, v, path, &mut e);
                e.is_empty()
            })
            .count();
        if passing != 1 {
            errors.push(format!("{path}: matches {passing} of the oneOf options"));
        }
    }
    if let (Some(min), Some(n)) = (node.get("minimum").and_then(Value::as_f64), v.as_f64())
        && n < min
    {
        errors.push(format!("{path}: {n} < {min}"));
    }
    if let (Some(max), Some(n)) = (node.get("maximum").and_then(Value::as_f64), v.as_f64())
        && n > max
    {
        errors.push(format!("{path}: {n} > {max}"));
    }
    if let Value::Object(map) = v {
        if let Some(Value::Array(required)) = node.get("required") {
            for key in required {
                let key = key.as_str().expect("required key");
                if !map.contains_key(key) {
                    errors.push(format!("{path}: missing {key}"));
                }
            }
        }
        let props = node.get("properties").and_then(Value::as_object);
        for (key, child) in map {
            match props.and_then(|p| p.get(key)) {
                Some(s) => check(root, s, child, &format!("{path}.{key}"), errors),
                None if node.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errors.push(format!("{path}: unexpected property {key}"));
                }
                None => {}
            }
        }
    }
    if let Value::Array(items) = v {
        if let Some(max) = node.get("maxItems").and_then(Value::as_u64)
            && items.len() as u64 > max
        {
            errors.push(format!("{path}: more than {max} items"));
        }
        if let Some(item_schema) = node.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(root, item_schema, item, &format!("{path}[{i}]"), errors);
            }
        }
    }
}
