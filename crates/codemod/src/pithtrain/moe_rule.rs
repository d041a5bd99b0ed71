//! Auto `--detail-layers`: reads the model's MoE-vs-dense rule from its source (how the decoder
//! layer's `__init__` picks `self.mlp`), evaluates it for every layer with the model's Hugging
//! Face config, and picks the first MoE layer and the next one.
//!
//! Understood rules are Python expressions over the layer index and `config.<field>`, e.g.
//! `layer_id >= config.first_k_dense_replace`, `layer_idx % config.moe_layer_freq == 0`,
//! `(layer_idx + 1) % config.decoder_sparse_step == 0`, `layer_idx not in config.mlp_only_layers`,
//! possibly through a local (`has_experts = ...; X(...) if has_experts else Y(...)`). A model
//! whose `self.mlp` is always the MoE class has no rule: every layer is MoE.

use std::path::{Path, PathBuf};

use ruff_python_ast::{BoolOp, CmpOp, Expr, Number, Operator, Stmt, StmtFunctionDef, UnaryOp};
use serde_json::Value as Json;

use crate::error::{Error, Result};
use crate::pithtrain::layout::ModelLayout;
use memprints_python::{PySource, find};

/// The rule, the config it was evaluated with, and the result.
#[derive(Debug, Clone)]
pub struct MoeLayers {
    /// The rule as written in the source, or `None` when every layer is MoE.
    pub rule: Option<String>,
    /// The config file used.
    pub config: PathBuf,
    /// `num_hidden_layers` of the config.
    pub num_layers: u32,
    /// Indices of the MoE layers.
    pub moe: Vec<u32>,
}

impl MoeLayers {
    /// The first MoE layer and the next one (fewer when the model has fewer).
    pub fn default_detail_layers(&self) -> Vec<u32> {
        match self.moe.first() {
            Some(&first) => (first..self.num_layers).take(2).collect(),
            None => Vec::new(),
        }
    }
}

/// Reads the rule from `model` and evaluates it with `config`.
pub fn moe_layers(model: &PySource, config_path: &Path) -> Result<MoeLayers> {
    let text = std::fs::read_to_string(config_path).map_err(|e| Error::io(config_path, e))?;
    let config: Json = serde_json::from_str(&text).map_err(|e| Error::Config {
        file: config_path.display().to_string(),
        message: e.to_string(),
    })?;
    let num_layers = config
        .get("num_hidden_layers")
        .and_then(Json::as_u64)
        .ok_or_else(|| Error::Config {
            file: config_path.display().to_string(),
            message: "no integer `num_hidden_layers`".into(),
        })? as u32;
    let layout = ModelLayout::find(model)?;
    let init =
        find::method(layout.decoder, "__init__").ok_or_else(|| Error::UnreadableMoeRule {
            file: model.rel.clone(),
            reason: format!(
                "{} has no __init__ to read the MoE rule from",
                layout.decoder.name
            ),
        })?;
    let moe_class = layout.experts_owner(model);
    let rule = rule_of(init, moe_class.as_deref());
    let unsupported = |why: String| Error::UnreadableMoeRule {
        file: model.rel.clone(),
        reason: why,
    };
    let moe = match &rule {
        None => (0..num_layers).collect(),
        Some((expr, moe_when_true)) => {
            let layer_param = init
                .parameters
                .args
                .iter()
                .map(|p| p.parameter.name.as_str())
                .filter(|n| *n != "self" && *n != "config")
                .last()
                .ok_or_else(|| unsupported("the decoder's __init__ takes no layer index".into()))?;
            let env = Env {
                model,
                init,
                layer_param,
                config: &config,
            };
            let mut moe = Vec::new();
            for layer in 0..num_layers {
                let holds = match env.eval(expr, layer, 0).map_err(|why| {
                    unsupported(format!(
                        "cannot evaluate the MoE rule `{}`: {why}",
                        model.slice(*expr)
                    ))
                })? {
                    Val::Bool(b) => b,
                    Val::Int(n) => n != 0,
                    Val::List(l) => !l.is_empty(),
                    Val::None => false,
                };
                if holds == *moe_when_true {
                    moe.push(layer);
                }
            }
            moe
        }
    };
    let rule = rule.map(|(e, moe_when_true)| {
        let local = match e {
            Expr::Name(name) => init.body.iter().find_map(|s| match s {
                Stmt::Assign(a) if find::assigned_names(s) == [name.id.as_str()] => {
                    Some(model.slice(s))
                }
                _ => None,
            }),
            _ => None,
        };
        let text = local.unwrap_or(model.slice(e));
        if moe_when_true {
            text.to_string()
        } else {
            format!("not ({text})")
        }
    });
    Ok(MoeLayers {
        rule,
        config: config_path.to_path_buf(),
        num_layers,
        moe,
    })
}

/// True when the model's decoder picks `self.mlp` by a rule (some layers are dense).
pub fn has_rule(model: &PySource) -> Result<bool> {
    let layout = ModelLayout::find(model)?;
    let moe_class = layout.experts_owner(model);
    Ok(find::method(layout.decoder, "__init__")
        .and_then(|init| rule_of(init, moe_class.as_deref()))
        .is_some())
}

/// The condition that picks `self.mlp`, and whether it picks the MoE class when it holds
/// (`false` when the MoE class is the `else` side); `None` when `self.mlp` is always the same.
fn rule_of<'a>(init: &'a StmtFunctionDef, moe_class: Option<&str>) -> Option<(&'a Expr, bool)> {
    let is_moe_call = |expr: &Expr| matches!(expr, Expr::Call(c) if matches!(&*c.func, Expr::Name(n) if Some(n.id.as_str()) == moe_class));
    for stmt in &init.body {
        match stmt {
            Stmt::Assign(assign) if assign.targets.iter().any(|t| matches!(t, Expr::Attribute(a) if a.attr.as_str() == "mlp")) => {
                if let Expr::If(if_expr) = &*assign.value {
                    return Some((&if_expr.test, is_moe_call(&if_expr.body)));
                }
                return None;
            }
            Stmt::If(if_stmt) if if_stmt.body.iter().any(|s| matches!(s, Stmt::Assign(a) if a.targets.iter().any(|t| matches!(t, Expr::Attribute(x) if x.attr.as_str() == "mlp")))) => {
                let moe_first = if_stmt.body.iter().any(|s| matches!(s, Stmt::Assign(a) if is_moe_call(&a.value)));
                return Some((&if_stmt.test, moe_first));
            }
            _ => {}
        }
    }
    None
}

#[derive(Debug, Clone, PartialEq)]
enum Val {
    Int(i64),
    Bool(bool),
    List(Vec<Val>),
    None,
}

struct Env<'a> {
    model: &'a PySource,
    init: &'a StmtFunctionDef,
    layer_param: &'a str,
    config: &'a Json,
}

impl Env<'_> {
    fn eval(&self, expr: &Expr, layer: u32, depth: u32) -> std::result::Result<Val, String> {
        if depth > 32 {
            return Err("the rule refers to itself".into());
        }
        let truthy = |v: &Val| match v {
            Val::Bool(b) => *b,
            Val::Int(n) => *n != 0,
            Val::List(l) => !l.is_empty(),
            Val::None => false,
        };
        let int = |v: Val| match v {
            Val::Int(n) => Ok(n),
            Val::Bool(b) => Ok(i64::from(b)),
            other => Err(format!("{other:?} is not a number")),
        };
        match expr {
            Expr::NumberLiteral(n) => match &n.value {
                Number::Int(i) => i
                    .as_i64()
                    .map(Val::Int)
                    .ok_or_else(|| "integer too large".into()),
                _ => Err("only integers are understood".into()),
            },
            Expr::BooleanLiteral(b) => Ok(Val::Bool(b.value)),
            Expr::NoneLiteral(_) => Ok(Val::None),
            Expr::Name(name) if name.id.as_str() == self.layer_param => {
                Ok(Val::Int(i64::from(layer)))
            }
            Expr::Name(name) => {
                let local = self.init.body.iter().find_map(|s| match s {
                    Stmt::Assign(a) if find::assigned_names(s) == [name.id.as_str()] => {
                        Some(&*a.value)
                    }
                    _ => None,
                });
                match local {
                    Some(value) => self.eval(value, layer, depth + 1),
                    None => Err(format!("unknown name `{}`", name.id)),
                }
            }
            Expr::Attribute(attr) if self.model.slice(&*attr.value) == "config" => Ok(json_val(
                self.config.get(attr.attr.as_str()).unwrap_or(&Json::Null),
            )),
            Expr::Call(call)
                if self.model.slice(&*call.func) == "getattr" && call.arguments.args.len() >= 2 =>
            {
                let field = match &call.arguments.args[1] {
                    Expr::StringLiteral(s) => s.value.to_str().to_string(),
                    _ => return Err("getattr with a computed name".into()),
                };
                match self.config.get(&field) {
                    Some(v) => Ok(json_val(v)),
                    None => call
                        .arguments
                        .args
                        .get(2)
                        .map_or(Ok(Val::None), |d| self.eval(d, layer, depth + 1)),
                }
            }
            Expr::BoolOp(op) => {
                let mut last = Val::Bool(matches!(op.op, BoolOp::And));
                for value in &op.values {
                    last = self.eval(value, layer, depth + 1)?;
                    let stop = match op.op {
                        BoolOp::And => !truthy(&last),
                        BoolOp::Or => truthy(&last),
                    };
                    if stop {
                        break;
                    }
                }
                Ok(last)
            }
            Expr::UnaryOp(op) => {
                let v = self.eval(&op.operand, layer, depth + 1)?;
                match op.op {
                    UnaryOp::Not => Ok(Val::Bool(!truthy(&v))),
                    UnaryOp::USub => Ok(Val::Int(-int(v)?)),
                    _ => Err("unsupported unary operator".into()),
                }
            }
            Expr::BinOp(op) => {
                let (a, b) = (
                    int(self.eval(&op.left, layer, depth + 1)?)?,
                    int(self.eval(&op.right, layer, depth + 1)?)?,
                );
                match op.op {
                    Operator::Add => Ok(Val::Int(a + b)),
                    Operator::Sub => Ok(Val::Int(a - b)),
                    Operator::Mult => Ok(Val::Int(a * b)),
                    Operator::FloorDiv | Operator::Mod if b == 0 => {
                        Err("division by zero (is the config field 0?)".into())
                    }
                    Operator::FloorDiv => Ok(Val::Int(a.div_euclid(b))),
                    Operator::Mod => Ok(Val::Int(a.rem_euclid(b))),
                    _ => Err("unsupported operator".into()),
                }
            }
            Expr::Compare(cmp) => {
                let mut left = self.eval(&cmp.left, layer, depth + 1)?;
                for (op, right) in cmp.ops.iter().zip(cmp.comparators.iter()) {
                    let right = self.eval(right, layer, depth + 1)?;
                    let holds = match op {
                        CmpOp::In | CmpOp::NotIn => {
                            let found = match &right {
                                Val::List(items) => items.contains(&left),
                                Val::None => false,
                                other => return Err(format!("`in` on {other:?}")),
                            };
                            found == matches!(op, CmpOp::In)
                        }
                        CmpOp::Eq => left == right,
                        CmpOp::NotEq => left != right,
                        _ => {
                            let (a, b) = (int(left.clone())?, int(right.clone())?);
                            match op {
                                CmpOp::Lt => a < b,
                                CmpOp::LtE => a <= b,
                                CmpOp::Gt => a > b,
                                CmpOp::GtE => a >= b,
                                _ => return Err("unsupported comparison".into()),
                            }
                        }
                    };
                    if !holds {
                        return Ok(Val::Bool(false));
                    }
                    left = right;
                }
                Ok(Val::Bool(true))
            }
            _ => Err("unsupported expression".into()),
        }
    }
}

fn json_val(value: &Json) -> Val {
    match value {
        Json::Bool(b) => Val::Bool(*b),
        Json::Number(n) => n.as_i64().map_or(Val::None, Val::Int),
        Json::Array(items) => Val::List(items.iter().map(json_val).collect()),
        _ => Val::None,
    }
}

/// `if config.model_type == "x": ModelClass = C` (and its `elif`s) for the classes `classes`:
/// the model types they serve.
fn collect_model_types(src: &PySource, body: &[Stmt], classes: &[&str], out: &mut Vec<String>) {
    for stmt in body {
        let Stmt::If(if_stmt) = stmt else { continue };
        let branches = std::iter::once((Some(&*if_stmt.test), &if_stmt.body[..])).chain(
            if_stmt
                .elif_else_clauses
                .iter()
                .map(|c| (c.test.as_ref(), &c.body[..])),
        );
        for (test, branch) in branches {
            let assigns_class = branch.iter().any(|s| match s {
                Stmt::Assign(a) => {
                    matches!(&*a.value, Expr::Name(n) if classes.contains(&n.id.as_str()))
                }
                _ => false,
            });
            let Some(Expr::Compare(cmp)) = test else {
                continue;
            };
            if !assigns_class || !src.slice(&*cmp.left).ends_with("model_type") {
                continue;
            }
            if let [Expr::StringLiteral(literal)] = &cmp.comparators[..] {
                out.push(literal.value.to_str().to_string());
            }
        }
    }
}

/// The `examples/pretrain_lm/*/config.json` for a model module: `setup_model` in `training.py`
/// maps each `model_type` to a model class, and its imports name the module.
pub fn example_config(root: &Path, training: &PySource, module: &str) -> Option<PathBuf> {
    let model_types = model_types(training, module);
    let mut configs: Vec<PathBuf> = std::fs::read_dir(root.join("examples/pretrain_lm"))
        .ok()?
        .flatten()
        .map(|e| e.path().join("config.json"))
        .filter(|p| p.is_file())
        .collect();
    configs.sort();
    configs
        .into_iter()
        .find(|path| model_type(path).is_some_and(|t| model_types.contains(&t)))
}

/// The `model_type` of a Hugging Face config.json, when it is readable and has one.
pub fn model_type(config: &Path) -> Option<String> {
    let text = std::fs::read_to_string(config).ok()?;
    let config = serde_json::from_str::<Json>(&text).ok()?;
    Some(config.get("model_type")?.as_str()?.to_string())
}

/// The `model_type`s that `setup_model` in training.py builds the model of
/// `pithtrain/models/<module>.py` for.
pub fn model_types(training: &PySource, module: &str) -> Vec<String> {
    let prefix = format!("pithtrain.models.{module}");
    let classes: Vec<&str> = training
        .module
        .body
        .iter()
        .filter_map(|stmt| match stmt {
            Stmt::ImportFrom(import)
                if import.module.as_ref().is_some_and(|m| m.as_str() == prefix) =>
            {
                Some(import)
            }
            _ => None,
        })
        .flat_map(|import| {
            import
                .names
                .iter()
                .map(|alias| alias.asname.as_ref().unwrap_or(&alias.name).as_str())
        })
        .collect();
    let mut model_types = Vec::new();
    if let Some(setup) = find::function(&training.module.body, "setup_model") {
        collect_model_types(training, &setup.body, &classes, &mut model_types);
    }
    model_types
}
