//! What `remove` and `status` recognise as memprints' code, read off the templates: every block
//! of every group's template is parsed once with Ruff's parser (the first time it is needed) and
//! sorted into what it defines, binds, tests and prints. Nothing here is a copy of template
//! text, so a template change is a change to recognition too.
//!
//! The rules, each over the top-level statements of the blocks:
//!
//! - a module-level `def` or `class` with a private name (`_mem_gb`) is a *helper*;
//! - a private name an assignment binds (`_profiling`, `_free0`) is *bound* by the
//!   instrumentation only; an attribute it assigns (`self.memory_profiling`) likewise;
//! - a private name an `if` tests (`_do`, `_mem_snapshot`) is a *flag*: its `if` is inserted code;
//! - an `if <x> in RANKS:` block is a *rank-guarded print*, known by its print's label;
//! - a plain statement that binds nothing private (`torch.cuda.synchronize()`, `G = 1024**3`) is
//!   *weak*: inserted code only where it stands next to other inserted code;
//! - `from M import _a, _b` is inserted; an import of public names (`DTensor`) is *optional*,
//!   inserted only where the module lacked it;
//! - `try: PLACEHOLDER` and `if FLAG: … else: PLACEHOLDER` are *wrappers* around user code;
//! - a block ending in `return NAME` is a *split return* (`NAME = EXPR` … `return NAME`);
//! - a column-0 comment is inserted code; a block that is nothing but a comment is a *marker*
//!   left where a statement was moved from, and the comment above a placeholder line says
//!   where the statement went;
//! - fragments give the *parameter* (`_do_mem: bool = False`) and the *keyword argument*
//!   (`_do_mem=_do`) added to existing code.
//!
//! For `status`, each block has a *signature* (see [`Vocabulary::signature`]), and the lines
//! holding the placeholders of [`crate::params::READ_BACK`] become patterns that read the
//! ranks, detail layers and snapshot folder back.

use std::sync::OnceLock;

use regex::Regex;
use ruff_python_ast::{CmpOp, ExceptHandler, Expr, InterpolatedStringElement, ModModule, Stmt};
use ruff_text_size::Ranged;

use super::GROUPS;
use super::group::Group;
use crate::pithtrain::{PerTarget, Target};
use crate::template::{Section, SectionKind, TemplateFile, fill, placeholder_words};
use memprints_python::{PySource, find};

/// Everything memprints' code is recognised by. See the module documentation for the rules.
#[derive(Debug, Default)]
pub struct Vocabulary {
    /// Module-level helper definitions: `_mem_gb`, `_SavedTensorsProfiler`, ...
    pub helpers: Vec<String>,
    /// Private names only the instrumentation binds: `_profiling`, `_free0`, ...
    pub bound: Vec<String>,
    /// Attributes only the instrumentation assigns: `self.memory_profiling`.
    pub bound_attributes: Vec<String>,
    /// Private names whose `if` blocks are inserted code: `_do`, `_mem_snapshot`, ...
    pub flags: Vec<String>,
    /// The labels of rank-guarded prints: `] init_process_group | `, ...
    pub guarded_labels: Vec<String>,
    /// Plain statements that are inserted code where they stand next to inserted code.
    pub weak: Vec<Weak>,
    /// Inserted imports: a module and the private names imported from it.
    pub imports: Vec<(String, Vec<String>)>,
    /// Imports inserted only where the module lacked them.
    pub optional_imports: Vec<OptionalImport>,
    /// `try:` wrappers around user code.
    pub try_wrappers: Vec<TryWrapper>,
    /// The tests of `if FLAG: … else: <user code>` wrappers: `_do_saved`.
    pub if_else_tests: Vec<String>,
    /// Comment lines of inserted blocks.
    pub comments: Vec<String>,
    /// Comments left where a statement was moved from.
    pub moved_markers: Vec<String>,
    /// Comments directly above the place a moved statement went to.
    pub moved_comments: Vec<String>,
    /// Parameters added to existing functions, by name: `_do_mem`.
    pub parameters: Vec<String>,
    /// Keyword arguments added to existing calls, by name: `_do_mem`.
    pub keywords: Vec<String>,
    /// Names bound by a split return: `outs`, `embeds`, `logits`.
    pub split_names: Vec<String>,
    /// Names bound by a nested split return, inner then outer: `(gu, out)`.
    pub nested_splits: Vec<(String, String)>,
    signatures: Vec<Signature>,
    torch_targets: Vec<Target>,
    values: Vec<ValuePattern>,
}

/// An import inserted only where the module lacked it.
#[derive(Debug, Clone)]
pub struct OptionalImport {
    /// The statement, e.g. `from torch.distributed.tensor import DTensor`.
    pub text: String,
    /// The name it binds.
    pub name: String,
}

/// A plain statement of a block (`torch.cuda.synchronize()`) that is inserted code only where
/// it stands next to inserted code, on the side where the block has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Weak {
    /// The statement, as written.
    pub text: String,
    /// Some block has a statement of its own right before it.
    pub follows_ours: bool,
    /// Some block has a statement of its own right after it.
    pub precedes_ours: bool,
}

/// A `try:` wrapper around user code.
#[derive(Debug, Clone)]
pub struct TryWrapper {
    /// The exception its handler catches, as written: `torch.OutOfMemoryError`.
    pub exception: String,
    /// The flag an `if` in its handler tests: `_mem_snapshot`.
    pub flag: String,
}

/// How a block is found in a file, for `status`.
#[derive(Debug)]
pub struct Signature {
    template: &'static str,
    block: &'static str,
    pattern: Regex,
    /// A line signature must be a whole line (indentation aside); a literal one may be anywhere.
    whole_line: bool,
}

#[derive(Debug)]
struct ValuePattern {
    placeholder: &'static str,
    target: Target,
    kind: ValueKind,
}

/// How a placeholder's value is found in a file.
#[derive(Debug)]
enum ValueKind {
    /// The placeholder ends a statement's head (`if CTX.rank in RANKS:`, `_x = a and b in
    /// RANKS`): `head` matches what comes before it, whitespace collapsed, and the value is the
    /// set or tuple literal of integers there, read off the parsed file, so however Ruff wrapped
    /// it over lines.
    Trailing {
        /// The statement's head before the literal.
        head: Regex,
        /// What the literal, written on one line, must look like ([`crate::params::READ_BACK`]).
        value: Regex,
    },
    /// Anywhere on one line (`f"SNAPSHOT_DIR/..."`, an f-string Ruff never splits): a pattern
    /// capturing the value.
    Line(Regex),
}

impl Vocabulary {
    /// The vocabulary, built from the templates on first use.
    pub fn get() -> &'static Vocabulary {
        static VOCABULARY: OnceLock<Vocabulary> = OnceLock::new();
        VOCABULARY.get_or_init(Vocabulary::build)
    }

    fn build() -> Vocabulary {
        let mut vocabulary = Vocabulary::default();
        for group in GROUPS {
            for section in group.template.sections() {
                match section.kind {
                    SectionKind::Block => vocabulary.learn_block(group, section),
                    SectionKind::Fragment => vocabulary.learn_fragment(section.text),
                }
            }
        }
        for group in GROUPS {
            for block in group.template.blocks() {
                if let Some(signature) = signature_of(group.template, block) {
                    vocabulary.signatures.push(signature);
                }
            }
            for marker in group.markers {
                assert!(
                    vocabulary.signature(group.template, marker.block).is_some(),
                    "group {}: marker block `{}` of {} has no signature (a string literal or a line naming a private name that no other block has)",
                    group.id,
                    marker.block,
                    group.template.name()
                );
            }
        }
        vocabulary.values = value_patterns();
        vocabulary
    }

    fn learn_block(&mut self, group: &Group, section: Section) {
        let block = ParsedBlock::parse(group.template, section);
        let own = block.own_statements();
        for (i, stmt) in own.iter().enumerate() {
            self.learn_statement(&block, stmt);
            if block.is_weak(stmt) {
                self.learn_weak(block.slice(*stmt), i > 0, i + 1 < own.len());
            }
        }
        self.learn_split(&block);
        let lines: Vec<&str> = section.text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.starts_with('#') {
                if block.body().is_empty() {
                    push_new(&mut self.moved_markers, line);
                } else {
                    push_new(&mut self.comments, line);
                }
            }
            if i > 0 && block.is_placeholder(line) && lines[i - 1].starts_with('#') {
                push_new(&mut self.moved_comments, lines[i - 1]);
            }
        }
        let uses_torch = block
            .body()
            .iter()
            .any(|stmt| find::names_in_stmt(stmt).contains(&"torch"));
        if uses_torch && !self.torch_targets.contains(&group.target) {
            self.torch_targets.push(group.target);
        }
    }

    fn learn_statement(&mut self, block: &ParsedBlock, stmt: &Stmt) {
        match stmt {
            Stmt::FunctionDef(def) if private(def.name.as_str()) => {
                push_new(&mut self.helpers, def.name.as_str())
            }
            Stmt::ClassDef(class) if private(class.name.as_str()) => {
                push_new(&mut self.helpers, class.name.as_str())
            }
            Stmt::Assign(_) | Stmt::AnnAssign(_) => {
                for name in find::assigned_names(stmt) {
                    if private(name) && !block.is_placeholder(name) {
                        push_new(&mut self.bound, name);
                    }
                }
                for attribute in attribute_targets(stmt) {
                    push_new(&mut self.bound_attributes, block.slice(attribute));
                }
            }
            Stmt::If(if_stmt) => {
                for name in find::names_in_expr(&if_stmt.test) {
                    if private(name) && !block.is_placeholder(name) {
                        push_new(&mut self.flags, name);
                    }
                }
                if block.is_rank_guard(&if_stmt.test)
                    && let Some(label) = print_label(&if_stmt.body)
                {
                    push_new(&mut self.guarded_labels, &label);
                }
                if let [.., clause] = if_stmt.elif_else_clauses.as_slice()
                    && clause.test.is_none()
                    && block.is_carrier(&clause.body)
                {
                    push_new(&mut self.if_else_tests, block.slice(&*if_stmt.test));
                }
            }
            Stmt::Try(try_stmt) if block.is_carrier(&try_stmt.body) => {
                for handler in &try_stmt.handlers {
                    let ExceptHandler::ExceptHandler(handler) = handler;
                    let flag = handler.body.iter().find_map(|s| match s {
                        Stmt::If(i) => Some(block.slice(&*i.test).to_string()),
                        _ => None,
                    });
                    if let (Some(exception), Some(flag)) = (handler.type_.as_deref(), flag) {
                        self.try_wrappers.push(TryWrapper {
                            exception: block.slice(exception).to_string(),
                            flag,
                        });
                    }
                }
            }
            Stmt::ImportFrom(import) => {
                let module = import.module.as_ref().map_or("", |m| m.as_str());
                let names: Vec<String> = import
                    .names
                    .iter()
                    .map(|a| a.asname.as_ref().unwrap_or(&a.name).to_string())
                    .collect();
                if !names.iter().all(|n| private(n)) {
                    self.optional_imports.push(OptionalImport {
                        text: block.slice(stmt).to_string(),
                        name: names[0].clone(),
                    });
                } else if let Some((_, known)) = self.imports.iter_mut().find(|(m, _)| m == module)
                {
                    for name in &names {
                        push_new(known, name);
                    }
                } else {
                    self.imports.push((module.to_string(), names));
                }
            }
            _ => {}
        }
    }

    /// A plain statement, with whether its block has a statement of its own before / after it.
    fn learn_weak(&mut self, text: &str, follows_ours: bool, precedes_ours: bool) {
        match self.weak.iter_mut().find(|w| w.text == text) {
            Some(known) => {
                known.follows_ours |= follows_ours;
                known.precedes_ours |= precedes_ours;
            }
            None => self.weak.push(Weak {
                text: text.to_string(),
                follows_ours,
                precedes_ours,
            }),
        }
    }

    /// `NAME = EXPR` … `return NAME`, and `inner = A` … `outer = B` … `return outer`.
    fn learn_split(&mut self, block: &ParsedBlock) {
        let body = block.body();
        let Some(Stmt::Return(ret)) = body.last() else {
            return;
        };
        let Some(Expr::Name(returned)) = ret.value.as_deref() else {
            return;
        };
        let assigned: Vec<&str> = body
            .iter()
            .filter(|s| matches!(s, Stmt::Assign(_)))
            .flat_map(find::assigned_names)
            .filter(|n| !block.is_placeholder(n))
            .collect();
        match assigned.as_slice() {
            [name] if *name == returned.id.as_str() => push_new(&mut self.split_names, name),
            [inner, outer] if *outer == returned.id.as_str() => self
                .nested_splits
                .push((inner.to_string(), outer.to_string())),
            _ => {}
        }
    }

    /// A fragment is a keyword argument (`_do_mem=_do`) or a parameter (`_do_mem: bool =
    /// False`) when it parses as one with a private name; other fragments (label fields) are
    /// not recognised on their own.
    fn learn_fragment(&mut self, text: &str) {
        if let Ok(parsed) = ruff_python_parser::parse_module(&format!("_({text})"))
            && let [Stmt::Expr(expr)] = parsed.syntax().body.as_slice()
            && let Expr::Call(call) = &*expr.value
            && let [keyword] = &call.arguments.keywords[..]
            && let Some(arg) = keyword.arg.as_ref().filter(|a| private(a.as_str()))
        {
            push_new(&mut self.keywords, arg.as_str());
            return;
        }
        if let Ok(parsed) = ruff_python_parser::parse_module(&format!("def _({text}): ..."))
            && let [Stmt::FunctionDef(def)] = parsed.syntax().body.as_slice()
            && let [parameter] = &def.parameters.args[..]
            && private(parameter.parameter.name.as_str())
        {
            push_new(&mut self.parameters, parameter.parameter.name.as_str());
        }
    }

    /// True when code for `target` needs `torch` imported.
    pub fn needs_torch(&self, target: Target) -> bool {
        self.torch_targets.contains(&target)
    }

    /// How block `block` of `template` is found in a file: its first string literal (a label:
    /// something more than a bare word) that no other block of any template has, or failing
    /// that its first line that names a private name or holds a comment and that no other block
    /// has. Placeholders in it match any text. `None` for blocks without one (e.g. a block
    /// that only toggles a flag another block toggles too).
    pub fn signature(&self, template: TemplateFile, block: &str) -> Option<&Signature> {
        self.signatures
            .iter()
            .find(|s| s.template == template.name() && s.block == block)
    }

    /// How many times the signature of `block` of `template` occurs in `text`.
    pub fn count(&self, template: TemplateFile, block: &str, text: &str) -> usize {
        let Some(signature) = self.signature(template, block) else {
            return 0;
        };
        if signature.whole_line {
            text.lines()
                .filter(|line| signature.pattern.is_match(line.trim()))
                .count()
        } else {
            signature.pattern.find_iter(text).count()
        }
    }

    /// The literal a placeholder of [`crate::params::READ_BACK`] was filled with, read back
    /// from the first file (in [`GROUPS`] order of the template lines holding it) that has it.
    pub fn read_back(
        &self,
        placeholder: &str,
        files: &PerTarget<Option<&PySource>>,
    ) -> Option<String> {
        self.values
            .iter()
            .filter(|v| v.placeholder == placeholder)
            .find_map(|v| files[v.target].and_then(|src| v.find(src)))
    }

    /// The literal a placeholder was filled with in `src`, the file of `target`, alone.
    pub fn read_back_in(
        &self,
        placeholder: &str,
        target: Target,
        src: &PySource,
    ) -> Option<String> {
        self.values
            .iter()
            .filter(|v| v.placeholder == placeholder && v.target == target)
            .find_map(|v| v.find(src))
    }
}

impl ValuePattern {
    /// The value in `src`, as a one-line literal (`{0, 1, 2}`) or the captured text.
    fn find(&self, src: &PySource) -> Option<String> {
        match &self.kind {
            ValueKind::Line(pattern) => pattern.captures(&src.text).map(|c| c[1].to_string()),
            ValueKind::Trailing { head, value } => {
                let mut found = None;
                walk_statements(&src.module.body, &mut |stmt| {
                    if found.is_none()
                        && let Some((text, literal)) = trailing_literal_of(src, stmt)
                        && head.is_match(&text)
                        && let Some(literal) = int_literal(literal)
                        && value.is_match(&literal)
                    {
                        found = Some(literal);
                    }
                });
                found
            }
        }
    }
}

/// Calls `f` on every statement of `body` and of the bodies nested in it (functions and
/// classes included), in source order.
fn walk_statements<'a>(body: &'a [Stmt], f: &mut impl FnMut(&'a Stmt)) {
    for stmt in body {
        f(stmt);
        match stmt {
            Stmt::FunctionDef(def) => walk_statements(&def.body, f),
            Stmt::ClassDef(class) => walk_statements(&class.body, f),
            _ => {
                for child in find::child_bodies(stmt) {
                    walk_statements(child, f);
                }
            }
        }
    }
}

/// For an assignment or an `if` whose value (test) ends in a set or tuple literal (`x = {..}`,
/// `x = a and b in {..}`, `if a in (..):`): the statement's head before the literal, with every
/// run of whitespace (newlines too) written as one space, and the literal.
fn trailing_literal_of<'a>(src: &'a PySource, stmt: &'a Stmt) -> Option<(String, &'a Expr)> {
    let (prefix, expr) = match stmt {
        Stmt::Assign(assign) => {
            let targets: Vec<&str> = assign.targets.iter().map(|t| src.slice(t)).collect();
            (format!("{} = ", targets.join(" = ")), &*assign.value)
        }
        Stmt::If(if_stmt) => ("if ".to_string(), &*if_stmt.test),
        _ => return None,
    };
    let literal = trailing_literal(expr)?;
    let between = &src.text[expr.start().to_usize()..literal.start().to_usize()];
    Some((format!("{prefix}{}", collapse_whitespace(between)), literal))
}

/// The set or tuple literal an expression ends in: itself, the last comparator of a comparison,
/// the last operand of `and`/`or`.
fn trailing_literal(expr: &Expr) -> Option<&Expr> {
    match expr {
        Expr::Set(_) | Expr::Tuple(_) => Some(expr),
        Expr::Compare(compare) => trailing_literal(compare.comparators.last()?),
        Expr::BoolOp(bool_op) => trailing_literal(bool_op.values.last()?),
        _ => None,
    }
}

/// A set or tuple of integer literals written on one line as [`crate::params::Params`] writes
/// it (`{0, 1}`, `(5,)`); `None` for anything else.
fn int_literal(expr: &Expr) -> Option<String> {
    let (elements, open, close) = match expr {
        Expr::Set(set) => (&set.elts, "{", "}"),
        Expr::Tuple(tuple) => (&tuple.elts, "(", ")"),
        _ => return None,
    };
    let values: Vec<String> = elements
        .iter()
        .map(|e| match e {
            Expr::NumberLiteral(n) => match &n.value {
                ruff_python_ast::Number::Int(i) => Some(i.to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect::<Option<_>>()?;
    let comma = if values.len() == 1 && open == "(" {
        ","
    } else {
        ""
    };
    Some(format!("{open}{}{comma}{close}", values.join(", ")))
}

/// `text` with every run of whitespace written as one space.
fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    out
}

/// A name the instrumentation owns: it starts with `_`.
fn private(name: &str) -> bool {
    name.starts_with('_')
}

fn push_new(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|known| known == item) {
        list.push(item.to_string());
    }
}

/// One template block, parsed.
struct ParsedBlock {
    template: TemplateFile,
    text: &'static str,
    module: ModModule,
}

impl ParsedBlock {
    fn parse(template: TemplateFile, section: Section) -> Self {
        let module = ruff_python_parser::parse_module(section.text)
            .unwrap_or_else(|e| {
                panic!(
                    "template {}: block `{}` is not valid Python: {e}",
                    template.name(),
                    section.name
                )
            })
            .into_syntax();
        ParsedBlock {
            template,
            text: section.text,
            module,
        }
    }

    fn body(&self) -> &[Stmt] {
        &self.module.body
    }

    fn slice(&self, node: &dyn Ranged) -> &'static str {
        &self.text[node.range()]
    }

    fn is_placeholder(&self, word: &str) -> bool {
        self.template.is_placeholder(word)
    }

    fn has_placeholder(&self, code: &str) -> bool {
        placeholder_words(code, |w| self.is_placeholder(w))
            .next()
            .is_some()
    }

    /// `[PLACEHOLDER]`: a body that is user code carried into the block.
    fn is_carrier(&self, stmts: &[Stmt]) -> bool {
        matches!(stmts, [Stmt::Expr(e)]
            if matches!(&*e.value, Expr::Name(n) if self.is_placeholder(n.id.as_str())))
    }

    /// The block's own top-level statements: not the placeholders that carry user code.
    fn own_statements(&self) -> Vec<&Stmt> {
        self.body()
            .iter()
            .filter(|s| !self.is_carrier(std::slice::from_ref(*s)))
            .collect()
    }

    /// A plain statement that binds, assigns and calls nothing private (`G = 1024**3`).
    fn is_weak(&self, stmt: &Stmt) -> bool {
        let plain = match stmt {
            Stmt::Assign(_) | Stmt::AnnAssign(_) => {
                attribute_targets(stmt).is_empty()
                    && !find::assigned_names(stmt).iter().any(|n| private(n))
            }
            Stmt::Expr(expr) => !matches!(&*expr.value,
                Expr::Call(c) if find::callee_name(c).is_some_and(private)),
            _ => false,
        };
        plain && !self.has_placeholder(self.slice(stmt))
    }

    /// `<x> in RANKS`.
    fn is_rank_guard(&self, test: &Expr) -> bool {
        matches!(test, Expr::Compare(compare)
            if compare.ops.as_ref() == [CmpOp::In]
                && matches!(&compare.comparators[0], Expr::Name(n) if self.is_placeholder(n.id.as_str())))
    }
}

/// The attributes an assignment assigns (`self.memory_profiling`).
fn attribute_targets(stmt: &Stmt) -> Vec<&Expr> {
    match stmt {
        Stmt::Assign(assign) => assign
            .targets
            .iter()
            .filter(|t| matches!(t, Expr::Attribute(_)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The label of the first `print(f"[rank=...] LABEL ...")` in `body`: the f-string's first
/// literal part after its first field.
fn print_label(body: &[Stmt]) -> Option<String> {
    body.iter().find_map(|stmt| {
        let call = find::calls_in_stmt(stmt)
            .into_iter()
            .find(|c| find::callee_name(c) == Some("print"))?;
        let Some(Expr::FString(fstring)) = call.arguments.args.first() else {
            return None;
        };
        fstring
            .value
            .elements()
            .skip_while(|e| matches!(e, InterpolatedStringElement::Literal(_)))
            .find_map(|e| match e {
                InterpolatedStringElement::Literal(literal) => Some(literal.value.to_string()),
                InterpolatedStringElement::Interpolation(_) => None,
            })
    })
}

/// The string literals written on `line`, with their prefix and quotes (`f"a {b}"`).
fn literals(line: &str) -> Vec<&str> {
    let bytes = line.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'#' => break,
            quote @ (b'"' | b'\'') => {
                let mut start = i;
                while start > 0 && bytes[start - 1].is_ascii_alphabetic() {
                    start -= 1;
                }
                let mut end = i + 1;
                while end < bytes.len() && bytes[end] != quote {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let end = (end + 1).min(bytes.len());
                found.push(&line[start..end]);
                i = end;
            }
            _ => i += 1,
        }
    }
    found
}

/// `text` as a regular expression in which placeholders match any text.
fn pattern(template: TemplateFile, text: &str) -> String {
    let escaped = regex::escape(text);
    let any: Vec<(&str, &str)> = placeholder_words(&escaped, |w| template.is_placeholder(w))
        .map(|w| (w, ".+?"))
        .collect();
    fill(&escaped, &any)
}

fn signature_of(template: TemplateFile, block: Section) -> Option<Signature> {
    let lines: Vec<&str> = block
        .text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let without_placeholders = |text: &str| -> String {
        let words: Vec<(&str, &str)> = placeholder_words(text, |w| template.is_placeholder(w))
            .map(|w| (w, ""))
            .collect();
        fill(text, &words)
    };
    let others = || {
        crate::template::ALL.iter().flat_map(move |t| {
            t.blocks()
                .filter(move |b| !(t.name() == template.name() && b.name == block.name))
        })
    };
    let literal_is_label = |literal: &str| {
        let bare = without_placeholders(literal);
        let inner = bare.trim_start_matches(|c: char| c.is_ascii_alphabetic());
        inner
            .trim_matches(['"', '\''])
            .chars()
            .any(|c| !(c.is_ascii_alphanumeric() || c == '_'))
    };
    for literal in lines.iter().flat_map(|l| literals(l)) {
        let regex = Regex::new(&pattern(template, literal)).expect("an escaped pattern");
        if literal_is_label(literal)
            && regex.find_iter(block.text).count() == 1
            && others().all(|b| !regex.is_match(b.text))
        {
            return Some(Signature {
                template: template.name(),
                block: block.name,
                pattern: regex,
                whole_line: false,
            });
        }
    }
    let names_private = |line: &str| {
        line.starts_with('#')
            || line.contains("  #")
            || line
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| w.len() > 1 && private(w))
    };
    for line in &lines {
        let regex =
            Regex::new(&format!("^{}$", pattern(template, line))).expect("an escaped pattern");
        let matches_in = |text: &str| text.lines().filter(|l| regex.is_match(l.trim())).count();
        if names_private(line)
            && matches_in(block.text) == 1
            && others().all(|b| matches_in(b.text) == 0)
        {
            return Some(Signature {
                template: template.name(),
                block: block.name,
                pattern: regex,
                whole_line: true,
            });
        }
    }
    None
}

/// For each placeholder of [`crate::params::READ_BACK`], every template line holding it, in
/// [`GROUPS`] order: a [`ValueKind::Trailing`] head where the placeholder ends the line (or its
/// `if` header), else a [`ValueKind::Line`] pattern capturing the value.
fn value_patterns() -> Vec<ValuePattern> {
    let mut patterns = Vec::new();
    for (placeholder, value) in crate::params::READ_BACK {
        for group in GROUPS {
            let template = group.template;
            for block in template.blocks() {
                for line in block.text.lines().map(str::trim) {
                    if placeholder_words(line, |w| w == placeholder)
                        .next()
                        .is_none()
                    {
                        continue;
                    }
                    let body = line.strip_suffix(':').unwrap_or(line);
                    let kind = match body.strip_suffix(placeholder) {
                        Some(head)
                            if !head.ends_with(|c: char| c.is_alphanumeric() || c == '_') =>
                        {
                            ValueKind::Trailing {
                                head: Regex::new(&format!(
                                    "^{}$",
                                    pattern(template, &collapse_whitespace(head))
                                ))
                                .expect("an escaped pattern"),
                                value: Regex::new(&format!("^{value}$")).expect("a value pattern"),
                            }
                        }
                        _ => ValueKind::Line(line_pattern(template, line, placeholder, value)),
                    };
                    patterns.push(ValuePattern {
                        placeholder,
                        target: group.target,
                        kind,
                    });
                }
            }
        }
    }
    patterns
}

/// `line` as a pattern capturing the value of `placeholder` (as `value` matches it); other
/// placeholders match any text.
fn line_pattern(template: TemplateFile, line: &str, placeholder: &str, value: &str) -> Regex {
    let escaped = regex::escape(line);
    let capture = format!("({value})");
    let words: Vec<(&str, &str)> = placeholder_words(&escaped, |w| template.is_placeholder(w))
        .map(|w| {
            (
                w,
                if w == placeholder {
                    capture.as_str()
                } else {
                    ".+?"
                },
            )
        })
        .collect();
    Regex::new(&fill(&escaped, &words)).expect("an escaped pattern")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vocabulary_names_what_the_templates_define() {
        let v = Vocabulary::get();
        for helper in [
            "_mem_gb",
            "_mem_detail",
            "_SavedTensorsProfiler",
            "_lmem",
            "_setup_mem",
        ] {
            assert!(
                v.helpers.iter().any(|h| h == helper),
                "{helper}: {:?}",
                v.helpers
            );
        }
        assert_eq!(v.helpers.len(), 5, "{:?}", v.helpers);
        for flag in [
            "_profiling",
            "_do",
            "_do_lmem",
            "_do_saved",
            "_do_mem",
            "_layer_mem_profile",
            "_mem_profile",
            "_mem_snapshot",
            "_mem_history",
        ] {
            assert!(v.flags.iter().any(|f| f == flag), "{flag}: {:?}", v.flags);
        }
        assert_eq!(v.flags.len(), 9, "{:?}", v.flags);
        assert_eq!(v.bound_attributes, ["self.memory_profiling"]);
        let weak: Vec<(&str, bool, bool)> = v
            .weak
            .iter()
            .map(|w| (w.text.as_str(), w.follows_ours, w.precedes_ours))
            .collect();
        assert_eq!(
            weak,
            [
                ("torch.cuda.synchronize()", false, true),
                ("G = 1024**3", true, true),
                // Only ever right before its print: PithTrain has a `rank = ...` of its own
                // right after the inserted block, which must stay.
                ("rank = torch.distributed.get_rank()", false, true),
            ]
        );
        assert_eq!(
            v.guarded_labels,
            [
                "] init_process_group | ",
                "] init_device_mesh | ",
                "] load_ckpt | optimizer state: "
            ]
        );
        assert_eq!(
            v.moved_markers,
            ["# memprints: set_device moved above init_process_group"]
        );
        assert_eq!(
            v.moved_comments,
            ["# Probe: isolate CUDA context cost from NCCL communicator init"]
        );
        assert_eq!(v.comments.len(), 3, "{:?}", v.comments);
        assert_eq!(v.parameters, ["_do_mem"]);
        assert_eq!(v.keywords, ["_do_mem"]);
        assert_eq!(v.split_names, ["outs", "embeds", "logits"]);
        assert_eq!(v.nested_splits, [("gu".to_string(), "out".to_string())]);
        assert_eq!(v.if_else_tests, ["_do_saved"]);
        assert_eq!(v.try_wrappers.len(), 1);
        assert_eq!(v.try_wrappers[0].exception, "torch.OutOfMemoryError");
        assert_eq!(v.try_wrappers[0].flag, "_mem_snapshot");
        assert_eq!(
            v.imports,
            [(
                "pithtrain.dualpipe.execution".to_string(),
                vec!["_layer_mem_profile".to_string(), "_lmem".to_string()]
            )]
        );
        assert_eq!(v.optional_imports.len(), 1);
        assert_eq!(v.optional_imports[0].name, "DTensor");
        assert!(v.bound.iter().any(|b| b == "_mem_first_step"));
        assert!(
            v.bound.iter().any(|b| b == "_"),
            "`_free1, _ = ...` binds `_` too"
        );
    }

    #[test]
    fn the_model_file_is_the_one_target_that_needs_no_torch_import() {
        let v = Vocabulary::get();
        for target in Target::ALL {
            assert_eq!(v.needs_torch(target), target != Target::Model, "{target:?}");
        }
    }

    #[test]
    fn string_literals_are_found_with_their_prefix() {
        assert_eq!(
            literals(r#"    _lmem(f"layer{x} a", 'b')  # "c""#),
            [r#"f"layer{x} a""#, "'b'"]
        );
    }

    fn parsed(text: &str) -> PySource {
        PySource::parse("t.py", text.to_string()).unwrap()
    }

    #[test]
    fn the_ranks_layers_and_snapshot_folder_read_back_from_the_lines_that_hold_them() {
        let v = Vocabulary::get();
        let execution = parsed(
            "_layer_mem_ranks = {3, 14}\ndef f(block):\n    _do_lmem = _layer_mem_profile and block.idx in (5, 6)\n",
        );
        let pretrain = parsed(
            "f(\n    f\"/scratch/s/memory_snapshot_rank{torch.distributed.get_rank()}_step{training.step}.pickle\"\n)\n",
        );
        let files = PerTarget::from_fn(|t| match t {
            Target::Execution => Some(&execution),
            Target::PretrainLm => Some(&pretrain),
            _ => None,
        });
        assert_eq!(v.read_back("RANKS", &files).as_deref(), Some("{3, 14}"));
        assert_eq!(
            v.read_back("DETAIL_LAYERS", &files).as_deref(),
            Some("(5, 6)")
        );
        assert_eq!(
            v.read_back("SNAPSHOT_DIR", &files).as_deref(),
            Some("/scratch/s")
        );
        assert_eq!(v.read_back_in("RANKS", Target::PretrainLm, &pretrain), None);
    }

    #[test]
    fn a_rank_set_ruff_wrapped_over_lines_reads_back_from_the_syntax_tree() {
        let v = Vocabulary::get();
        let wrapped = parsed(
            "_layer_mem_ranks = {\n    0,\n    1,\n    29,\n}\ndef f(block):\n    _do_lmem = (\n        _layer_mem_profile\n        and block.idx in (\n            5,\n        )\n    )\n",
        );
        assert_eq!(
            v.read_back_in("RANKS", Target::Execution, &wrapped)
                .as_deref(),
            Some("{0, 1, 29}")
        );
        assert_eq!(
            v.read_back_in("DETAIL_LAYERS", Target::Execution, &wrapped)
                .as_deref(),
            Some("(5,)")
        );
        // A set of something else than integers is not a rank set.
        let names = parsed("_layer_mem_ranks = {a, b}\n");
        assert_eq!(v.read_back_in("RANKS", Target::Execution, &names), None);
    }
}
