//! The edits `add` makes beyond inserting whole blocks, each beside the edit `remove` makes to
//! undo it, so a change to one is made next to the other:
//!
//! | add                                             | remove                                |
//! |-------------------------------------------------|---------------------------------------|
//! | [`add_keyword_argument`]: `f(a)` → `f(a, k=v)`  | [`remove_keyword_argument`]           |
//! | [`add_last_parameter`]: `def f(a)` → `def f(a, *, p=x)` or a `p=x,` line | [`remove_parameter`] |
//! | [`split_return`]: `return E` → `N = E` … `return N` | [`join_return`]                   |
//! | [`split_nested_return`]: `return P(A)` → `n = A` … `m = P(n)` … `return m` | [`join_nested_return`] |
//! | [`wrap_in_try`]: `S` → `try: S except …`        | [`unwrap_try`]                        |
//! | [`wrap_in_if_else`]: `S` → `if f: … S … else: S` | [`unwrap_if_else`]                   |
//!
//! The Python they add (the keyword, the parameter, the wrapping block) comes from the caller,
//! which reads it off a template; these functions only know the syntax around it. Every edit
//! goes through [`FileEdits`], which lays the statements out.

use ruff_python_ast::{Expr, ExprCall, Stmt, StmtFunctionDef, StmtIf, StmtTry};
use ruff_text_size::Ranged;

use super::format::FormatSettings;
use super::{FileEdits, Layout};
use crate::error::{Error, Result};
use crate::find;

/// Re-places statement `stmt` with `keyword` (e.g. `_do_mem=_do`) after the last argument of
/// `call`, a call inside it. Ruff re-wraps the statement as it needs.
pub fn add_keyword_argument(
    edits: &mut FileEdits,
    stmt: &impl Ranged,
    call: &ExprCall,
    keyword: &str,
) -> Result<()> {
    let arguments = &call.arguments;
    let last_end = arguments
        .args
        .iter()
        .map(Ranged::end)
        .chain(arguments.keywords.iter().map(Ranged::end))
        .max();
    let (at, separator) = match last_end {
        Some(end) => (end.to_usize(), ", "),
        None => (arguments.start().to_usize() + 1, ""),
    };
    let text = edits
        .src()
        .statement_text(stmt, Some((at, at, &format!("{separator}{keyword}"))));
    edits.replace_lines(stmt, &text)
}

/// The inverse of [`add_keyword_argument`]: re-places `stmt` without `call`'s keyword argument
/// `name` and the comma before it. False (nothing planned) when `call` has no such keyword.
pub fn remove_keyword_argument(
    edits: &mut FileEdits,
    stmt: &impl Ranged,
    call: &ExprCall,
    name: &str,
) -> Result<bool> {
    let arguments = &call.arguments;
    let Some(keyword) = arguments
        .keywords
        .iter()
        .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == name))
    else {
        return Ok(false);
    };
    let previous_end = arguments
        .args
        .iter()
        .map(Ranged::end)
        .chain(
            arguments
                .keywords
                .iter()
                .filter(|k| k.start() < keyword.start())
                .map(Ranged::end),
        )
        .max();
    let cut_start = previous_end.unwrap_or(keyword.start()).to_usize();
    let text = edits
        .src()
        .statement_text(stmt, Some((cut_start, keyword.end().to_usize(), "")));
    edits.replace_lines(stmt, &text)?;
    Ok(true)
}

/// Adds `parameter` (a parameter's text, e.g. `_do_mem: bool = False`) after the last parameter
/// of `def`. A signature ending in a magic trailing comma gets it on a line of its
/// own, as the skill shows; one without gets it keyword-only (`, *, PARAMETER`) and its header
/// re-formatted, so that [`remove_parameter`] can tell the two apart once Ruff has re-wrapped
/// the header, and restore either to the byte.
pub fn add_last_parameter(
    edits: &mut FileEdits,
    def: &StmtFunctionDef,
    parameter: &str,
) -> Result<()> {
    let src = edits.src();
    let params = &def.parameters;
    let refuse = |takes: &'static str| Error::UnsupportedSignature {
        file: src.rel.clone(),
        function: def.name.to_string(),
        line: src.line_number(def.start().to_usize()),
        takes,
        parameter: parameter_name(parameter),
    };
    if params.vararg.is_some() || !params.kwonlyargs.is_empty() || params.kwarg.is_some() {
        return Err(refuse("*args, keyword-only or **kwargs parameters"));
    }
    let Some(last) = params.args.last() else {
        return Err(refuse("no parameters"));
    };
    let last_end = last.end().to_usize();
    if src.text[last_end..params.end().to_usize()].contains(',') {
        let line = src.full_lines(last).1;
        let text = format!("{}{parameter},\n", src.indent_at(last.start().to_usize()));
        edits.replace_span(line, line, text);
        return Ok(());
    }
    let (header_start, body_start) = header_span(edits, def);
    let header = format!(
        "{}, *, {parameter}{}",
        &src.text[header_start..last_end],
        &src.text[last_end..body_start]
    );
    set_header(edits, def, &header)
}

/// The inverse of [`add_last_parameter`]: removes parameter `name` from `def`. A positional one
/// goes with the comma before it (its own trailing comma stays as the previous parameter's); a
/// keyword-only one that is alone after the `*` goes with the `*` and every comma after the last
/// positional parameter; then the header is re-formatted. False (nothing planned) when `def`
/// has no such parameter.
pub fn remove_parameter(edits: &mut FileEdits, def: &StmtFunctionDef, name: &str) -> Result<bool> {
    let src = edits.src();
    let params = &def.parameters;
    let named = |p: &&ruff_python_ast::ParameterWithDefault| p.parameter.name.as_str() == name;
    let (cut_start, cut_end) = if let Some(index) = params.args.iter().position(|p| named(&p)) {
        let start = if index == 0 {
            params.args[0].start()
        } else {
            params.args[index - 1].end()
        };
        (start.to_usize(), params.args[index].end().to_usize())
    } else if let (Some(ours), true) = (
        params.kwonlyargs.iter().find(named),
        params.kwonlyargs.len() == 1,
    ) {
        let Some(last) = params.args.last() else {
            return Ok(false);
        };
        let after = &src.text[ours.end().to_usize()..params.end().to_usize()];
        let trailing = after
            .find(',')
            .filter(|&i| after[..i].trim().is_empty())
            .map_or(0, |i| i + 1);
        (last.end().to_usize(), ours.end().to_usize() + trailing)
    } else {
        return Ok(false);
    };
    let (header_start, body_start) = header_span(edits, def);
    let header = format!(
        "{}{}",
        &src.text[header_start..cut_start],
        &src.text[cut_end..body_start]
    );
    set_header(edits, def, &header)?;
    Ok(true)
}

/// The name of the parameter written `parameter` (`_p` for `_p: int = 0`).
fn parameter_name(parameter: &str) -> String {
    ruff_python_parser::parse_module(&format!("def _({parameter}): ..."))
        .ok()
        .and_then(|parsed| match parsed.syntax().body.first() {
            Some(Stmt::FunctionDef(def)) => def
                .parameters
                .args
                .first()
                .map(|p| p.parameter.name.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| parameter.to_string())
}

/// From the start of the `def` line to the start of the first body line.
fn header_span(edits: &FileEdits, def: &StmtFunctionDef) -> (usize, usize) {
    let src = edits.src();
    (
        src.line_start(def.start().to_usize()),
        src.line_start(def.body[0].start().to_usize()),
    )
}

/// Re-places `def`'s header by `header`, laid out as Ruff would lay it out in place.
fn set_header(edits: &mut FileEdits, def: &StmtFunctionDef, header: &str) -> Result<()> {
    let src = edits.src();
    let indent = src.indent_at(def.start().to_usize());
    let text =
        reformat_header(edits.settings(), header, indent, edits.tabs()).map_err(|message| {
            Error::Format {
                file: src.rel.clone(),
                message,
            }
        })?;
    let (start, end) = header_span(edits, def);
    edits.replace_span(start, end, text);
    Ok(())
}

/// Formats a function header (its `def` line(s), without the body) behind the indentation
/// `indent`, as Ruff would lay it out in place (nesting with tabs when `tabs`); `\n` line ends,
/// one final newline.
fn reformat_header(
    settings: &FormatSettings,
    header: &str,
    indent: &str,
    tabs: bool,
) -> Result<String, String> {
    let unit = if tabs {
        "\t".to_string()
    } else {
        " ".repeat(settings.indent_width as usize)
    };
    let snippet = format!(
        "{}{unit}pass",
        crate::text::dedent(&header.replace('\r', ""), indent)
    );
    let formatted = settings.format_snippet(&snippet, indent, tabs)?;
    let formatted = formatted
        .strip_suffix(&format!("\n{unit}pass"))
        .unwrap_or(&formatted);
    Ok(format!("{}\n", crate::text::indent(formatted, indent)))
}

/// Re-places `return EXPR` by `block(EXPR)`: e.g. `NAME = EXPR`, a probe, `return NAME`.
pub fn split_return(
    edits: &mut FileEdits,
    ret: &Stmt,
    block: impl FnOnce(&str) -> String,
) -> Result<()> {
    let value = returned(ret);
    let text = block(edits.src().slice(value));
    edits.replace_lines(ret, &text)
}

/// The inverse of [`split_return`]: `NAME = EXPR` … `return NAME` becomes `return EXPR`. The
/// statements between the two are the caller's to delete.
///
/// An assignment laid out as the repository's format settings lay it out gets `return EXPR`
/// laid out the same way, which gives back the bytes from before `add`. One the user has laid
/// out otherwise (re-wrapped by `ruff format --line-length 60`, say) keeps that layout: only
/// `NAME = ` becomes `return `, since only it and `return NAME` were inserted.
pub fn join_return(edits: &mut FileEdits, assign: &Stmt, ret: &Stmt) -> Result<()> {
    let src = edits.src();
    let value = find::value_of(assign).expect("an assignment has a value");
    let (text, layout) = if edits.is_formatted(assign) {
        (format!("return {}", src.slice(value)), Layout::Formatted)
    } else {
        let (start, value_start) = (assign.start().to_usize(), value.start().to_usize());
        // The value may sit in parentheses that are not part of its range: cut at the `=`.
        let equals = src.text[start..value_start]
            .rfind('=')
            .map_or(value_start, |i| start + i + 1);
        let kept = src.text[equals..value_start].trim_start_matches([' ', '\t']);
        let cut_end = value_start - kept.len();
        let text = src.statement_text(assign, Some((start, cut_end, "return ")));
        (text, Layout::Verbatim)
    };
    edits.delete_lines(assign);
    edits.replace_lines_laid_out(ret, &text, layout)
}

/// Re-places `return OUTER(INNER, ...)`, whose value is a call with a call as its first
/// argument, by `block(INNER, OUTER(name, ...))`: e.g. `name = INNER`, a probe, `out = OUTER(name,
/// ...)`, a probe, `return out`. False (nothing planned) when the value is not such a call.
pub fn split_nested_return(
    edits: &mut FileEdits,
    ret: &Stmt,
    name: &str,
    block: impl FnOnce(&str, &str) -> String,
) -> Result<bool> {
    let src = edits.src();
    let value = returned(ret);
    let Expr::Call(call) = value else {
        return Ok(false);
    };
    let Some(inner @ Expr::Call(_)) = call.arguments.args.first() else {
        return Ok(false);
    };
    let outer = splice(src.slice(value), value, inner, name);
    let text = block(src.slice(inner), &outer);
    edits.replace_lines(ret, &text)?;
    Ok(true)
}

/// The inverse of [`split_nested_return`]: `name = INNER` … `out = OUTER(name, ...)` …
/// `return out` becomes `return OUTER(INNER, ...)`. False (nothing planned) when `outer`'s value
/// is not a call whose first argument is the name `inner` binds.
pub fn join_nested_return(
    edits: &mut FileEdits,
    inner: &Stmt,
    outer: &Stmt,
    ret: &Stmt,
) -> Result<bool> {
    let src = edits.src();
    let names = find::assigned_names(inner);
    let (Some(inner_value), [name]) = (find::value_of(inner), names.as_slice()) else {
        return Ok(false);
    };
    let Some(value @ Expr::Call(call)) = find::value_of(outer) else {
        return Ok(false);
    };
    let Some(first @ Expr::Name(arg)) = call.arguments.args.first() else {
        return Ok(false);
    };
    if arg.id.as_str() != *name {
        return Ok(false);
    }
    let joined = splice(src.slice(value), value, first, src.slice(inner_value));
    let text = format!("return {joined}");
    edits.delete_lines(inner);
    edits.delete_lines(outer);
    edits.replace_lines(ret, &text)?;
    Ok(true)
}

/// `text` (the source of `whole`) with the part that is `part` replaced by `by`.
fn splice(text: &str, whole: &Expr, part: &Expr, by: &str) -> String {
    let offset = whole.start().to_usize();
    let (a, b) = (
        part.start().to_usize() - offset,
        part.end().to_usize() - offset,
    );
    format!("{}{by}{}", &text[..a], &text[b..])
}

fn returned(ret: &Stmt) -> &Expr {
    match ret {
        Stmt::Return(r) => r
            .value
            .as_deref()
            .expect("the caller found `return <value>`"),
        _ => panic!("the caller passes a `return` statement"),
    }
}

/// Re-places statement `stmt` by `block(STATEMENT)`, a `try:` around the statement (verbatim)
/// whose handler the caller's template writes.
pub fn wrap_in_try(
    edits: &mut FileEdits,
    stmt: &Stmt,
    block: impl FnOnce(&str) -> String,
) -> Result<()> {
    wrap(edits, stmt, block)
}

/// The inverse of [`wrap_in_try`]: the `try`'s body, back in place of the whole statement.
pub fn unwrap_try(edits: &mut FileEdits, try_stmt: &StmtTry) -> Result<()> {
    let body = &try_stmt.body;
    let text = edits
        .src()
        .lines_text(&body[0], body.last().expect("a try has a body"));
    edits.replace_lines(try_stmt, &text)
}

/// Re-places statement `stmt` by `block(STATEMENT)`, an `if FLAG: … else: STATEMENT` whose
/// `else` runs the statement as it was.
pub fn wrap_in_if_else(
    edits: &mut FileEdits,
    stmt: &Stmt,
    block: impl FnOnce(&str) -> String,
) -> Result<()> {
    wrap(edits, stmt, block)
}

/// The inverse of [`wrap_in_if_else`]: the `else` body, back in place of the whole `if`.
pub fn unwrap_if_else(edits: &mut FileEdits, if_stmt: &StmtIf) -> Result<()> {
    let body = &if_stmt
        .elif_else_clauses
        .last()
        .expect("the caller found an `else`")
        .body;
    let text = edits
        .src()
        .lines_text(&body[0], body.last().expect("an else has a body"));
    edits.replace_lines(if_stmt, &text)
}

fn wrap(edits: &mut FileEdits, stmt: &Stmt, block: impl FnOnce(&str) -> String) -> Result<()> {
    let statement = edits.src().statement_text(stmt, None);
    let text = block(&statement);
    edits.replace_lines(stmt, &text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PySource;

    /// Runs `add` on `before`, checks the result is `after`, runs `remove` on it and checks that
    /// gives `before` back to the byte.
    fn round_trip(
        before: &str,
        after: &str,
        add: impl Fn(&mut FileEdits) -> Result<()>,
        remove: impl Fn(&mut FileEdits) -> Result<()>,
    ) {
        let settings = FormatSettings::default();
        let src = PySource::parse("t.py", before.to_string()).unwrap();
        let mut edits = FileEdits::new(&src, &settings);
        add(&mut edits).unwrap();
        let added = edits.apply().unwrap();
        assert_eq!(added, after, "add");
        let src = PySource::parse("t.py", added).unwrap();
        let mut edits = FileEdits::new(&src, &settings);
        remove(&mut edits).unwrap();
        assert_eq!(edits.apply().unwrap(), before, "remove");
    }

    fn def(src: &PySource, index: usize) -> &StmtFunctionDef {
        match &src.module.body[index] {
            Stmt::FunctionDef(def) => def,
            _ => panic!("statement {index} is not a def"),
        }
    }

    fn first_call(stmt: &Stmt) -> &ExprCall {
        find::calls_in_stmt(stmt)[0]
    }

    #[test]
    fn a_keyword_argument_comes_and_goes_with_its_comma() {
        let before = "def f(x):\n    y = g(x, k=1)\n";
        let after = "def f(x):\n    y = g(x, k=1, _do_mem=_do)\n";
        let stmt = |e: &FileEdits| def(e.src(), 0).body[0].clone();
        round_trip(
            before,
            after,
            |e| {
                let s = stmt(e);
                add_keyword_argument(e, &s, first_call(&s), "_do_mem=_do")
            },
            |e| {
                let s = stmt(e);
                assert!(remove_keyword_argument(e, &s, first_call(&s), "_do_mem")?);
                Ok(())
            },
        );
    }

    #[test]
    fn a_keyword_argument_of_an_empty_call_has_no_comma() {
        let before = "def f():\n    g()\n";
        let after = "def f():\n    g(_do_mem=_do)\n";
        let stmt = |e: &FileEdits| def(e.src(), 0).body[0].clone();
        round_trip(
            before,
            after,
            |e| {
                let s = stmt(e);
                add_keyword_argument(e, &s, first_call(&s), "_do_mem=_do")
            },
            |e| {
                let s = stmt(e);
                remove_keyword_argument(e, &s, first_call(&s), "_do_mem").map(|_| ())
            },
        );
    }

    #[test]
    fn a_parameter_after_a_magic_trailing_comma_gets_its_own_line() {
        let before = "def f(\n    self,\n    x,\n):\n    return x\n";
        let after = "def f(\n    self,\n    x,\n    _do_mem: bool = False,\n):\n    return x\n";
        round_trip(
            before,
            after,
            |e| add_last_parameter(e, def(e.src(), 0), "_do_mem: bool = False"),
            |e| remove_parameter(e, def(e.src(), 0), "_do_mem").map(|_| ()),
        );
    }

    #[test]
    fn a_parameter_without_a_magic_comma_is_keyword_only_and_the_header_rewraps() {
        let before = "class A:\n    def forward(self, x: int, offs: int, ks: list | None = None) -> int:\n        return x\n";
        let after = "class A:\n    def forward(\n        self, x: int, offs: int, ks: list | None = None, *, _do_mem: bool = False\n    ) -> int:\n        return x\n";
        let method = |src: &PySource| -> StmtFunctionDef {
            let Stmt::ClassDef(class) = &src.module.body[0] else {
                unreachable!()
            };
            let Stmt::FunctionDef(def) = &class.body[0] else {
                unreachable!()
            };
            def.clone()
        };
        round_trip(
            before,
            after,
            |e| {
                let d = method(e.src());
                add_last_parameter(e, &d, "_do_mem: bool = False")
            },
            |e| {
                let d = method(e.src());
                remove_parameter(e, &d, "_do_mem").map(|_| ())
            },
        );
    }

    #[test]
    fn a_parameter_is_refused_where_the_signature_has_no_place_for_it() {
        let settings = FormatSettings::default();
        let src = PySource::parse("t.py", "def f(*args):\n    pass\n".into()).unwrap();
        let mut edits = FileEdits::new(&src, &settings);
        let err = add_last_parameter(&mut edits, def(&src, 0), "_p=1").unwrap_err();
        assert!(err.to_string().contains("cannot add `_p`"), "{err}");
    }

    #[test]
    fn a_split_return_joins_back() {
        let before = "def f(x):\n    return g(x)\n";
        let after = "def f(x):\n    y = g(x)\n    return y\n";
        round_trip(
            before,
            after,
            |e| {
                let ret = def(e.src(), 0).body[0].clone();
                split_return(e, &ret, |expr| format!("y = {expr}\nreturn y"))
            },
            |e| {
                let body = def(e.src(), 0).body.clone();
                join_return(e, &body[0], &body[1])
            },
        );
    }

    #[test]
    fn a_split_return_the_user_rewrapped_joins_back_in_the_users_layout() {
        let settings = FormatSettings::default();
        for (split, joined) in [
            (
                "def f(x):\n    y = g(\n        x\n    )\n    return y\n",
                "def f(x):\n    return g(\n        x\n    )\n",
            ),
            (
                "def f(x):\n    y = (\n        a + b\n    )\n    return y\n",
                "def f(x):\n    return (\n        a + b\n    )\n",
            ),
        ] {
            let src = PySource::parse("t.py", split.to_string()).unwrap();
            let mut edits = FileEdits::new(&src, &settings);
            let body = def(&src, 0).body.clone();
            assert!(!edits.is_formatted(&body[0]), "{split}");
            join_return(&mut edits, &body[0], &body[1]).unwrap();
            assert_eq!(edits.apply().unwrap(), joined);
        }
    }

    #[test]
    fn a_nested_split_return_joins_back_to_one_call() {
        let before = "def f(x):\n    return down(act(x, 1), k=2)\n";
        let after = "def f(x):\n    gu = act(x, 1)\n    out = down(gu, k=2)\n    return out\n";
        round_trip(
            before,
            after,
            |e| {
                let ret = def(e.src(), 0).body[0].clone();
                assert!(split_nested_return(e, &ret, "gu", |inner, outer| {
                    format!("gu = {inner}\nout = {outer}\nreturn out")
                })?);
                Ok(())
            },
            |e| {
                let body = def(e.src(), 0).body.clone();
                assert!(join_nested_return(e, &body[0], &body[1], &body[2])?);
                Ok(())
            },
        );
    }

    #[test]
    fn a_return_without_a_nested_call_is_not_split() {
        let settings = FormatSettings::default();
        let src = PySource::parse("t.py", "def f(x):\n    return down(x)\n".into()).unwrap();
        let mut edits = FileEdits::new(&src, &settings);
        let ret = def(&src, 0).body[0].clone();
        assert!(!split_nested_return(&mut edits, &ret, "gu", |_, _| unreachable!()).unwrap());
        assert!(edits.is_empty());
    }

    #[test]
    fn a_try_wrapper_unwraps_to_the_statement() {
        let before = "def f(model):\n    model.step(1, 2)\n";
        let after = "def f(model):\n    try:\n        model.step(1, 2)\n    except MemoryError:\n        raise\n";
        round_trip(
            before,
            after,
            |e| {
                let stmt = def(e.src(), 0).body[0].clone();
                wrap_in_try(e, &stmt, |s| {
                    format!("try:\n    {s}\nexcept MemoryError:\n    raise")
                })
            },
            |e| {
                let Stmt::Try(t) = def(e.src(), 0).body[0].clone() else {
                    unreachable!()
                };
                unwrap_try(e, &t)
            },
        );
    }

    #[test]
    fn an_if_else_wrapper_unwraps_to_its_else_body() {
        let before = "def f(x):\n    y = g(x)\n";
        let after = "def f(x):\n    if _flag:\n        with p:\n            y = g(x)\n    else:\n        y = g(x)\n";
        round_trip(
            before,
            after,
            |e| {
                let stmt = def(e.src(), 0).body[0].clone();
                wrap_in_if_else(e, &stmt, |s| {
                    format!("if _flag:\n    with p:\n        {s}\nelse:\n    {s}")
                })
            },
            |e| {
                let Stmt::If(i) = def(e.src(), 0).body[0].clone() else {
                    unreachable!()
                };
                unwrap_if_else(e, &i)
            },
        );
    }
}
