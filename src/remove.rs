//! `remove`: takes out of a file everything `add` put in, including the skill's refactors (the
//! moved `set_device`, the split returns, the saved-tensor wrappers, the `try` around
//! `model.step`), and keeps every line the user wrote.
//!
//! It needs nothing but the tree. Instrumentation is recognised by what it is: the helper
//! definitions, statements that bind or test the instrumentation's own names (`_profiling`,
//! `_do`, `_mem_snapshot`, ...), the probes' prints, and the marker comments. The candidate
//! original is then *verified* by the caller: adding the same instrumentation to it must give back
//! the current text exactly, else the file is left alone (the user edited inside inserted code).

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use crate::edit::format::FormatSettings;
use crate::python::{PySource, find};

/// Names that only the instrumentation binds; a statement binding only these is inserted code.
const BOUND: &[&str] = &[
    "_layer_mem_profile",
    "_layer_mem_ranks",
    "_profiling",
    "_m0",
    "_m1",
    "_m2",
    "_m3",
    "_m4",
    "_m8",
    "_ms3",
    "_do",
    "_do_lmem",
    "_do_saved",
    "_wt_ptrs",
    "_free0",
    "_total",
    "_non_pt0",
    "_free1",
    "_non_pt1",
    "_free_before",
    "_non_pt_before",
    "_free_after",
    "_non_pt_after",
    "_mem_first_step",
    "_mem_profile",
    "_mem_snapshot",
    "_mem_history",
    "_",
];
/// Flags whose `if` blocks are inserted code.
const FLAGS: &[&str] = &[
    "_profiling",
    "_do",
    "_do_lmem",
    "_do_saved",
    "_do_mem",
    "_layer_mem_profile",
    "_mem_profile",
    "_mem_snapshot",
    "_mem_history",
];
/// Helper definitions of group 1.
const HELPERS: &[&str] = &[
    "_mem_gb",
    "_mem_detail",
    "_setup_mem",
    "_lmem",
    "_SavedTensorsProfiler",
];
/// Print labels of the rank-guarded blocks of groups 2 and 6.
const GUARDED_PRINTS: &[&str] = &[
    "init_process_group | ",
    "init_device_mesh | ",
    "load_ckpt | ",
];
/// Comment lines that are part of inserted blocks.
pub const COMMENTS: &[&str] = &[
    "# -- Per-layer activation profiling --",
    "# Probe: isolate CUDA context cost from NCCL communicator init",
    "# memprints: the first step this process trains (0, or the first after a resume) is profiled.",
];
/// The comment left where `set_device` was.
pub const MOVED_SET_DEVICE: &str = "# memprints: set_device moved above init_process_group";
/// Variables that `add` introduces when it splits a `return <expr>`.
const SPLIT_NAMES: &[&str] = &["outs", "embeds", "logits"];

#[derive(Clone, Debug, PartialEq)]
enum Line {
    Keep,
    Delete,
    /// Replaced, together with the following `Covered` lines, by this text (whole lines).
    Replace(String),
    Covered,
}

/// Strips the instrumentation out of `src`, returning the candidate original text.
pub fn strip(src: &PySource, settings: &FormatSettings) -> String {
    let mut plan = Stripper {
        src,
        settings,
        lines: line_starts(&src.text),
        state: Vec::new(),
        moved_set_device: None,
    };
    plan.state = vec![Line::Keep; plan.lines.len()];
    plan.body(&src.module.body, true);
    plan.comments();
    plan.unused_dtensor_import();
    plan.render()
}

struct Stripper<'a> {
    src: &'a PySource,
    settings: &'a FormatSettings,
    /// Start offset of every line.
    lines: Vec<usize>,
    state: Vec<Line>,
    moved_set_device: Option<String>,
}

fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(
        text.match_indices('\n')
            .map(|(i, _)| i + 1)
            .filter(|&i| i < text.len()),
    );
    starts
}

impl Stripper<'_> {
    fn line_of(&self, offset: usize) -> usize {
        self.lines.partition_point(|&start| start <= offset) - 1
    }

    fn stmt_lines(&self, node: &impl Ranged) -> (usize, usize) {
        let (start, end) = self.src.full_lines(node);
        (self.line_of(start), self.line_of(end.saturating_sub(1)))
    }

    fn delete(&mut self, node: &impl Ranged) {
        let (first, last) = self.stmt_lines(node);
        for line in first..=last {
            self.state[line] = Line::Delete;
        }
    }

    fn is_deleted(&self, node: &impl Ranged) -> bool {
        let (first, _) = self.stmt_lines(node);
        self.state[first] == Line::Delete
    }

    fn replace(&mut self, node: &impl Ranged, text: String) {
        let (first, last) = self.stmt_lines(node);
        self.replace_lines(first, last, text);
    }

    fn replace_lines(&mut self, first: usize, last: usize, text: String) {
        self.state[first] = Line::Replace(text);
        for line in first + 1..=last {
            self.state[line] = Line::Covered;
        }
    }

    /// Formats `text` (statements at column 0) for the indentation of `node`, unless it sits
    /// below `# fmt: off`; then indents it.
    fn shape(&self, node: &impl Ranged, text: &str) -> String {
        let start = node.start().to_usize();
        let indent = self.src.indent_at(start);
        let text = if self.src.in_fmt_off(start) {
            text.to_string()
        } else {
            self.settings
                .format_snippet(text, indent.len())
                .unwrap_or_else(|_| text.to_string())
        };
        let mut out = crate::template::indent(&text, indent);
        out.push('\n');
        out
    }

    fn text_of(&self, node: &impl Ranged) -> String {
        self.src.statement_text(node, None)
    }

    fn body(&mut self, body: &[Stmt], module_level: bool) {
        for (i, stmt) in body.iter().enumerate() {
            self.stmt(stmt, module_level, body.get(i + 1));
        }
        // Statements that are ours only next to other inserted code.
        for (i, stmt) in body.iter().enumerate() {
            let weak = match stmt {
                Stmt::Assign(_) => self.src.slice(stmt) == "G = 1024**3",
                Stmt::Expr(e) => self.src.slice(&*e.value) == "torch.cuda.synchronize()",
                _ => false,
            };
            let neighbour_deleted = |j: Option<&Stmt>| j.is_some_and(|s| self.is_deleted(s));
            if weak
                && (neighbour_deleted(i.checked_sub(1).map(|j| &body[j]))
                    || neighbour_deleted(body.get(i + 1)))
            {
                self.delete(stmt);
            }
        }
        self.split_returns(body);
    }

    fn stmt(&mut self, stmt: &Stmt, module_level: bool, next: Option<&Stmt>) {
        match stmt {
            Stmt::FunctionDef(def) if module_level && HELPERS.contains(&def.name.as_str()) => {
                self.delete(stmt)
            }
            Stmt::ClassDef(class) if module_level && HELPERS.contains(&class.name.as_str()) => {
                self.delete(stmt)
            }
            Stmt::FunctionDef(def) => {
                self.parameter(def);
                self.body(&def.body, false);
            }
            Stmt::ClassDef(class) => self.body(&class.body, false),
            Stmt::Assign(assign) => {
                let names = find::assigned_names(stmt);
                let ours = !names.is_empty()
                    && names.len() == count_targets(&assign.targets)
                    && names.iter().all(|n| BOUND.contains(n))
                    && names != ["_"];
                let flag_attr = assign
                    .targets
                    .iter()
                    .any(|t| self.src.slice(t) == "self.memory_profiling");
                let rank_for_print = self.src.slice(stmt) == "rank = torch.distributed.get_rank()"
                    && next.is_some_and(|n| self.guarded_print(n));
                if ours || flag_attr || rank_for_print {
                    self.delete(stmt);
                } else {
                    self.keyword(stmt);
                }
            }
            Stmt::AnnAssign(_)
                if find::assigned_names(stmt)
                    .first()
                    .is_some_and(|n| BOUND.contains(n)) =>
            {
                self.delete(stmt)
            }
            Stmt::Expr(expr) if matches!(&*expr.value, Expr::Call(c) if find::callee_name(c) == Some("_setup_mem")) => {
                self.delete(stmt)
            }
            Stmt::Expr(expr) if matches!(&*expr.value, Expr::Call(c) if find::callee_name(c) == Some("set_device")) =>
            {
                let (first, _) = self.stmt_lines(stmt);
                let after_probe_comment = first > 0
                    && self.src.text[self.lines[first - 1]..self.lines[first]].trim()
                        == COMMENTS[1];
                if after_probe_comment {
                    self.moved_set_device = Some(self.text_of(stmt));
                    self.delete(stmt);
                }
            }
            Stmt::ImportFrom(import)
                if import
                    .module
                    .as_ref()
                    .is_some_and(|m| m.as_str() == "pithtrain.dualpipe.execution")
                    && import
                        .names
                        .iter()
                        .all(|a| matches!(a.name.as_str(), "_lmem" | "_layer_mem_profile")) =>
            {
                self.delete(stmt)
            }
            Stmt::If(if_stmt) => {
                let flagged = FLAGS.iter().any(|f| find::mentions_name(&if_stmt.test, f));
                if flagged
                    && self.src.slice(&*if_stmt.test) == "_do_saved"
                    && if_stmt.elif_else_clauses.len() == 1
                {
                    let else_body = &if_stmt.elif_else_clauses[0].body;
                    let (first, _) = self.stmt_lines(&else_body[0]);
                    let (_, last) = self.stmt_lines(else_body.last().expect("else has a body"));
                    let inner = self.src.text[self.lines[first]..self.line_end(last)].to_string();
                    let indent = self.src.indent_at(if_stmt.start().to_usize()).to_string();
                    let width =
                        self.src.indent_at(else_body[0].start().to_usize()).len() - indent.len();
                    let text = crate::template::indent(
                        &crate::template::dedent(&inner, width + indent.len()),
                        &indent,
                    );
                    self.replace(stmt, text);
                } else if flagged || self.guarded_print(stmt) {
                    self.delete(stmt);
                } else {
                    for child in find::child_bodies(stmt) {
                        self.body(child, false);
                    }
                }
            }
            Stmt::Try(try_stmt) if self.is_oom_wrapper(try_stmt) => {
                let (first, _) = self.stmt_lines(&try_stmt.body[0]);
                let (_, last) = self.stmt_lines(try_stmt.body.last().expect("try has a body"));
                let inner = self.src.text[self.lines[first]..self.line_end(last)].to_string();
                let width = self
                    .src
                    .indent_at(try_stmt.body[0].start().to_usize())
                    .len();
                let text = crate::template::dedent(inner.trim_end_matches('\n'), width);
                let shaped = self.shape(stmt, &text);
                self.replace(stmt, shaped);
            }
            _ => {
                if find::is_simple(stmt) {
                    self.keyword(stmt);
                }
                for child in find::child_bodies(stmt) {
                    self.body(child, false);
                }
            }
        }
    }

    fn line_end(&self, line: usize) -> usize {
        self.lines
            .get(line + 1)
            .copied()
            .unwrap_or(self.src.text.len())
    }

    /// `if <rank> in {...}: print("... init_process_group | ...")` and its kin.
    fn guarded_print(&self, stmt: &Stmt) -> bool {
        let Stmt::If(if_stmt) = stmt else {
            return false;
        };
        matches!(&*if_stmt.test, Expr::Compare(_))
            && self.src.slice(&*if_stmt.test).contains(" in {")
            && GUARDED_PRINTS
                .iter()
                .any(|p| self.src.slice(stmt).contains(p))
    }

    fn is_oom_wrapper(&self, try_stmt: &ruff_python_ast::StmtTry) -> bool {
        try_stmt.handlers.len() == 1
            && try_stmt.orelse.is_empty()
            && try_stmt.finalbody.is_empty()
            && {
                let ruff_python_ast::ExceptHandler::ExceptHandler(h) = &try_stmt.handlers[0];
                h.type_
                    .as_deref()
                    .is_some_and(|t| self.src.slice(t) == "torch.OutOfMemoryError")
                    && h.body.iter().any(
                        |s| matches!(s, Stmt::If(i) if self.src.slice(&*i.test) == "_mem_snapshot"),
                    )
            }
    }

    /// Removes a `_do_mem=_do` keyword from the statement's calls.
    fn keyword(&mut self, stmt: &Stmt) {
        for call in find::calls_in_stmt(stmt) {
            let Some(keyword) = call
                .arguments
                .keywords
                .iter()
                .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == "_do_mem"))
            else {
                continue;
            };
            let previous_end = call
                .arguments
                .args
                .iter()
                .map(|a| a.end())
                .chain(
                    call.arguments
                        .keywords
                        .iter()
                        .filter(|k| k.start() < keyword.start())
                        .map(|k| k.end()),
                )
                .max();
            let (cut_start, cut_end) = match previous_end {
                Some(end) => (end.to_usize(), keyword.end().to_usize()),
                None => (keyword.start().to_usize(), keyword.end().to_usize()),
            };
            let dedented = self
                .src
                .statement_text(stmt, Some((cut_start, cut_end, "")));
            let shaped = self.shape(stmt, &dedented);
            self.replace(stmt, shaped);
            return;
        }
    }

    /// Removes the `_do_mem` parameter: a positional one with the comma before it (its own
    /// trailing comma stays as the previous parameter's), a keyword-only one with the `*` and
    /// every comma after the last positional parameter; then re-formats the header.
    fn parameter(&mut self, def: &ruff_python_ast::StmtFunctionDef) {
        let params = &def.parameters;
        let is_do_mem =
            |p: &&ruff_python_ast::ParameterWithDefault| p.parameter.name.as_str() == "_do_mem";
        let (cut_start, cut_end) =
            if let Some(index) = params.args.iter().position(|p| is_do_mem(&p)) {
                let start = if index == 0 {
                    params.args[0].start()
                } else {
                    params.args[index - 1].end()
                };
                (start.to_usize(), params.args[index].end().to_usize())
            } else if let (Some(ours), true) = (
                params.kwonlyargs.iter().find(is_do_mem),
                params.kwonlyargs.len() == 1,
            ) {
                let Some(last) = params.args.last() else {
                    return;
                };
                let after = &self.src.text[ours.end().to_usize()..params.end().to_usize()];
                let trailing = after
                    .find(',')
                    .filter(|&i| after[..i].trim().is_empty())
                    .map_or(0, |i| i + 1);
                (last.end().to_usize(), ours.end().to_usize() + trailing)
            } else {
                return;
            };
        let header_start = self.src.line_start(def.start().to_usize());
        let body_start = self.src.line_start(def.body[0].start().to_usize());
        let header = format!(
            "{}{}",
            &self.src.text[header_start..cut_start],
            &self.src.text[cut_end..body_start]
        );
        let indent = self.src.indent_at(def.start().to_usize()).len();
        let text = crate::instrument::model::reformat_header(self.settings, &header, indent)
            .unwrap_or(header);
        let first = self.line_of(header_start);
        let last = self.line_of(body_start - 1);
        self.replace_lines(first, last, text);
    }

    /// `NAME = EXPR` + deleted probes + `return NAME` → `return EXPR` (and the experts'
    /// `gu = A` + `out = P(gu, ...)` + `return out` → `return P(A, ...)`).
    fn split_returns(&mut self, body: &[Stmt]) {
        let kept: Vec<&Stmt> = body.iter().filter(|s| !self.is_deleted(*s)).collect();
        let [.., assign, ret @ Stmt::Return(r)] = kept.as_slice() else {
            return;
        };
        let Some(Expr::Name(returned)) = r.value.as_deref() else {
            return;
        };
        let names = find::assigned_names(assign);
        let Some(value) = find::value_of(assign) else {
            return;
        };
        if names.len() != 1 || names[0] != returned.id.as_str() {
            return;
        }
        let name = names[0];
        if SPLIT_NAMES.contains(&name) {
            let text = format!("return {}", self.src.slice(value));
            let shaped = self.shape(*ret, &text);
            self.delete(*assign);
            self.replace(*ret, shaped);
        } else if name == "out" && kept.len() >= 3 {
            let gu = kept[kept.len() - 3];
            let (Some(gu_value), ["gu"]) =
                (find::value_of(gu), find::assigned_names(gu).as_slice())
            else {
                return;
            };
            let Expr::Call(call) = value else { return };
            let Some(first @ Expr::Name(arg)) = call.arguments.args.first() else {
                return;
            };
            if arg.id.as_str() != "gu" {
                return;
            }
            let offset = value.start().to_usize();
            let outer = self.src.slice(value);
            let (a, b) = (
                first.start().to_usize() - offset,
                first.end().to_usize() - offset,
            );
            let text = format!(
                "return {}{}{}",
                &outer[..a],
                self.src.slice(gu_value),
                &outer[b..]
            );
            let shaped = self.shape(*ret, &text);
            self.delete(gu);
            self.delete(*assign);
            self.replace(*ret, shaped);
        }
    }

    fn comments(&mut self) {
        for line in 0..self.lines.len() {
            if self.state[line] != Line::Keep {
                continue;
            }
            let text = &self.src.text[self.lines[line]..self.line_end(line)];
            let trimmed = text.trim();
            if COMMENTS.contains(&trimmed) {
                self.state[line] = Line::Delete;
            } else if trimmed == MOVED_SET_DEVICE
                && let Some(moved) = &self.moved_set_device
            {
                let indent = &text[..text.len() - text.trim_start().len()];
                self.state[line] =
                    Line::Replace(format!("{}\n", crate::template::indent(moved, indent)));
            }
        }
    }

    /// Drops `from torch.distributed.tensor import DTensor` when nothing else uses `DTensor`.
    fn unused_dtensor_import(&mut self) {
        for stmt in &self.src.module.body {
            if self.src.slice(stmt) != "from torch.distributed.tensor import DTensor" {
                continue;
            }
            let uses = self
                .lines
                .iter()
                .enumerate()
                .filter(|(i, _)| self.state[*i] == Line::Keep)
                .filter(|(i, _)| {
                    self.src.text[self.lines[*i]..self.line_end(*i)].contains("DTensor")
                })
                .count();
            if uses == 1 {
                self.delete(stmt);
            }
        }
    }

    fn render(&self) -> String {
        let n = self.lines.len();
        let blank = |i: usize| {
            self.state[i] == Line::Keep
                && self.src.text[self.lines[i]..self.line_end(i)]
                    .trim()
                    .is_empty()
        };
        let mut state = self.state.clone();
        // Blank lines between deleted lines belong to the deleted run.
        let mut i = 0;
        while i < n {
            if state[i] != Line::Delete {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < n && (state[j] == Line::Delete || blank(j)) {
                j += 1;
            }
            // Now i..j is deleted lines and blanks; trim trailing blanks that precede kept code.
            let mut end = j;
            while end > i && blank(end - 1) {
                end -= 1;
            }
            for line in state.iter_mut().take(end).skip(i) {
                *line = Line::Delete;
            }
            let opens = i == 0 || blank(i - 1) || {
                let previous = self.src.text[self.lines[i - 1]..self.line_end(i - 1)].trim_end();
                previous.ends_with(':') && !previous.trim_start().starts_with('#')
            };
            if opens {
                for line in state.iter_mut().take(j).skip(end) {
                    *line = Line::Delete;
                }
            }
            i = j.max(i + 1);
        }
        let mut out = String::with_capacity(self.src.text.len());
        let nl = self.src.newline();
        for (line, s) in state.iter().enumerate() {
            match s {
                Line::Keep => out.push_str(&self.src.text[self.lines[line]..self.line_end(line)]),
                Line::Replace(text) => out.push_str(&if nl == "\n" {
                    text.clone()
                } else {
                    text.replace('\n', nl)
                }),
                Line::Delete | Line::Covered => {}
            }
        }
        out
    }
}

fn count_targets(targets: &[Expr]) -> usize {
    targets
        .iter()
        .map(|t| match t {
            Expr::Tuple(tuple) => tuple.elts.len(),
            _ => 1,
        })
        .sum()
}
