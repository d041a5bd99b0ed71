//! Anchor look-ups shared by the instrumentation groups and the model layout: each returns the node it was asked for or an
//! [`Error::AnchorNotFound`] that names the file, the function and the anchor, and shows the lines
//! where it was expected.

use ruff_python_ast::{Expr, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;

use crate::error::Error;
use crate::{PySource, find};

/// An anchor error for `anchor` in `function`, showing the lines around `near`.
pub fn missing(src: &PySource, function: &str, anchor: &str, near: usize) -> Error {
    Error::AnchorNotFound {
        file: src.rel.clone(),
        function: function.to_string(),
        anchor: anchor.to_string(),
        context: src.context(near, 3, 6),
    }
}

/// `Class.method` for a method, `function` for a top-level function.
pub fn qualified(src: &PySource, def: &StmtFunctionDef) -> String {
    find::classes(&src.module.body)
        .find(|class| class.body.iter().any(|s| s.range() == def.range))
        .map_or_else(
            || def.name.to_string(),
            |class| format!("{}.{}", class.name, def.name),
        )
}

/// The top-level function `name`.
pub fn function<'a>(src: &'a PySource, name: &str) -> Result<&'a StmtFunctionDef, Error> {
    find::function(&src.module.body, name)
        .ok_or_else(|| missing(src, "<module>", &format!("function `def {name}(...)`"), 0))
}

/// The first simple statement in `def` (nested blocks included) that calls `callee`.
pub fn call_stmt<'a>(
    src: &PySource,
    def: &'a StmtFunctionDef,
    callee: &str,
) -> Result<&'a Stmt, Error> {
    find::find_deep(&def.body, &|stmt| find::simple_calls(stmt, callee)).ok_or_else(|| {
        missing(
            src,
            &qualified(src, def),
            &format!("a call to `{callee}(...)`"),
            def.start().to_usize(),
        )
    })
}

/// The statement of `body` that assigns `name` (a plain name or a dotted target's last part).
pub fn assignment<'a>(
    src: &PySource,
    def: &'a StmtFunctionDef,
    target_suffix: &str,
) -> Result<&'a Stmt, Error> {
    find::find_deep(&def.body, &|stmt| match stmt {
        Stmt::Assign(assign) => assign
            .targets
            .iter()
            .any(|t| src.slice(t).ends_with(target_suffix)),
        _ => false,
    })
    .ok_or_else(|| {
        missing(
            src,
            &qualified(src, def),
            &format!("the assignment `{target_suffix} = ...`"),
            def.start().to_usize(),
        )
    })
}

/// The top-level `for ... in range(<var>):` loop of `def`.
pub fn range_loop<'a>(
    src: &PySource,
    def: &'a StmtFunctionDef,
    var: &str,
) -> Result<&'a Stmt, Error> {
    def.body
        .iter()
        .find(|stmt| match stmt {
            Stmt::For(for_stmt) => match &*for_stmt.iter {
                Expr::Call(call) => {
                    find::callee_name(call) == Some("range")
                        && call.arguments.args.len() == 1
                        && matches!(&call.arguments.args[0], Expr::Name(n) if n.id.as_str() == var)
                }
                _ => false,
            },
            _ => false,
        })
        .ok_or_else(|| {
            missing(
                src,
                &qualified(src, def),
                &format!("the loop `for i in range({var}):`"),
                def.start().to_usize(),
            )
        })
}

/// The body of a `for` loop.
pub fn loop_body(stmt: &Stmt) -> &[Stmt] {
    match stmt {
        Stmt::For(for_stmt) => &for_stmt.body,
        _ => &[],
    }
}

/// The `n`-th (0-based) statement of `body` that calls `callee` directly.
pub fn nth_call<'a>(
    src: &PySource,
    function: &str,
    body: &'a [Stmt],
    callee: &str,
    n: usize,
    near: usize,
) -> Result<&'a Stmt, Error> {
    body.iter()
        .filter(|stmt| find::simple_calls(stmt, callee))
        .nth(n)
        .ok_or_else(|| {
            missing(
                src,
                function,
                &format!("call #{} to `{callee}(...)` in the loop", n + 1),
                near,
            )
        })
}

/// Offset of the first line, inside `def`, whose text starts with `comment` (e.g. `# Stage 1.`).
pub fn comment_line(src: &PySource, def: &StmtFunctionDef, comment: &str) -> Result<usize, Error> {
    let (start, end) = src.full_lines(def);
    let mut offset = start;
    for line in src.text[start..end].split_inclusive('\n') {
        if line.trim_start().starts_with(comment) {
            return Ok(offset);
        }
        offset += line.len();
    }
    Err(missing(
        src,
        &qualified(src, def),
        &format!("the comment `{comment}`"),
        def.start().to_usize(),
    ))
}

/// Offset of the first line of the comment block directly above the line at `offset` (or
/// `offset`'s line when there is none).
pub fn leading_comments_start(src: &PySource, offset: usize) -> usize {
    let mut start = src.line_start(offset);
    while start > 0 {
        let previous = src.line_start(start - 1);
        if !src.text[previous..start].trim_start().starts_with('#') {
            break;
        }
        start = previous;
    }
    start
}

/// True when the line before the one at `offset` is empty (or there is none).
pub fn blank_line_before(src: &PySource, offset: usize) -> bool {
    let start = src.line_start(offset);
    start == 0 || src.text[src.line_start(start - 1)..start].trim().is_empty()
}
