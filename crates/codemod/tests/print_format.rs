//! The templates against the printed format's spec (`memprints-format`): every line the
//! inserted Python prints, read off the templates with Ruff's parser, is one of the spec's
//! shapes, and every current shape is printed by some template. A print whose wording changes
//! in a template and not in the spec fails here, naming both sides.
//!
//! What a print prints is read the way Python would build it: implicitly concatenated parts
//! joined; a name bound to a string in the same function (`hdr = f"..."`), a loop over a list
//! of strings (`for line in self._log`, filled by `self._log.append(f"...")`) and a call of a
//! helper that returns a string (`_mem_detail()`) written in; a helper that prints its
//! parameter (`_lmem(label)`, `_setup_mem(label)`) expanded at each of its calls. Every other
//! expression is a figure, `{}` or `{:spec}`, as [`memprints_format::Shape::normalised`] writes
//! the spec's placeholders. Placeholders that `add` fills with words printed as they are (a
//! tensor's name, the snapshot folder) are filled with [`ADD_TIME`], read as a figure too.

use std::collections::{BTreeMap, BTreeSet};

use memprints_codemod::template::{ALL, TemplateFile};
use memprints_format::{Piece, SHAPES, normalise};
use memprints_python::find;
use ruff_python_ast::{Expr, InterpolatedStringElement, Stmt, StmtClassDef, StmtFunctionDef};

/// What placeholders that `add` fills with printed words are filled with here.
const ADD_TIME: &str = "FILLED_BY_ADD";

/// A sample value for each template placeholder.
fn sample(placeholder: &str) -> &'static str {
    match placeholder {
        "RANKS" => "{0, 3}",
        "CTX" => "ctx",
        "SET_DEVICE" => "torch.cuda.set_device(ctx.local_rank)",
        "OPTIMIZERS" => "optimizers",
        "DETAIL_LAYERS" => "(5, 6)",
        "LAYER" => "layer",
        "STAGE" => "stage1",
        "STATEMENT" => "hidden = stage(hidden)",
        "EXPR" | "INNER" | "OUTER" => "f(x)",
        "STEP" => "training.step",
        "PROFILER_START" => "None",
        "DISPATCH" | "GATHERED" | "SCATTERED" | "OUTS" | "NAME" | "SHAPES" | "OPERATION"
        | "INNER_OPERATION" | "OUTER_OPERATION" | "SNAPSHOT_DIR" => ADD_TIME,
        other => panic!("give the template placeholder {other} a sample value in this test"),
    }
}

/// A piece of what a print prints.
#[derive(Debug, Clone, PartialEq)]
enum Pc {
    Lit(String),
    /// A figure, with its format spec.
    Hole(String),
    /// The enclosing helper's parameter, filled at each call.
    Param(String),
}

/// Where a statement sits: its function (parameters, body) and class.
#[derive(Clone, Copy)]
struct Scope<'a> {
    function: Option<&'a StmtFunctionDef>,
    class: Option<&'a StmtClassDef>,
    /// The block's statements, for code outside any function.
    block: &'a [Stmt],
}

impl<'a> Scope<'a> {
    fn body(&self) -> &'a [Stmt] {
        self.function.map_or(self.block, |f| &f.body)
    }

    fn is_param(&self, name: &str) -> bool {
        self.function.is_some_and(|f| {
            f.parameters
                .iter_non_variadic_params()
                .any(|p| p.parameter.name.as_str() == name)
        })
    }
}

/// Every statement of `body`, nested bodies included, but not those of nested functions.
fn each_stmt<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for stmt in body {
        f(stmt);
        if !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
            for child in find::child_bodies(stmt) {
                each_stmt(child, f);
            }
        }
    }
}

fn is_text(expr: &Expr) -> bool {
    matches!(expr, Expr::StringLiteral(_) | Expr::FString(_))
}

/// The functions every template defines, by name, with their scope.
struct Helpers<'a>(BTreeMap<String, Scope<'a>>);

impl<'a> Helpers<'a> {
    /// What `expr` prints, in `scope`.
    fn resolve(&self, expr: &'a Expr, scope: Scope<'a>) -> Vec<Pc> {
        match expr {
            Expr::StringLiteral(s) => vec![Pc::Lit(s.value.to_str().to_owned())],
            Expr::FString(f) => {
                let mut out = Vec::new();
                for part in f.value.iter() {
                    match part {
                        ruff_python_ast::FStringPart::Literal(s) => {
                            out.push(Pc::Lit(s.value.to_string()))
                        }
                        ruff_python_ast::FStringPart::FString(f) => {
                            for element in f.elements.iter() {
                                match element {
                                    InterpolatedStringElement::Literal(l) => {
                                        out.push(Pc::Lit(l.value.to_string()))
                                    }
                                    InterpolatedStringElement::Interpolation(i) => {
                                        let spec: String = i
                                            .format_spec
                                            .iter()
                                            .flat_map(|s| s.elements.iter())
                                            .map(|e| match e {
                                                InterpolatedStringElement::Literal(l) => {
                                                    l.value.to_string()
                                                }
                                                InterpolatedStringElement::Interpolation(_) => {
                                                    panic!("a nested format spec in a print")
                                                }
                                            })
                                            .collect();
                                        match self.inline(&i.expression, scope) {
                                            Some(pieces) if spec.is_empty() => out.extend(pieces),
                                            _ => out.push(Pc::Hole(spec)),
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                out
            }
            other => self
                .inline(other, scope)
                .unwrap_or_else(|| vec![Pc::Hole(String::new())]),
        }
    }

    /// What a name or call inside a print stands for, when it stands for text.
    fn inline(&self, expr: &'a Expr, scope: Scope<'a>) -> Option<Vec<Pc>> {
        match expr {
            Expr::Name(name) => {
                let name = name.id.as_str();
                if scope.is_param(name) {
                    return Some(vec![Pc::Param(name.to_owned())]);
                }
                let mut bound = Vec::new();
                let mut iterated = None;
                each_stmt(scope.body(), &mut |stmt| {
                    if find::assigned_names(stmt) == [name] {
                        bound.extend(find::value_of(stmt));
                    }
                    if let Stmt::For(f) = stmt
                        && matches!(&*f.target, Expr::Name(n) if n.id.as_str() == name)
                    {
                        iterated = Some(&*f.iter);
                    }
                });
                if let [value] = bound.as_slice() {
                    return is_text(value).then(|| self.resolve(value, scope));
                }
                self.appended(iterated?, scope)
            }
            Expr::Call(call) if call.arguments.is_empty() => {
                let Expr::Name(name) = &*call.func else {
                    return None;
                };
                let helper = *self.0.get(name.id.as_str())?;
                let Some(Stmt::Return(ret)) = helper.body().last() else {
                    return None;
                };
                let value = ret.value.as_deref()?;
                is_text(value).then(|| self.resolve(value, helper))
            }
            _ => None,
        }
    }

    /// What a loop over `self.X` iterates: what the class appends to `self.X`, when it appends
    /// text in one place.
    fn appended(&self, iter: &'a Expr, scope: Scope<'a>) -> Option<Vec<Pc>> {
        let Expr::Attribute(list) = iter else {
            return None;
        };
        let class = scope.class?;
        let mut found = Vec::new();
        for stmt in &class.body {
            let Stmt::FunctionDef(method) = stmt else {
                continue;
            };
            let method_scope = Scope {
                function: Some(method),
                class: Some(class),
                block: &class.body,
            };
            each_stmt(&method.body, &mut |stmt| {
                for call in find::calls_in_stmt(stmt) {
                    if let Expr::Attribute(append) = &*call.func
                        && append.attr.as_str() == "append"
                        && matches!(&*append.value, Expr::Attribute(a) if a.attr.as_str() == list.attr.as_str())
                        && let Some(arg) = call.arguments.args.first()
                    {
                        // A call inside a nested body is met once per enclosing statement.
                        if !found
                            .iter()
                            .any(|(seen, _): &(&Expr, Scope)| std::ptr::eq(*seen, arg))
                        {
                            found.push((arg, method_scope));
                        }
                    }
                }
            });
        }
        match found.as_slice() {
            [(arg, scope)] if is_text(arg) => Some(self.resolve(arg, *scope)),
            _ => None,
        }
    }
}

/// A filled, parsed block of a template.
struct Block {
    origin: String,
    body: Vec<Stmt>,
}

fn parsed_blocks(template: &TemplateFile) -> Vec<Block> {
    let values: Vec<(&str, &str)> = template
        .placeholders()
        .map(|word| (word, sample(word)))
        .collect();
    template
        .blocks()
        .map(|block| {
            let text = template.fill(block.name, &values);
            let origin = format!("{} block {}", template.name(), block.name);
            let parsed = ruff_python_parser::parse_module(&text)
                .unwrap_or_else(|e| panic!("{origin} does not parse once filled: {e}\n{text}"));
            Block {
                origin,
                body: parsed.into_syntax().body.into_iter().collect(),
            }
        })
        .collect()
}

/// Calls `f` with every call outside nested functions and classes, and its scope; recursing
/// into them with theirs.
fn each_call<'a>(
    body: &'a [Stmt],
    scope: Scope<'a>,
    f: &mut dyn FnMut(&'a ruff_python_ast::ExprCall, Scope<'a>),
) {
    for stmt in body {
        match stmt {
            Stmt::FunctionDef(def) => each_call(
                &def.body,
                Scope {
                    function: Some(def),
                    ..scope
                },
                f,
            ),
            Stmt::ClassDef(class) => each_call(
                &class.body,
                Scope {
                    function: None,
                    class: Some(class),
                    block: &class.body,
                },
                f,
            ),
            _ => {
                for call in find::calls_in_stmt(stmt) {
                    f(call, scope);
                }
            }
        }
    }
}

/// The pieces as the spec's normalised text, [`ADD_TIME`] read as a figure.
fn normalised(pieces: &[Pc]) -> String {
    let mut spec_pieces: Vec<Piece<'_>> = Vec::new();
    for piece in pieces {
        match piece {
            Pc::Lit(text) => {
                for (k, part) in text.split(ADD_TIME).enumerate() {
                    if k > 0 {
                        spec_pieces.push(Piece::Field { name: "", spec: "" });
                    }
                    spec_pieces.push(Piece::Literal(part));
                }
            }
            Pc::Hole(spec) => spec_pieces.push(Piece::Field { name: "", spec }),
            Pc::Param(name) => panic!("the parameter {name} was not filled"),
        }
    }
    normalise(&spec_pieces)
}

/// Every line the templates print, normalised, with where it is printed.
fn template_prints() -> BTreeMap<String, BTreeSet<String>> {
    let blocks: Vec<Block> = ALL.iter().flat_map(parsed_blocks).collect();
    let mut helpers = Helpers(BTreeMap::new());
    for block in &blocks {
        let top = Scope {
            function: None,
            class: None,
            block: &block.body,
        };
        for stmt in &block.body {
            if let Stmt::FunctionDef(def) = stmt {
                helpers.0.insert(
                    def.name.to_string(),
                    Scope {
                        function: Some(def),
                        ..top
                    },
                );
            }
        }
    }
    // First the prints themselves; a print of a helper's parameter waits for the helper's calls.
    let mut printing_helpers: BTreeMap<String, (String, Vec<Pc>)> = BTreeMap::new();
    let mut prints: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for block in &blocks {
        let top = Scope {
            function: None,
            class: None,
            block: &block.body,
        };
        each_call(&block.body, top, &mut |call, scope| {
            if find::callee_name(call) != Some("print") || !matches!(&*call.func, Expr::Name(_)) {
                return;
            }
            let arg = call
                .arguments
                .args
                .first()
                .expect("print(...) prints something");
            let pieces = helpers.resolve(arg, scope);
            match pieces.iter().find_map(|p| match p {
                Pc::Param(name) => Some(name.clone()),
                _ => None,
            }) {
                Some(param) => {
                    let helper = scope
                        .function
                        .expect("a parameter has a function")
                        .name
                        .to_string();
                    printing_helpers.insert(helper, (param, pieces));
                }
                None => {
                    prints
                        .entry(normalised(&pieces))
                        .or_default()
                        .insert(block.origin.clone());
                }
            }
        });
    }
    for block in &blocks {
        let top = Scope {
            function: None,
            class: None,
            block: &block.body,
        };
        each_call(&block.body, top, &mut |call, scope| {
            let Expr::Name(name) = &*call.func else {
                return;
            };
            let Some((param, printed)) = printing_helpers.get(name.id.as_str()) else {
                return;
            };
            let arg = call.arguments.args.first().expect("the helper's argument");
            let label = helpers.resolve(arg, scope);
            let line: Vec<Pc> = printed
                .iter()
                .flat_map(|p| match p {
                    Pc::Param(p) if p == param => label.clone(),
                    other => vec![other.clone()],
                })
                .collect();
            prints
                .entry(normalised(&line))
                .or_default()
                .insert(format!("{} (through {})", block.origin, name.id));
        });
    }
    prints
}

#[test]
fn the_templates_print_exactly_the_shapes_of_the_spec() {
    let printed = template_prints();
    let spec: BTreeMap<String, &str> = SHAPES
        .iter()
        .filter(|s| !s.legacy)
        .map(|s| (s.normalised(), s.name))
        .collect();
    let mut problems = Vec::new();
    for (line, origins) in &printed {
        if !spec.contains_key(line) {
            let origins: Vec<&str> = origins.iter().map(String::as_str).collect();
            problems.push(format!(
                "printed by {} but no shape of memprints-format prints it:\n    {line}",
                origins.join(", ")
            ));
        }
    }
    for (line, name) in &spec {
        if !printed.contains_key(line) {
            problems.push(format!(
                "shape `{name}` of memprints-format is printed by no template:\n    {line}"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the templates and memprints-format disagree:\n{}",
        problems.join("\n")
    );
}

#[test]
fn helpers_and_their_prints_are_found() {
    let printed = template_prints();
    let origins = |line: &str| {
        printed
            .get(line)
            .unwrap_or_else(|| panic!("not printed: {line}"))
            .clone()
    };
    // `_lmem` called in layer_forward.py, its label an f-string.
    assert!(
        origins("[rank={}]   layer{} after stage2 (dispatch a2a): alloc={:.2f}")
            .contains("layer_forward.py block after_stage2 (through _lmem)")
    );
    // `_mem_detail()` written into a pipeline print.
    assert!(
        origins(
            "[rank={} pp={}] Step4 i={}: {:.2f} GiB | alloc={:.2f} cached={:.2f} non-pt={:.2f}"
        )
        .contains("pipeline.py block step4_iteration")
    );
    // A line of `self._log`, and `hdr`.
    assert!(
        origins("[rank={}]     saved ({}): {} {} ({:.1f} MB, {} bytes)")
            .contains("layer_helpers.py block module_helpers")
    );
    assert!(
        origins("[rank={}] layer{} {} saved tensors:")
            .contains("layer_helpers.py block module_helpers")
    );
}

#[test]
fn every_shape_is_listed_under_a_group_of_the_skill() {
    let ids: Vec<&str> = memprints_codemod::instrument::GROUPS
        .iter()
        .map(|g| g.id)
        .collect();
    for shape in SHAPES {
        assert!(
            ids.contains(&shape.group),
            "shape `{}` names the group {}, which is not one of {ids:?}",
            shape.name,
            shape.group
        );
    }
}
