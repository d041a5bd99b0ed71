//! Queries over Ruff's AST that the instrumentation groups use to find their anchors: functions,
//! classes and methods by name, statements by what they call or assign, comments by text.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt, StmtClassDef, StmtFunctionDef};
use ruff_text_size::Ranged;

/// The top-level function `name` in `body`.
pub fn function<'a>(body: &'a [Stmt], name: &str) -> Option<&'a StmtFunctionDef> {
    body.iter().find_map(|stmt| match stmt {
        Stmt::FunctionDef(def) if def.name.as_str() == name => Some(def),
        _ => None,
    })
}

/// Every class defined at the top of `body`.
pub fn classes(body: &[Stmt]) -> impl Iterator<Item = &StmtClassDef> {
    body.iter().filter_map(|stmt| match stmt {
        Stmt::ClassDef(class) => Some(class),
        _ => None,
    })
}

/// The top-level class `name` in `body`.
pub fn class<'a>(body: &'a [Stmt], name: &str) -> Option<&'a StmtClassDef> {
    classes(body).find(|class| class.name.as_str() == name)
}

/// The method `name` of `class`.
pub fn method<'a>(class: &'a StmtClassDef, name: &str) -> Option<&'a StmtFunctionDef> {
    function(&class.body, name)
}

/// True when the function carries a `@torch.compile` or `@torch.compile(...)` decorator.
pub fn is_compiled(def: &StmtFunctionDef) -> bool {
    def.decorator_list.iter().any(|decorator| {
        let expr = match &decorator.expression {
            Expr::Call(call) => &*call.func,
            other => other,
        };
        matches!(expr, Expr::Attribute(attr) if attr.attr.as_str() == "compile")
    })
}

/// The name a call calls: `f` for `f(...)`, `m` for `a.b.m(...)`.
pub fn callee_name(call: &ExprCall) -> Option<&str> {
    match &*call.func {
        Expr::Name(name) => Some(name.id.as_str()),
        Expr::Attribute(attr) => Some(attr.attr.as_str()),
        _ => None,
    }
}

/// Collects every call a visited node contains, outermost first.
#[derive(Default)]
struct Calls<'a>(Vec<&'a ExprCall>);

impl<'a> Visitor<'a> for Calls<'a> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(call) = expr {
            self.0.push(call);
        }
        visitor::walk_expr(self, expr);
    }
}

/// Every call inside `stmt` (its nested bodies included), outermost first.
pub fn calls_in_stmt(stmt: &Stmt) -> Vec<&ExprCall> {
    let mut calls = Calls::default();
    calls.visit_stmt(stmt);
    calls.0
}

/// Every call inside `expr`, outermost first.
pub fn calls_in_expr(expr: &Expr) -> Vec<&ExprCall> {
    let mut calls = Calls::default();
    calls.visit_expr(expr);
    calls.0
}

/// True for statements without a body of their own (assignments, expressions, returns, ...).
pub fn is_simple(stmt: &Stmt) -> bool {
    !matches!(
        stmt,
        Stmt::FunctionDef(_)
            | Stmt::ClassDef(_)
            | Stmt::If(_)
            | Stmt::For(_)
            | Stmt::While(_)
            | Stmt::With(_)
            | Stmt::Try(_)
            | Stmt::Match(_)
    )
}

/// True when the simple statement `stmt` calls something named `name`.
pub fn simple_calls(stmt: &Stmt, name: &str) -> bool {
    is_simple(stmt)
        && calls_in_stmt(stmt)
            .iter()
            .any(|call| callee_name(call) == Some(name))
}

/// The nested statement lists of a compound statement (if/elif/else, for, while, with, try).
pub fn child_bodies(stmt: &Stmt) -> Vec<&[Stmt]> {
    match stmt {
        Stmt::If(s) => {
            let mut bodies = vec![&s.body[..]];
            bodies.extend(s.elif_else_clauses.iter().map(|c| &c.body[..]));
            bodies
        }
        Stmt::For(s) => vec![&s.body[..], &s.orelse[..]],
        Stmt::While(s) => vec![&s.body[..], &s.orelse[..]],
        Stmt::With(s) => vec![&s.body[..]],
        Stmt::Try(s) => {
            let mut bodies = vec![&s.body[..]];
            for handler in &s.handlers {
                let ruff_python_ast::ExceptHandler::ExceptHandler(h) = handler;
                bodies.push(&h.body[..]);
            }
            bodies.push(&s.orelse[..]);
            bodies.push(&s.finalbody[..]);
            bodies
        }
        _ => Vec::new(),
    }
}

/// The first simple statement, searching `body` and the bodies nested in it (not nested
/// functions or classes) in source order, for which `pred` holds.
pub fn find_deep<'a>(body: &'a [Stmt], pred: &dyn Fn(&Stmt) -> bool) -> Option<&'a Stmt> {
    for stmt in body {
        if is_simple(stmt) && pred(stmt) {
            return Some(stmt);
        }
        for child in child_bodies(stmt) {
            if let Some(found) = find_deep(child, pred) {
                return Some(found);
            }
        }
    }
    None
}

/// The list of statements that directly holds `target` (by range), searching nested bodies.
pub fn enclosing_body<'a>(body: &'a [Stmt], target: &Stmt) -> Option<&'a [Stmt]> {
    if body.iter().any(|s| s.range() == target.range()) {
        return Some(body);
    }
    body.iter()
        .flat_map(child_bodies)
        .find_map(|child| enclosing_body(child, target))
}

/// Names bound by a plain assignment: `a = ...` gives `[a]`, `a, b = ...` gives `[a, b]`.
pub fn assigned_names(stmt: &Stmt) -> Vec<&str> {
    let targets: Vec<&Expr> = match stmt {
        Stmt::Assign(assign) => assign.targets.iter().collect(),
        Stmt::AnnAssign(assign) => vec![&*assign.target],
        _ => return Vec::new(),
    };
    let mut names = Vec::new();
    for target in targets {
        match target {
            Expr::Name(name) => names.push(name.id.as_str()),
            Expr::Tuple(tuple) => names.extend(tuple.elts.iter().filter_map(|e| match e {
                Expr::Name(name) => Some(name.id.as_str()),
                _ => None,
            })),
            _ => {}
        }
    }
    names
}

/// The value of an assignment or a return statement.
pub fn value_of(stmt: &Stmt) -> Option<&Expr> {
    match stmt {
        Stmt::Assign(assign) => Some(&assign.value),
        Stmt::AnnAssign(assign) => assign.value.as_deref(),
        Stmt::Return(ret) => ret.value.as_deref(),
        Stmt::Expr(expr) => Some(&expr.value),
        _ => None,
    }
}

/// The body of a function without its docstring.
pub fn body_after_docstring(def: &StmtFunctionDef) -> &[Stmt] {
    match def.body.first() {
        Some(Stmt::Expr(expr)) if matches!(&*expr.value, Expr::StringLiteral(_)) => &def.body[1..],
        _ => &def.body,
    }
}

/// True when `expr` mentions the plain name `name` anywhere.
pub fn mentions_name(expr: &Expr, name: &str) -> bool {
    names_in_expr(expr).contains(&name)
}

/// Every plain name that `stmt` reads or binds (nested bodies included), in source order.
pub fn names_in_stmt(stmt: &Stmt) -> Vec<&str> {
    let mut names = Names::default();
    names.visit_stmt(stmt);
    names.0
}

/// Every plain name in `expr`, in source order.
pub fn names_in_expr(expr: &Expr) -> Vec<&str> {
    let mut names = Names::default();
    names.visit_expr(expr);
    names.0
}

#[derive(Default)]
struct Names<'a>(Vec<&'a str>);

impl<'a> Visitor<'a> for Names<'a> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Name(name) = expr {
            self.0.push(name.id.as_str());
        }
        visitor::walk_expr(self, expr);
    }
}
