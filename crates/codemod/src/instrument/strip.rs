//! `remove`'s core: takes out of one file everything `add` put in, including the skill's
//! refactors (the moved `set_device`, the split returns, the saved-tensor wrappers, the `try`
//! around `model.step`), and keeps every line the user wrote.
//!
//! It needs nothing but the file. Instrumentation is recognised by what it is, as the
//! [`Vocabulary`] read off the templates says: helper definitions, statements that bind or test
//! the instrumentation's own names, rank-guarded prints, inserted imports and comments. The
//! removal is planned as [`FileEdits`], the same edits `add` makes, and undone with the inverse
//! [`actions`]. The candidate original is then *verified* by the caller: adding the same
//! instrumentation to it must give back the current text exactly, else the file is left alone
//! (the user edited inside inserted code).

use ruff_python_ast::{ExceptHandler, Expr, Stmt, StmtFunctionDef, StmtTry};
use ruff_text_size::Ranged;

use super::vocabulary::{Vocabulary, Weak};
use crate::error::Result;
use memprints_python::edit::format::FormatSettings;
use memprints_python::edit::{FileEdits, actions};
use memprints_python::{PySource, find};

/// Strips the instrumentation out of `src`, returning the candidate original text.
pub fn strip(src: &PySource, settings: &FormatSettings) -> Result<String> {
    let mut stripper = Stripper {
        edits: FileEdits::new(src, settings),
        words: Vocabulary::get(),
        moved: None,
    };
    stripper.body(&src.module.body, true)?;
    stripper.comments()?;
    stripper.optional_imports();
    Ok(stripper.edits.apply()?)
}

struct Stripper<'s> {
    edits: FileEdits<'s>,
    words: &'static Vocabulary,
    /// The text of a statement found where a moved statement goes, to put back at its marker.
    moved: Option<String>,
}

impl<'s> Stripper<'s> {
    fn src(&self) -> &'s PySource {
        self.edits.src()
    }

    fn body(&mut self, body: &[Stmt], module_level: bool) -> Result<()> {
        for stmt in body {
            self.stmt(stmt, module_level)?;
        }
        // Plain statements (`torch.cuda.synchronize()`) are ours only next to other inserted
        // code, on the side where a template has it.
        for (i, stmt) in body.iter().enumerate() {
            let deleted = |j: Option<&Stmt>| j.is_some_and(|s| self.edits.deletes(s));
            if let Some(weak) = self.weak(stmt)
                && ((weak.follows_ours && deleted(i.checked_sub(1).map(|j| &body[j])))
                    || (weak.precedes_ours && deleted(body.get(i + 1))))
            {
                self.edits.delete_lines(stmt);
            }
        }
        self.split_returns(body)
    }

    /// The weak statement `stmt` is, if it is one.
    fn weak(&self, stmt: &Stmt) -> Option<&'static Weak> {
        if !find::is_simple(stmt) {
            return None;
        }
        let text = self.src().slice(stmt);
        self.words.weak.iter().find(|w| w.text == text)
    }

    fn stmt(&mut self, stmt: &Stmt, module_level: bool) -> Result<()> {
        let words = self.words;
        if find::is_simple(stmt) && self.is_moved_statement(stmt) {
            self.moved = Some(self.src().statement_text(stmt, None));
            self.edits.delete_lines(stmt);
            return Ok(());
        }
        match stmt {
            Stmt::FunctionDef(def) if module_level && self.is_helper(def.name.as_str()) => {
                self.edits.delete_lines(stmt)
            }
            Stmt::ClassDef(class) if module_level && self.is_helper(class.name.as_str()) => {
                self.edits.delete_lines(stmt)
            }
            Stmt::FunctionDef(def) => {
                self.parameters(def)?;
                self.body(&def.body, false)?;
            }
            Stmt::ClassDef(class) => self.body(&class.body, false)?,
            Stmt::Assign(assign) => {
                let names = find::assigned_names(stmt);
                let ours = !names.is_empty()
                    && names.len() == count_targets(&assign.targets)
                    && names.iter().all(|n| self.is_bound(n))
                    && names != ["_"];
                let attribute = assign.targets.iter().any(|t| {
                    words
                        .bound_attributes
                        .iter()
                        .any(|a| a == self.src().slice(t))
                });
                if ours || attribute {
                    self.edits.delete_lines(stmt);
                } else {
                    self.keywords(stmt)?;
                }
            }
            Stmt::AnnAssign(_)
                if find::assigned_names(stmt)
                    .first()
                    .is_some_and(|n| self.is_bound(n)) =>
            {
                self.edits.delete_lines(stmt)
            }
            Stmt::Expr(expr) if matches!(&*expr.value, Expr::Call(c) if find::callee_name(c).is_some_and(|n| self.is_helper(n))) => {
                self.edits.delete_lines(stmt)
            }
            Stmt::ImportFrom(import) if self.is_inserted_import(import) => {
                self.edits.delete_lines(stmt)
            }
            Stmt::If(if_stmt) => {
                let flagged = words
                    .flags
                    .iter()
                    .any(|f| find::mentions_name(&if_stmt.test, f));
                let wrapper = words
                    .if_else_tests
                    .iter()
                    .any(|t| t == self.src().slice(&*if_stmt.test))
                    && if_stmt.elif_else_clauses.len() == 1
                    && if_stmt.elif_else_clauses[0].test.is_none();
                if flagged && wrapper {
                    actions::unwrap_if_else(&mut self.edits, if_stmt)?;
                } else if flagged || self.is_guarded_print(stmt) {
                    self.edits.delete_lines(stmt);
                } else {
                    for child in find::child_bodies(stmt) {
                        self.body(child, false)?;
                    }
                }
            }
            Stmt::Try(try_stmt) if self.is_try_wrapper(try_stmt) => {
                actions::unwrap_try(&mut self.edits, try_stmt)?;
            }
            _ => {
                if find::is_simple(stmt) {
                    self.keywords(stmt)?;
                }
                for child in find::child_bodies(stmt) {
                    self.body(child, false)?;
                }
            }
        }
        Ok(())
    }

    fn is_helper(&self, name: &str) -> bool {
        self.words.helpers.iter().any(|h| h == name)
    }

    fn is_bound(&self, name: &str) -> bool {
        self.words.bound.iter().any(|b| b == name)
    }

    /// A statement right below the comment that says where a moved statement went, unless it
    /// is the plain code that follows that comment when nothing was moved.
    fn is_moved_statement(&self, stmt: &Stmt) -> bool {
        let src = self.src();
        let start = src.line_start(stmt.start().to_usize());
        start > 0
            && self.weak(stmt).is_none()
            && find::assigned_names(stmt).iter().all(|n| !self.is_bound(n))
            && self
                .words
                .moved_comments
                .iter()
                .any(|c| c == src.line_text(start - 1).trim())
    }

    /// `from M import _a, _b` with every name one the templates import from `M`.
    fn is_inserted_import(&self, import: &ruff_python_ast::StmtImportFrom) -> bool {
        let module = import.module.as_ref().map_or("", |m| m.as_str());
        self.words.imports.iter().any(|(m, names)| {
            m == module
                && import
                    .names
                    .iter()
                    .all(|a| a.asname.is_none() && names.iter().any(|n| n == a.name.as_str()))
        })
    }

    /// `if <rank> in {...}: print("[rank=...] init_process_group | ...")` and its kin.
    fn is_guarded_print(&self, stmt: &Stmt) -> bool {
        let Stmt::If(if_stmt) = stmt else {
            return false;
        };
        let guard = matches!(&*if_stmt.test, Expr::Compare(c)
            if c.ops.as_ref() == [ruff_python_ast::CmpOp::In] && matches!(c.comparators[0], Expr::Set(_)));
        let text = self.src().slice(stmt);
        guard && self.words.guarded_labels.iter().any(|l| text.contains(l))
    }

    fn is_try_wrapper(&self, try_stmt: &StmtTry) -> bool {
        let src = self.src();
        let [ExceptHandler::ExceptHandler(handler)] = try_stmt.handlers.as_slice() else {
            return false;
        };
        try_stmt.orelse.is_empty()
            && try_stmt.finalbody.is_empty()
            && self.words.try_wrappers.iter().any(|w| {
                handler
                    .type_
                    .as_deref()
                    .is_some_and(|t| src.slice(t) == w.exception)
                    && handler
                        .body
                        .iter()
                        .any(|s| matches!(s, Stmt::If(i) if src.slice(&*i.test) == w.flag))
            })
    }

    /// Takes an inserted keyword argument out of the statement's calls.
    fn keywords(&mut self, stmt: &Stmt) -> Result<()> {
        for call in find::calls_in_stmt(stmt) {
            for name in &self.words.keywords {
                if actions::remove_keyword_argument(&mut self.edits, stmt, call, name)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Takes an inserted parameter out of the function's signature.
    fn parameters(&mut self, def: &StmtFunctionDef) -> Result<()> {
        for name in &self.words.parameters {
            if actions::remove_parameter(&mut self.edits, def, name)? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// `NAME = EXPR` + deleted probes + `return NAME` → `return EXPR` (and the experts'
    /// `gu = A` + `out = P(gu, ...)` + `return out` → `return P(A, ...)`).
    fn split_returns(&mut self, body: &[Stmt]) -> Result<()> {
        let kept: Vec<&Stmt> = body.iter().filter(|s| !self.edits.deletes(*s)).collect();
        let [.., assign, ret @ Stmt::Return(r)] = kept.as_slice() else {
            return Ok(());
        };
        let Some(Expr::Name(returned)) = r.value.as_deref() else {
            return Ok(());
        };
        let names = find::assigned_names(assign);
        if names.len() != 1 || names[0] != returned.id.as_str() || find::value_of(assign).is_none()
        {
            return Ok(());
        }
        let name = names[0];
        if self.words.split_names.iter().any(|n| n == name) {
            return Ok(actions::join_return(&mut self.edits, assign, ret)?);
        }
        let nested = self
            .words
            .nested_splits
            .iter()
            .find(|(_, outer)| outer == name);
        if let (Some((inner, _)), [.., gu, _, _]) = (nested, kept.as_slice())
            && find::assigned_names(gu) == [inner.as_str()]
        {
            actions::join_nested_return(&mut self.edits, gu, assign, ret)?;
        }
        Ok(())
    }

    /// Deletes inserted comment lines, and puts a moved statement back at its marker.
    fn comments(&mut self) -> Result<()> {
        let src = self.src();
        let mut offset = 0;
        for line in src.text.split_inclusive('\n') {
            let at = offset;
            offset += line.len();
            if self.edits.touches_line(at) {
                continue;
            }
            let trimmed = line.trim();
            if self.words.comments.iter().any(|c| c == trimmed) {
                self.edits.delete_line(at);
            } else if self.words.moved_markers.iter().any(|m| m == trimmed)
                && let Some(moved) = &self.moved
            {
                self.edits.replace_line_verbatim(at, moved)?;
            }
        }
        Ok(())
    }

    /// Drops an optional import (`from torch.distributed.tensor import DTensor`) when nothing
    /// the user kept uses its name.
    fn optional_imports(&mut self) {
        let src = self.src();
        for stmt in &src.module.body {
            for import in &self.words.optional_imports {
                if src.slice(stmt) != import.text {
                    continue;
                }
                let mut offset = 0;
                let mut uses = 0;
                for line in src.text.split_inclusive('\n') {
                    if !self.edits.touches_line(offset) && line.contains(&import.name) {
                        uses += 1;
                    }
                    offset += line.len();
                }
                if uses == 1 {
                    self.edits.delete_lines(stmt);
                }
            }
        }
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
